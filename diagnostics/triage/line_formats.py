"""Logs that are not plain lines, turned into plain lines before the rules read them, one
output line per input line (so line numbers stay those of the file):

- JSON lines whose text sits in a field: TGI's JSON logs (`fields.message`), Docker's
  json-file driver (`log`), journald's export (`MESSAGE`), klog/zap/structlog (`msg`,
  `message`). The line becomes "LEVEL message", the message unescaped, its own newlines
  shown as " ⏎ " (a traceback in one JSON field stays on its line). Lines that are not
  such objects pass unchanged; an nginx JSON access log has no message field and is left
  to the access-log reader.
- Colour codes: Ray, SGLang and uvicorn colour their output; the escape sequences, and the
  "^[[36m" form they take once copied from a terminal, are removed.

`unwrapper(head)` decides from the log's first 64 KB and returns the function to apply to
each chunk of whole lines, or None for plain logs (which are then read as they are).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\^\[\[[0-9;]*m")
_MESSAGE_KEYS = ("message", "msg", "log", "MESSAGE")
_LEVEL_KEYS = ("level", "levelname", "severity", "lvl")
NEWLINE_MARK = " \u23ce "
SAMPLE_LINES = 20


def _message_of(obj: Any) -> tuple[str, str] | None:
    """(level, message) of a structured log line; None when it carries no message field."""
    if not isinstance(obj, dict):
        return None
    fields = obj.get("fields")
    holders = (fields, obj) if isinstance(fields, dict) else (obj,)
    for holder in holders:
        for key in _MESSAGE_KEYS:
            value = holder.get(key)
            if isinstance(value, str):
                level = next((str(obj[k]) for k in _LEVEL_KEYS if isinstance(obj.get(k), str)), "")
                return level.upper(), value
    return None


def _plain(line: bytes) -> bytes:
    if not line.lstrip().startswith(b"{"):  # as is_json_lines reads it
        return line
    try:
        found = _message_of(json.loads(line))
    except (ValueError, RecursionError):  # not JSON after all (or cut, or nested past reason): as it is
        return line
    if found is None:
        return line
    level, message = found
    text = message.rstrip("\r\n").replace("\r\n", "\n").replace("\n", NEWLINE_MARK)
    # A lone surrogate ("\ud800" in the JSON, or its bytes) stays the bytes it was: an invalid
    # byte like any other, shown as U+FFFD.
    return f"{level} {text}".strip().encode("utf-8", errors="surrogatepass")


def _json_lines(chunk: bytes) -> bytes:
    # A chunk's final newline leaves an empty last piece, which _plain keeps empty.
    return b"\n".join(_plain(line.rstrip(b"\r")) for line in chunk.split(b"\n"))


def _strip_colours(chunk: bytes) -> bytes:
    return _ANSI.sub(b"", chunk)


def is_json_lines(head: bytes) -> bool:
    """Most of the first lines are JSON objects with a message field."""
    sample = [line.strip() for line in head.split(b"\n")[:-1] if line.strip()][:SAMPLE_LINES]
    if not sample:
        return False
    structured = 0
    for line in sample:
        if line.startswith(b"{"):
            try:
                structured += _message_of(json.loads(line)) is not None
            except (ValueError, RecursionError):
                continue
    return structured * 2 > len(sample)


def unwrapper(head: bytes) -> Callable[[bytes], bytes] | None:
    json_lines = is_json_lines(head)
    colours = b"\x1b[" in head or b"^[[" in head
    if json_lines and colours:
        return lambda chunk: _json_lines(_strip_colours(chunk))
    if json_lines:
        return _json_lines
    if colours:
        return _strip_colours
    return None
