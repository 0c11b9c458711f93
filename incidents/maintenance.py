"""Maintenance windows as the fleet overview shows them: those active now and those starting
in the next day (the next occurrence of a recurring one)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from incidents.models import MaintenanceWindow

AHEAD = timedelta(days=1)


@dataclass(frozen=True)
class Occurrence:
    window: MaintenanceWindow
    starts_at: datetime
    ends_at: datetime
    active: bool


def next_occurrence(window: MaintenanceWindow, now: datetime) -> tuple[datetime, datetime] | None:
    """The occurrence active now or the next one to start, None when none is left."""
    length = window.ends_at - window.starts_at
    if window.recurrence == MaintenanceWindow.Recurrence.NONE:
        return (window.starts_at, window.ends_at) if window.ends_at > now else None
    period = timedelta(days=1 if window.recurrence == MaintenanceWindow.Recurrence.DAILY else 7)
    if now <= window.starts_at:
        return window.starts_at, window.ends_at
    start = window.starts_at + ((now - window.starts_at) // period) * period
    if start + length <= now:
        start += period
    return start, start + length


def current_and_upcoming(now: datetime | None = None) -> list[Occurrence]:
    now = now or timezone.now()
    found = []
    for window in MaintenanceWindow.objects.select_related("host", "instance"):
        occurrence = next_occurrence(window, now)
        if occurrence and occurrence[0] <= now + AHEAD:
            found.append(Occurrence(window, *occurrence, active=occurrence[0] <= now < occurrence[1]))
    return sorted(found, key=lambda o: o.starts_at)


def covered(occurrences: list[Occurrence]) -> tuple[set[int], set[int]]:
    """Host ids and instance ids that an active maintenance window covers now."""
    active = [o.window for o in occurrences if o.active]
    return {w.host_id for w in active if w.host_id}, {w.instance_id for w in active if w.instance_id}
