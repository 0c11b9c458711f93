"""Figures that show their working: every number the calculator gives carries its formula
with the inputs filled in, so an engineer can check it against vLLM's start-up log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.translation import pgettext_lazy

from core.i18n import Message, shown


class Text(str):
    """English text (as the API, the CLI and callers read it) that keeps its message
    (core.i18n), so a page can show it in the reader's language: `{{ note.message|shown:note }}`."""

    message: Message

    def __new__(cls, message: Message) -> Text:
        text = super().__new__(cls, str(message))
        text.message = message
        return text


GiB = 1024**3
MiB = 1024**2


@dataclass(frozen=True, kw_only=True)
class Figure:
    key: str
    label: Message | str  # a message, so the page shows it in the reader's language
    value: float
    unit: str  # "GiB", "bytes", "tokens", "blocks", "requests", "x", "groups"
    formula: str  # stays as written: names and numbers to check against vLLM's log
    note: Message | str = ""

    @property
    def shown(self) -> str:
        """The value and its unit, the unit in the reader's language."""
        return f"{format_value(self.value, self.unit)} {UNITS.get(self.unit, self.unit)}".rstrip()

    @property
    def shown_label(self) -> str:
        return shown(self.label)

    @property
    def shown_note(self) -> str:
        return shown(self.note)

    def to_dict(self) -> dict[str, Any]:
        """In English, as the API and the CLI give it."""
        return {
            "key": self.key,
            "label": str(self.label),
            "value": self.value,
            "unit": self.unit,
            "formula": self.formula,
            "note": str(self.note),
        }


# The units as a reader sees them after a figure's value (a context of their own, so another
# area's "tokens" or "requests" translated for another place does not stand in for them).
UNITS = {
    "bytes": pgettext_lazy("sizing unit", "bytes"),
    "tokens": pgettext_lazy("sizing unit", "tokens"),
    "blocks": pgettext_lazy("sizing unit", "blocks"),
    "requests": pgettext_lazy("sizing unit", "requests"),
    "groups": pgettext_lazy("sizing unit", "groups"),
}


def format_value(value: float, unit: str) -> str:
    if unit in ("GiB", "x"):
        return f"{value:,.2f}"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}"


def gib(n_bytes: float) -> float:
    return n_bytes / GiB


def g(n_bytes: float) -> str:
    """Bytes as GiB for a formula."""
    return f"{n_bytes / GiB:,.2f} GiB"


def n(value: float) -> str:
    """A count for a formula."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.3g}"
