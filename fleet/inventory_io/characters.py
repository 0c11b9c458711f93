"""What an inventory file may hold before it is parsed: UTF-8 text without control characters.

Both formats are held to the characters YAML accepts (PyYAML's reader refuses the rest, and
PostgreSQL refuses NUL in text): tab, line feed and carriage return are the only control
characters; lone surrogates, U+FFFE and U+FFFF are not text. Each problem names its line and
column, so it is found without a hex editor.
"""

from __future__ import annotations

import codecs
import re

from django.utils.translation import gettext

from fleet.inventory_io.outcome import ImportError_

UNPRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MAX_REPORTED = 20  # lines with such a character reported; past this one error says how many more


class UnreadableFile(ValueError):
    """Bytes that are not UTF-8 text; the message names the line and column of the first bad byte."""


def text_of(data: bytes) -> str:
    """An uploaded file's text: UTF-8, with or without a byte-order mark."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UnreadableFile(gettext("The file is UTF-16, not UTF-8 text: save it as UTF-8."))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8-sig")
        line, column = place(before, len(before))
        message = gettext(
            "Line %(line)d, column %(column)d: the file is not UTF-8 text (byte 0x%(byte)02X); "
            "save it as UTF-8."
        )
        raise UnreadableFile(message % {"line": line, "column": column, "byte": data[exc.start]}) from None


def place(text: str, position: int) -> tuple[int, int]:
    """The line and column (both from 1) of a character of `text`."""
    line_start = text.rfind("\n", 0, position) + 1
    return text.count("\n", 0, position) + 1, position - line_start + 1


def unprintable_error(text: str, position: int) -> ImportError_:
    """The error for the character at `position`, which the file may not hold."""
    line, column = place(text, position)
    message = gettext("Column %(column)d holds the character %(character)s, which an inventory may not hold.")
    return ImportError_(message % {"column": column, "character": codepoint(text[position])}, line=line)


def codepoint(character: str) -> str:
    return f"U+{ord(character):04X}"


def character_errors(text: str) -> list[ImportError_]:
    """One error for each line holding a character the file may not hold (its first one), for
    the first MAX_REPORTED such lines; then one error saying that there are more."""
    errors: list[ImportError_] = []
    found = UNPRINTABLE.search(text)
    while found:
        if len(errors) == MAX_REPORTED:
            line, _ = place(text, found.start())
            errors.append(ImportError_(gettext("More lines hold such characters."), line=line))
            break
        errors.append(unprintable_error(text, found.start()))
        next_line = text.find("\n", found.start())
        found = UNPRINTABLE.search(text, next_line + 1) if next_line >= 0 else None
    return errors
