"""Log triage in one pass with bounded memory: RE2 scans each chunk for any rule's pattern
(one combined automaton, as `grep -E` does), and only the lines it finds are matched rule by
rule. The result ranks the first fatal cause above its consequences (an OOM kill that then
shows as timeouts and 502s is an OOM) and keeps a few example lines per rule with context.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import re2

from diagnostics.taxonomy import label
from diagnostics.triage import exit_codes, sources
from diagnostics.triage.access_log import AccessStats
from diagnostics.triage.rules import Rule, shipped

CHUNK_BYTES = 8 << 20
MAX_LINE_BYTES = 64 << 10  # a longer line is cut: a log line, not a blob
KEEP_PER_RULE = 5
CONTEXT_LINES = 2


class TriageInputError(ValueError):
    """Input the triage cannot read (encoding, size); the message says what to do."""


@dataclass
class Match:
    line: int
    text: str
    rule: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "text": self.text,
            "rule": self.rule,
            "before": self.before,
            "after": self.after,
        }


@dataclass
class RuleHits:
    rule: Rule
    count: int = 0
    first_line: int = 0
    examples: list[Match] = field(default_factory=list)


@dataclass
class Finding:
    """One category found, with the rules that found it."""

    category: str
    severity: str
    first_line: int
    count: int
    rules: list[RuleHits]

    @property
    def rank(self) -> tuple[int, int]:
        return (min(h.rule.rank for h in self.rules), self.first_line)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "label": label(self.category),
            "severity": self.severity,
            "first_line": self.first_line,
            "count": self.count,
            "rules": [h.rule.id for h in self.rules],
        }


@dataclass
class TriageResult:
    findings: list[Finding]
    lines: int
    bytes: int
    sources: list[str]
    exit_codes: list[dict[str, Any]]
    access: dict[str, Any] | None = None  # nginx access-log analysis, when the log is one

    @property
    def primary(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @property
    def category(self) -> str:
        return self.primary.category if self.primary else ""

    @property
    def root_cause(self) -> str:
        return self.primary.rules[0].rule.root_cause if self.primary else ""

    @property
    def fix(self) -> str:
        return self.primary.rules[0].rule.fix if self.primary else ""

    def matches(self) -> list[Match]:
        """Example lines of every finding, the primary's first, each in line order."""
        return [m for f in self.findings for h in f.rules for m in h.examples]

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "category_label": label(self.category) if self.category else "",
            "root_cause": self.root_cause,
            "fix": self.fix,
            "matches": [m.to_dict() for m in self.matches()],
            "secondary": [f.to_dict() for f in self.findings[1:]],
            "findings": [f.to_dict() for f in self.findings],
            "exit_codes": self.exit_codes,
            "sources": self.sources,
            "lines": self.lines,
            "bytes": self.bytes,
            "access_log": self.access,
        }


class Matcher:
    def __init__(self, rules: Iterable[Rule]):
        self.rules = tuple(rules)
        patterns = [p.encode() for r in self.rules for p in r.patterns] + [exit_codes.PATTERN]
        alternation = b"|".join(b"(?:" + p + b")" for p in patterns)
        self.any = re2.compile(alternation)
        self.checks = [
            (
                rule,
                [re2.compile(p.encode()) for p in rule.patterns],
                [re2.compile(p.encode()) for p in rule.unless],
            )
            for rule in self.rules
        ]

    def rules_of(self, line: bytes) -> list[Rule]:
        return [
            rule
            for rule, patterns, unless in self.checks
            if any(p.search(line) for p in patterns) and not any(u.search(line) for u in unless)
        ]


def _decode(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r")


def _open(stream: IO[bytes]) -> IO[bytes]:
    """Gzip is read through; UTF-16 and binary are refused with what to do."""
    head = stream.peek(4)[:4] if hasattr(stream, "peek") else b""
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=stream)  # type: ignore[return-value]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise TriageInputError("the log is UTF-16; convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)")
    return stream


class _Scan:
    def __init__(self, matcher: Matcher):
        self.matcher = matcher
        self.hits: dict[str, RuleHits] = {}
        self.lines = 0
        self.bytes = 0
        self.head = b""
        self.exit_codes: list[dict[str, Any]] = []

    def feed(self, buf: bytes, line_base: int) -> None:
        """Match the complete lines in buf, whose first line is number line_base."""
        if len(self.head) < 65536:
            self.head += buf[: 65536 - len(self.head)]
        cursor, cursor_line, done_until = 0, line_base, -1
        for found in self.matcher.any.finditer(buf):
            start = buf.rfind(b"\n", 0, found.start()) + 1
            if start <= done_until:
                continue
            end = buf.find(b"\n", found.start())
            end = len(buf) if end < 0 else end
            done_until = end
            cursor_line += buf.count(b"\n", cursor, start)
            cursor = start
            line = buf[start : min(end, start + MAX_LINE_BYTES)]
            for rule in self.matcher.rules_of(line):
                self._record(rule, cursor_line, line, buf, start, end)
            for code in exit_codes.find(line):
                if len(self.exit_codes) < 20:
                    self.exit_codes.append({"line": cursor_line, **code})

    def _record(self, rule: Rule, line_no: int, line: bytes, buf: bytes, start: int, end: int) -> None:
        hits = self.hits.setdefault(rule.id, RuleHits(rule=rule, first_line=line_no))
        hits.count += 1
        if len(hits.examples) < KEEP_PER_RULE:
            hits.examples.append(
                Match(line_no, _decode(line), rule.id, _lines_before(buf, start), _lines_after(buf, end))
            )


def _lines_before(buf: bytes, start: int) -> list[str]:
    lines, pos = [], start - 1
    for _ in range(CONTEXT_LINES):
        if pos <= 0:
            break
        begin = buf.rfind(b"\n", 0, pos) + 1
        lines.insert(0, _decode(buf[begin : min(pos, begin + 500)]))
        pos = begin - 1
    return lines


def _lines_after(buf: bytes, end: int) -> list[str]:
    lines, pos = [], end + 1
    for _ in range(CONTEXT_LINES):
        if pos >= len(buf):
            break
        stop = buf.find(b"\n", pos)
        stop = len(buf) if stop < 0 else stop
        lines.append(_decode(buf[pos : min(stop, pos + 500)]))
        pos = stop + 1
    return lines


def triage_stream(
    stream: IO[bytes],
    *,
    rules: Iterable[Rule] | None = None,
    progress: Callable[[int], None] | None = None,
    max_bytes: int | None = None,
    window_minutes: int = 1,
) -> TriageResult:
    """Triage a binary stream in one pass; `progress(bytes_read)` after each chunk. An nginx
    access log is also counted per client IP and time window in the same pass."""
    scan = _Scan(Matcher(rules or shipped()))
    access: AccessStats | None = None
    reader = _open(stream if hasattr(stream, "peek") else io.BufferedReader(stream))  # type: ignore[arg-type]
    carry, line_base = b"", 1
    while True:
        chunk = reader.read(CHUNK_BYTES)
        scan.bytes += len(chunk)
        if max_bytes is not None and scan.bytes > max_bytes:
            raise TriageInputError(f"the log is over {max_bytes:,} bytes; triage a part of it (tail -n ...)")
        if not chunk:
            break
        if b"\x00" in chunk[:4096] and scan.bytes == len(chunk):
            raise TriageInputError("this is not a text log (it holds NUL bytes)")
        buf = carry + chunk
        cut = buf.rfind(b"\n") + 1
        if cut == 0 and len(buf) > MAX_LINE_BYTES:
            cut = len(buf)  # a line longer than any log line: cut it rather than hold it
        scan.feed(buf[:cut], line_base)
        if line_base == 1 and "nginx_access" in sources.detect(scan.head):
            access = AccessStats(window_minutes=window_minutes)
        if access is not None:
            access.feed(buf[:cut])
        line_base += buf.count(b"\n", 0, cut)
        carry = buf[cut:]
        if progress:
            progress(scan.bytes)
    if carry:
        scan.feed(carry, line_base)
        if access is not None:
            access.feed(carry + b"\n")
        line_base += 1
    scan.lines = line_base - 1
    return _result(scan, access)


def _result(scan: _Scan, access: AccessStats | None = None) -> TriageResult:
    by_category: dict[str, list[RuleHits]] = {}
    for hits in scan.hits.values():
        by_category.setdefault(hits.rule.category, []).append(hits)
    findings = []
    for category, hits in by_category.items():
        hits.sort(key=lambda h: (h.rule.rank, h.first_line))
        findings.append(
            Finding(
                category=category,
                severity=hits[0].rule.severity,
                first_line=min(h.first_line for h in hits),
                count=sum(h.count for h in hits),
                rules=hits,
            )
        )
    findings.sort(key=lambda f: f.rank)
    return TriageResult(
        findings=findings,
        lines=scan.lines,
        bytes=scan.bytes,
        sources=sources.detect(scan.head),
        exit_codes=scan.exit_codes,
        access=access.to_dict() if access is not None and access.found else None,
    )


def triage_text(text: str | bytes, **options: Any) -> TriageResult:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return triage_stream(io.BufferedReader(io.BytesIO(data)), **options)


def triage_path(path: str | Path, **options: Any) -> TriageResult:
    with open(path, "rb") as handle:
        return triage_stream(handle, **options)
