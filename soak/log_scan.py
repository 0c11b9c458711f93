"""Unhandled exceptions in the console's log: every line of every process that says
Traceback, ERROR, CRITICAL, Unhandled or WORKER TIMEOUT, with the rest of its traceback,
unless ALLOWED expects it.

The log is honcho's: `HH:MM:SS name | text`, one process's lines interleaved with the
others', so a traceback is followed within its own process."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

ALARMS = re.compile(r"Traceback|\bERROR\b|\bCRITICAL\b|Unhandled|WORKER TIMEOUT")
_LINE = re.compile(r"^\d\d:\d\d:\d\d (?P<name>\S+)\s*\| ?(?P<text>.*)$")
# After a log line, a traceback may follow; chained tracebacks are joined by these headers.
_HEADERS = ("Traceback", "During handling", "The above exception")
MAX_BLOCK_LINES = 200


@dataclass(frozen=True)
class Allowed:
    pattern: re.Pattern[str]
    why: str
    process: str | None = None  # None: in any process


# What the soak expects to see, each with its reason (docs/soak.md lists them).
ALLOWED: tuple[Allowed, ...] = ()


@dataclass
class Finding:
    process: str
    line_no: int
    lines: list[str] = field(default_factory=list)
    in_traceback: bool = False  # frames seen, the exception line not yet

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def headline(self) -> str:
        """A traceback's exception line (the last), else the line that raised the alarm."""
        if any(line.startswith("Traceback") for line in self.lines):
            return next(line for line in reversed(self.lines) if line.strip())
        return self.lines[0]

    def take(self, text: str) -> bool:
        """Whether `text`, the next line of the same process, belongs to this finding."""
        if len(self.lines) >= MAX_BLOCK_LINES:
            return False
        if self.in_traceback:
            self.lines.append(text)
            if text and not text[0].isspace() and not text.startswith(_HEADERS):
                self.in_traceback = False  # the exception line ends the traceback
            return True
        if text.startswith(_HEADERS) or not text.strip():
            self.lines.append(text)
            self.in_traceback = text.startswith("Traceback")
            return True
        return False


def split_lines(lines: Iterable[str]) -> Iterable[tuple[int, str, str]]:
    """(line number, process name, text) of each prefixed line; the console's own unprefixed
    lines count as the process "console"."""
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n")
        match = _LINE.match(line)
        if match:
            yield number, match["name"], match["text"]
        elif line:
            yield number, "console", line


def scan(lines: Iterable[str], *, allowed: tuple[Allowed, ...] = ALLOWED) -> tuple[list[Finding], int]:
    """The findings nothing allows, and how many were allowed."""
    open_findings: dict[str, Finding] = {}
    found: list[Finding] = []
    for number, process, text in split_lines(lines):
        current = open_findings.get(process)
        if current is not None and current.take(text):
            continue
        open_findings.pop(process, None)
        if ALARMS.search(text):
            finding = Finding(process=process, line_no=number, lines=[text])
            finding.in_traceback = text.startswith("Traceback")
            found.append(finding)
            open_findings[process] = finding
    kept = [f for f in found if not _allowed(f, allowed)]
    return kept, len(found) - len(kept)


def _allowed(finding: Finding, allowed: tuple[Allowed, ...]) -> bool:
    return any(
        (rule.process is None or rule.process == finding.process) and rule.pattern.search(finding.text)
        for rule in allowed
    )
