"""Durations and ratios as people read them on the incident pages and the review: '9 min 20 s'
rather than 0:09:20 or 9.3, '0.7 %' rather than 0.00714. Each value gets at most its two
largest units, rounded down (a reader of '2 h 5 min' does not need the seconds)."""

from __future__ import annotations

from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.utils.translation import gettext_noop

from core.i18n import Message

MISSING = "—"
_UNITS = (
    (gettext_noop("%(n)s d"), 86_400),
    (gettext_noop("%(n)s h"), 3_600),
    (gettext_noop("%(n)s min"), 60),
    (gettext_noop("%(n)s s"), 1),
)


def duration(value: float | timedelta | None) -> str:
    """Seconds or a timedelta as '45 s', '9 min 20 s', '2 h 5 min' or '3 d 4 h' (a zero second
    unit is left out: '9 min', '2 h'); None as '—'. Negative values get a minus sign."""
    message = duration_message(value)
    return MISSING if message is None else message.translated()


def duration_message(value: float | timedelta | None) -> Message | None:
    """duration() kept as a message (core.i18n), for text stored now and read later in the
    reader's language (units are words: '9 min 20 s', '9 分钟 20 秒'); None for None."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    whole = round(abs(seconds))
    index = next(i for i, (_, size) in enumerate(_UNITS) if whole >= size or size == 1)
    (name, size), smaller = _UNITS[index], _UNITS[index + 1 : index + 2]
    first, rest = divmod(whole, size)
    message = Message(name, {"n": first})
    if smaller and rest // smaller[0][1]:
        # Joined with a space in every language; not a catalogue message of its own.
        message = Message(
            "%(larger)s %(smaller)s",
            {"larger": message, "smaller": Message(smaller[0][0], {"n": rest // smaller[0][1]})},
        )
    if seconds < 0 and whole:
        message = Message("−%(value)s", {"value": message})
    return message


def percent(fraction: float | None) -> str:
    """A fraction as a percentage: one decimal under 10 % ('0.7 %', '9.5 %'), none from 10 %
    on ('12 %', '100 %'); exactly nothing as '0 %', a sliver as '< 0.1 %'; None as '—'.
    Halves round up."""
    if fraction is None:
        return MISSING
    value = Decimal(str(fraction)) * 100
    if value == 0:
        return "0 %"
    tenths = value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    if tenths == 0:  # something, but less than the smallest step shown
        return "< 0.1 %"
    if abs(tenths) < 10:
        return f"{tenths} %"
    return f"{value.quantize(Decimal('1'), rounding=ROUND_HALF_UP)} %"
