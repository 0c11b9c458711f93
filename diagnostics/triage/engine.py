"""Log triage in one pass with bounded memory: RE2 scans each chunk for any rule's pattern
(one combined automaton, as `grep -E` does), and only the lines it finds are matched rule by
rule. Chunks are scanned on a few threads (RE2 runs without the GIL) and merged in order.
The result ranks the first fatal cause above its consequences (an OOM kill that then shows
as timeouts and 502s is an OOM) and keeps a few example lines per rule with context. An
access log also gets its story (access_story): among findings of the same severity, the
category its lead cause points at comes first (a 429 spike outranks a few 502s).
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import re2
from django.utils.translation import override

from core.i18n import Message, later
from core.taxonomy import label
from diagnostics.triage import exit_codes, line_formats, sources, unsure
from diagnostics.triage.access_log import AccessStats, access_format, fields_in
from diagnostics.triage.access_story import Story, lead_categories, tell
from diagnostics.triage.rules import Rule, shipped

CHUNK_BYTES = 8 << 20
MAX_LINE_BYTES = 64 << 10  # a longer line is cut: a log line, not a blob
KEEP_PER_RULE = 5
CONTEXT_LINES = 2
WORKERS = max(1, min(4, os.cpu_count() or 1))  # RE2 releases the GIL: chunks scan in parallel


class TriageInputError(ValueError):
    """Input the triage cannot read (encoding, size); the message says what to do. str() is
    the English text (the CLI, logs); `message` is shown in the reader's language."""

    def __init__(self, message: Message):
        super().__init__(str(message))
        self.message = message


def english_label(category: str) -> str:
    """A category's label as a result stores it: in English, shown translated (triage/shown.py)."""
    with override("en"):
        return label(category)


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
            "label": english_label(self.category),
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
    story: dict[str, Any] | None = None  # what the access log says, its causes ranked
    unsure: dict[str, Any] | None = None  # no rule matched: the suspicious lines, the closest candidates

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
            "category_label": english_label(self.category) if self.category else "",
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
            "access_story": self.story,
            "unsure": self.unsure,
        }


COMBINED_MAX_MEM = 256 << 20  # RE2's default (8 MB) is too small a DFA budget for every rule at once


def _combined_options() -> re2.Options:
    """The one automaton of all patterns gets memory enough to stay a DFA (RE2 falls back to a
    far slower engine, and says so on stderr, when its DFA runs out)."""
    options = re2.Options()
    options.max_mem = COMBINED_MAX_MEM
    return options


class Matcher:
    def __init__(self, rules: Iterable[Rule]):
        self.rules = tuple(rules)
        patterns = [p.encode() for r in self.rules for p in r.patterns] + [exit_codes.PATTERN]
        alternation = b"|".join(b"(?:" + p + b")" for p in patterns)
        self.any = re2.compile(alternation, _combined_options())
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
        return _Gunzipped(gzip.GzipFile(fileobj=stream))  # type: ignore[return-value]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise TriageInputError(later("the log is UTF-16; convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)"))
    return stream


class _Gunzipped:
    """A gzip stream whose damage (cut short, corrupt, not gzip after its first bytes) is a
    TriageInputError saying so, not gzip's or zlib's own exception."""

    def __init__(self, stream: gzip.GzipFile):
        self.stream = stream

    def read(self, size: int = -1) -> bytes:
        try:
            return self.stream.read(size)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise TriageInputError(
                later(
                    "the gzip file is damaged or cut short (%(error)s); check it with gzip -t", error=str(exc)
                )
            ) from None


@dataclass
class _ChunkHits:
    """What one chunk found, with line numbers relative to the chunk's first line."""

    newlines: int
    lines: list[tuple[int, bytes, list[Rule], list[str], list[str]]] = field(default_factory=list)
    exit_codes: list[tuple[int, dict]] = field(default_factory=list)


def _scan_chunk(matcher: Matcher, buf: bytes, end_at: int) -> _ChunkHits:
    """The complete lines in buf[:end_at]: RE2 runs without the GIL, so chunks scan in parallel."""
    hits = _ChunkHits(newlines=buf.count(b"\n", 0, end_at))
    cursor, cursor_line, done_until = 0, 0, -1
    for found in matcher.any.finditer(buf, 0, end_at):
        start = buf.rfind(b"\n", 0, found.start()) + 1
        if start <= done_until:
            continue
        end = buf.find(b"\n", found.start(), end_at)
        end = end_at if end < 0 else end
        done_until = end
        cursor_line += buf.count(b"\n", cursor, start)
        cursor = start
        line = buf[start : min(end, start + MAX_LINE_BYTES)]
        rules = matcher.rules_of(line)
        if rules:
            hits.lines.append(
                (cursor_line, line, rules, _lines_before(buf, start), _lines_after(buf, end, end_at))
            )
        hits.exit_codes += [(cursor_line, code) for code in exit_codes.find(line)]
    return hits


class _Scan:
    def __init__(self, matcher: Matcher):
        self.matcher = matcher
        self.hits: dict[str, RuleHits] = {}
        self.lines = 0
        self.bytes = 0
        self.head = b""
        self.tail = b""  # the last lines read, for what to show when no rule matches
        self.exit_codes: list[dict[str, Any]] = []
        self.unwrap: Callable[[bytes], bytes] | None = None  # JSON lines / colour codes to plain lines

    def see_head(self, buf: bytes) -> None:
        """The log's first 64 KB: what wrote it, and how its lines are unwrapped."""
        self.head = buf[:65536]
        self.unwrap = line_formats.unwrapper(self.head)

    def keep_tail(self, buf: bytes, end: int) -> None:
        """The last TAIL_BYTES read, from a whole line: only buf[:end]'s own last TAIL_BYTES are
        copied (this runs on every chunk)."""
        start = max(0, end - unsure.TAIL_BYTES)
        tail = self.tail + buf[start:end]
        if start or len(tail) > unsure.TAIL_BYTES:
            tail = tail[-unsure.TAIL_BYTES :]
            tail = tail[tail.find(b"\n") + 1 :]  # from a whole line
        self.tail = tail

    def merge(self, found: _ChunkHits, line_base: int) -> None:
        """A chunk's findings, in file order, with absolute line numbers."""
        for relative, line, rules, before, after in found.lines:
            for rule in rules:
                self._record(rule, line_base + relative, line, before, after)
        for relative, code in found.exit_codes:
            if len(self.exit_codes) < 20:
                self.exit_codes.append({"line": line_base + relative, **code})

    def _record(self, rule: Rule, line_no: int, line: bytes, before: list[str], after: list[str]) -> None:
        hits = self.hits.setdefault(rule.id, RuleHits(rule=rule, first_line=line_no))
        hits.count += 1
        if len(hits.examples) < KEEP_PER_RULE:
            hits.examples.append(Match(line_no, _decode(line), rule.id, before, after))


def _lines_before(buf: bytes, start: int) -> list[str]:
    lines, pos = [], start - 1
    for _ in range(CONTEXT_LINES):
        if pos <= 0:
            break
        begin = buf.rfind(b"\n", 0, pos) + 1
        lines.insert(0, _decode(buf[begin : min(pos, begin + 500)]))
        pos = begin - 1
    return lines


def _lines_after(buf: bytes, end: int, end_at: int) -> list[str]:
    lines, pos = [], end + 1
    for _ in range(CONTEXT_LINES):
        if pos >= end_at:
            break
        stop = buf.find(b"\n", pos, end_at)
        stop = end_at if stop < 0 else stop
        lines.append(_decode(buf[pos : min(stop, pos + 500)]))
        pos = stop + 1
    return lines


def _merge(scan: _Scan, future: Future[_ChunkHits], line_base: int) -> int:
    found = future.result()
    scan.merge(found, line_base)
    return line_base + found.newlines


def _check_text(chunk: bytes) -> None:
    if b"\x00" in chunk[:4096]:
        raise TriageInputError(later("this is not a text log (it holds NUL bytes)"))


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
    pending: deque[Future[_ChunkHits]] = deque()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        while True:
            chunk = reader.read(CHUNK_BYTES)
            scan.bytes += len(chunk)
            if max_bytes is not None and scan.bytes > max_bytes:
                raise TriageInputError(
                    later(
                        "the log is over %(limit)s bytes; triage a part of it (tail -n ...)",
                        limit=f"{max_bytes:,}",
                    )
                )
            if not chunk:
                break
            if scan.bytes == len(chunk):
                _check_text(chunk)
            buf = carry + chunk
            cut = buf.rfind(b"\n") + 1
            if cut == 0 and len(buf) > MAX_LINE_BYTES:
                cut = len(buf)  # a line longer than any log line: cut it rather than hold it
            if not scan.head:
                scan.see_head(buf)
                found_format = access_format(scan.head)
                if found_format:
                    access = AccessStats(
                        window_minutes=window_minutes,
                        format=found_format,
                        fields=fields_in(scan.head, found_format),
                    )
            if access is not None:
                access.feed(buf[:cut])
            lines, end = buf, cut
            if scan.unwrap:
                lines = scan.unwrap(buf[:cut])
                end = len(lines)
            pending.append(pool.submit(_scan_chunk, scan.matcher, lines, end))
            scan.keep_tail(lines, end)
            carry = buf[cut:]
            while len(pending) > WORKERS:  # bounded: at most a few chunks in memory
                line_base = _merge(scan, pending.popleft(), line_base)
            if progress:
                progress(scan.bytes)
        while pending:
            line_base = _merge(scan, pending.popleft(), line_base)
    if carry:
        if not scan.head:
            scan.see_head(carry)
        lines = scan.unwrap(carry) if scan.unwrap else carry
        scan.keep_tail(lines, len(lines))
        scan.merge(_scan_chunk(scan.matcher, lines, len(lines)), line_base)
        if access is not None:
            access.feed(carry + b"\n")
        line_base += 1
    scan.lines = line_base - 1
    return _result(scan, access)


def _result(scan: _Scan, access: AccessStats | None = None) -> TriageResult:
    by_category: dict[str, list[RuleHits]] = {}
    for hits in scan.hits.values():
        by_category.setdefault(hits.rule.category, []).append(hits)
    _combine(by_category)
    findings = []
    for category, hits in by_category.items():
        hits.sort(key=lambda h: (not h.rule.when, h.rule.rank, h.first_line))
        findings.append(
            Finding(
                category=category,
                severity=hits[0].rule.severity,
                first_line=min(h.first_line for h in hits),
                count=sum(h.count for h in hits),
                rules=hits,
            )
        )
    story = tell(stats=access) if access is not None and access.found else None
    findings.sort(key=_ranking(story))
    doubt = None
    if not findings and story is None:
        tail_lines = scan.tail.count(b"\n") + (0 if scan.tail.endswith(b"\n") else 1)
        doubt = unsure.look(scan.tail, first_line=scan.lines - tail_lines + 1)
    return TriageResult(
        findings=findings,
        lines=scan.lines,
        bytes=scan.bytes,
        sources=sources.detect(scan.head),
        exit_codes=scan.exit_codes,
        access=access.to_dict() if access is not None and access.found else None,
        story=story.to_dict() if story is not None else None,
        unsure=doubt,
    )


def _combine(by_category: dict[str, list[RuleHits]]) -> None:
    """Combination rules (`when`): kept only beside a finding of one of their categories,
    which they then take in; otherwise dropped."""
    for category in list(by_category):
        combined = [h for h in by_category.get(category, ()) if h.rule.when]
        if not combined:
            continue
        rest = [h for h in by_category[category] if not h.rule.when]
        wanted = {c for h in combined for c in h.rule.when}
        taken = [h for c in sorted(wanted) if c != category for h in by_category.get(c, [])]
        if not taken:
            if rest:
                by_category[category] = rest
            else:
                del by_category[category]
            continue
        for c in wanted:
            by_category.pop(c, None)
        # The combination speaks first; the lines it took in keep their place as evidence.
        by_category[category] = combined + rest + taken


def _ranking(story: Story | None) -> Callable[[Finding], tuple[int, int, int]]:
    """Severity first; within a severity, the access story's lead category, then the first line."""
    preferred = list(lead_categories(story))

    def key(finding: Finding) -> tuple[int, int, int]:
        severity, first_line = finding.rank
        pick = preferred.index(finding.category) if finding.category in preferred else len(preferred)
        return (severity, pick, first_line)

    return key


def triage_text(text: str | bytes, **options: Any) -> TriageResult:
    # A lone surrogate (text decoded leniently) stays an invalid byte, shown as U+FFFD like any other.
    data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
    return triage_stream(io.BufferedReader(io.BytesIO(data)), **options)


def triage_path(path: str | Path, **options: Any) -> TriageResult:
    with open(path, "rb") as handle:
        return triage_stream(handle, **options)
