"""Scenario times: seconds from the start, or clock times like 03:00 against clock_start;
and the error every scenario check raises, naming the field."""

from __future__ import annotations

import re
from typing import Any

DAY_S = 24 * 3600
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


class ScenarioError(ValueError):
    """A scenario file is wrong; the message names the field."""


def at_seconds(value: Any, where: str, start_s: float | None) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ScenarioError(f"{where}: must be >= 0, got {value!r}")
        return float(value)
    if isinstance(value, str) and _CLOCK.match(value):
        if start_s is None:
            raise ScenarioError(f"{where}: a clock time needs clock_start at the top of the file")
        return (clock_seconds(value, field=where) - start_s) % DAY_S
    raise ScenarioError(f"{where}: expected seconds (a number) or a clock time like 03:00, got {value!r}")


def clock_seconds(text: str, *, field: str) -> float:
    match = _CLOCK.match(text)
    if not match:
        raise ScenarioError(f"{field}: expected a clock time like 02:50 or 02:58:32, got {text!r}")
    hours, minutes, seconds = int(match[1]), int(match[2]), int(match[3] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise ScenarioError(f"{field}: {text!r} is not a time of day")
    return float(hours * 3600 + minutes * 60 + seconds)
