"""The aims `make bench` checks, gathered from every benchmark of the run and printed side
by side at its end: what was measured, the aim, and whether it was met.

A benchmark calls `note(...)` for each figure that has an aim; `report()` prints them. A
missed aim does not stop the run: every benchmark runs and prints, then `make bench` exits 1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Aim:
    name: str
    measured: float
    limit: float
    unit: str = "x"

    @property
    def met(self) -> bool:
        return self.measured <= self.limit


_NOTED: list[Aim] = []


def note(name: str, measured: float, limit: float, *, unit: str = "x") -> Aim:
    """An aim of at most `limit`, and what was measured."""
    aim = Aim(name, measured, limit, unit)
    _NOTED.append(aim)
    return aim


def noted() -> list[Aim]:
    return list(_NOTED)


def report() -> str:
    if not _NOTED:
        return ""
    width = max(len(a.name) for a in _NOTED)
    lines = ["", "aims of this run (measured / aim):"]
    for aim in _NOTED:
        verdict = "met" if aim.met else "NOT MET"
        measured = f"{aim.measured:>8.2f}{aim.unit}"
        lines.append(f"  {aim.name:<{width}}  {measured}  <= {aim.limit:g}{aim.unit}  {verdict}")
    return "\n".join(lines)
