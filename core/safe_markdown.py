"""Markdown that people or outside sources wrote, made inert for whatever renders it.

The console's own pages sanitize rendered notes with nh3 (incidents.notes); a downloaded
postmortem is rendered later, by a wiki, an editor or a Git forge, so the Markdown itself
must carry nothing that runs:

- script schemes (javascript:, vbscript:) anywhere in the text lose their colon, however
  they are spelled: any case, tabs or newlines inside (browsers drop those from URLs),
  character references (&#106;, &#x6A;, &colon;), percent-encoding, backslash escapes;
- links, images and reference definitions keep only http, https, mailto and relative
  addresses: any other scheme (data:, file:, ...) loses its colon the same way;
- raw HTML, comments and autolinks other than http(s) and mailto show as text (their `<`
  becomes &lt;); attribute lists that set attributes ({: onclick=...}) show as text.

A scheme loses its colon to the full-width colon (U+FF1A), so the text still reads the same
and the address becomes a harmless relative one. Code spans are not told apart from prose
(renderers disagree on where they end), so a `<` written in code reads &lt; there.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
INERT_COLON = "\uff1a"  # full-width colon: reads as a colon, is no URL scheme's end

# One unit of source text and what a renderer and a browser may turn it into.
_UNIT = re.compile(
    # A character reference. Any longer number is past U+10FFFF (read as U+FFFD), and no
    # entity name is longer: the bounds keep html.unescape linear.
    r"&(?:#0*[0-9]{1,8};?|#[xX]0*[0-9a-fA-F]{1,7};?|[A-Za-z][A-Za-z0-9]{0,31};?)"
    r"|%[0-9a-fA-F]{2}"  # percent-encoding
    r"|\\[!-/:-@\[-`{-~]"  # backslash escape of ASCII punctuation (CommonMark)
    r"|.",
    re.DOTALL,
)
_NUMBER = re.compile(r"&#(?P<hex>[xX]?)0*(?P<digits>[0-9a-fA-F]*);?")
_DROPPED = frozenset("\t\n\r")  # removed from anywhere in a URL by browsers (WHATWG URL)
_SCRIPT_SCHEME = re.compile(r"(?:java|vb|live)script:", re.IGNORECASE)
# Where a link's address starts: `](` of an inline link or image, `]:` of a reference
# definition, each maybe followed by blanks, a line break and an opening `<`.
_ADDRESS = re.compile(r"\][ \t\r\n]*[(:][ \t\r\n]*<?")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+-.")
# A `<` that a renderer may read as the start of a tag, comment, declaration or autolink,
# unless it starts an autolink that may stay.
_TAG_START = re.compile(r"(?P<autolink><(?:https?://|mailto:)[^\s<>\"'`]*>)|<(?=[A-Za-z/!?])", re.IGNORECASE)
_ATTRIBUTE_LIST = re.compile(r"\{(?=[^{}\n]*=[^{}\n]*\})")


@dataclass(frozen=True)
class _Decoded:
    """The text as a browser may read it, each character traced back to the source."""

    text: str
    starts: list[int]  # source offset of each unit
    ends: list[int]
    owner: list[int]  # unit of each character of text

    @classmethod
    def of(cls, source: str) -> _Decoded:
        text: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        owner: list[int] = []
        for index, unit in enumerate(_UNIT.finditer(source)):
            starts.append(unit.start())
            ends.append(unit.end())
            for char in _decode(unit.group()):
                if char not in _DROPPED:
                    text.append(char)
                    owner.append(index)
        return cls("".join(text), starts, ends, owner)


def _decode(unit: str) -> str:
    if len(unit) == 1:
        return unit
    if number := _NUMBER.fullmatch(unit):  # without its leading zeros, which browsers skip
        return html.unescape(f"&#{number['hex']}{number['digits'] or '0'};")
    if unit[0] == "&":
        return html.unescape(unit)
    return chr(int(unit[1:], 16)) if unit[0] == "%" else unit[1]


def inert_markdown(text: str) -> str:
    """Markdown as written, minus what a renderer would run (see the module's docstring)."""
    text = _neutralise(text, _script_schemes)
    text = _neutralise(text, _unsafe_addresses)
    text = _TAG_START.sub(lambda m: m.group("autolink") or "&lt;", text)
    return _ATTRIBUTE_LIST.sub("&#123;", text)


def inert_line(text: str) -> str:
    """One line of it: line breaks become spaces, so a value cannot start a block of its own
    (a heading, a reference definition) in the document around it."""
    return inert_markdown(" ".join(str(text).splitlines()))


Spans = Iterator[tuple[int, int, str]]  # (source start, source end, scheme) to replace


def _neutralise(text: str, find: Callable[[str, _Decoded], Spans]) -> str:
    """Replace each source span that find() reports with its scheme and an inert colon."""
    decoded = _Decoded.of(text)
    pieces: list[str] = []
    last = 0
    for start, end, scheme in find(text, decoded):
        if start < last:
            continue
        pieces += [text[last:start], scheme + INERT_COLON]
        last = end
    return "".join(pieces) + text[last:]


def _script_schemes(text: str, decoded: _Decoded) -> Spans:
    for match in _SCRIPT_SCHEME.finditer(decoded.text):
        first, colon = decoded.owner[match.start()], decoded.owner[match.end() - 1]
        yield decoded.starts[first], decoded.ends[colon], match.group()[:-1].lower()


def _unsafe_addresses(text: str, decoded: _Decoded) -> Spans:
    for match in _ADDRESS.finditer(text):
        unit = bisect_right(decoded.starts, match.end() - 1)
        found = _scheme_at(decoded, unit)
        if found and found[2] not in SAFE_SCHEMES:
            yield found


def _scheme_at(decoded: _Decoded, unit: int) -> tuple[int, int, str] | None:
    """The scheme of the address starting at source unit `unit`: (source start, source end
    past its colon, scheme), or None for a relative address."""
    position = _first_char_of(decoded, unit)
    while position < len(decoded.text) and decoded.text[position] <= " ":
        position += 1  # browsers strip C0 controls and spaces from an address's start
    begin, scheme = position, []
    while position < len(decoded.text):
        char = decoded.text[position].lower()
        if char == ":" and scheme:
            first, colon = decoded.owner[begin], decoded.owner[position]
            return decoded.starts[first], decoded.ends[colon], "".join(scheme)
        if char not in _SCHEME_CHARS or (not scheme and not char.isalpha()):
            return None
        scheme.append(char)
        position += 1
    return None


def _first_char_of(decoded: _Decoded, unit: int) -> int:
    """Index in decoded.text of the first character that unit `unit` or a later one gave."""
    return bisect_right(decoded.owner, unit - 1)
