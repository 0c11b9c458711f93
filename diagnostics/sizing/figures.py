"""Figures that show their working: every number the calculator gives carries its formula
with the inputs filled in, so an engineer can check it against vLLM's start-up log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GiB = 1024**3
MiB = 1024**2


@dataclass(frozen=True, kw_only=True)
class Figure:
    key: str
    label: str
    value: float
    unit: str  # "GiB", "bytes", "tokens", "blocks", "requests", "x"
    formula: str
    note: str = ""

    @property
    def shown(self) -> str:
        return f"{format_value(self.value, self.unit)} {self.unit}".rstrip()

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "value": self.value,
            "unit": self.unit,
            "formula": self.formula,
            "note": self.note,
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
