"""CSV cells that a spreadsheet opens as text, never as a formula (CSV injection)."""

from __future__ import annotations

# OWASP's list (= + - @ tab carriage return), and the full-width forms that some
# spreadsheets in East Asian locales read as the same operators.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def formula_safe(text: str) -> str:
    """Text that starts like a formula, with a leading apostrophe: spreadsheets show it as
    typed and run nothing. Other text unchanged."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def formula_text(cell: str) -> str:
    """formula_safe undone: a cell read back from a CSV the console wrote."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS) else cell
