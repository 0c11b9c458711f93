"""Whether the scheduled probe cycles kept completing through the soak.

For each probe kind beat schedules: at least half as many cycles completed as beat sent
at its interval since the load started (a worker that falls behind its queue runs them
ever later, so fewer complete); no gap between the load's
start, each completed cycle and the check longer than GAP_INTERVALS intervals plus
GAP_SLACK_S (beat sends a cycle every interval; a cycle over 200 instances with faults
takes a while, and a busy worker may start it late, but three intervals without one means
cycles stopped); no cycle left open longer than the task's hard time limit (past it the
worker has killed the task, and the open row would keep every later cycle of that kind
skipped); none abandoned (the console's own word for a cycle left open ten minutes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

GAP_INTERVALS = 3
GAP_SLACK_S = 60


@dataclass(frozen=True)
class CycleRow:
    kind: str
    started_at: datetime
    finished_at: datetime | None
    skipped: bool
    note: str
    instance_count: int


@dataclass(frozen=True)
class CycleVerdict:
    kind: str
    interval_s: int
    completed: int
    expected_at_least: int
    skipped: int
    abandoned: int
    open_too_long: int
    max_gap_s: float
    gap_bound_s: float
    newest_age_s: float | None  # seconds from the newest completion to the check
    mean_instances: float

    @property
    def ok(self) -> bool:
        return (
            self.completed >= self.expected_at_least
            and not self.abandoned
            and not self.open_too_long
            and self.max_gap_s <= self.gap_bound_s
        )


def judge(
    rows: list[CycleRow], *, kind: str, interval_s: int, since: datetime, now: datetime, open_limit_s: float
) -> CycleVerdict:
    mine = [r for r in rows if r.kind == kind and (r.finished_at is None or r.finished_at >= since)]
    done = sorted(
        (r for r in mine if r.finished_at and not r.skipped and not r.note.startswith("abandoned")),
        key=lambda r: r.finished_at,
    )
    marks = [since, *(r.finished_at for r in done), now]
    gaps = [(b - a).total_seconds() for a, b in pairwise(marks)]
    too_long = now - timedelta(seconds=open_limit_s)
    return CycleVerdict(
        kind=kind,
        interval_s=interval_s,
        completed=len(done),
        expected_at_least=int((now - since).total_seconds() / interval_s / 2),
        skipped=sum(1 for r in mine if r.skipped),
        abandoned=sum(1 for r in mine if r.note.startswith("abandoned")),
        open_too_long=sum(1 for r in mine if r.finished_at is None and r.started_at < too_long),
        max_gap_s=max(gaps),
        gap_bound_s=GAP_INTERVALS * interval_s + GAP_SLACK_S,
        newest_age_s=(now - done[-1].finished_at).total_seconds() if done else None,
        mean_instances=sum(r.instance_count for r in done) / len(done) if done else 0.0,
    )


def check(*, since: datetime) -> list[CycleVerdict]:
    """Every scheduled probe kind's verdict, from the console's database."""
    from django.db import connections
    from django.db.models import Q
    from django.utils import timezone

    from fleet.models import ProbeCycle
    from fleet.tasks import probe_chunk
    from ops_console.schedules import probe_intervals

    try:
        intervals = probe_intervals()
        fields = ("kind", "started_at", "finished_at", "skipped", "note", "instance_count")
        recent = ProbeCycle.objects.filter(Q(finished_at=None) | Q(finished_at__gte=since))
        rows = [CycleRow(*values) for values in recent.values_list(*fields)]
        now = timezone.now()
    finally:
        connections.close_all()
    limit = float(probe_chunk.time_limit or 300)  # a cycle is open until its last chunk ends
    return [
        judge(rows, kind=kind, interval_s=interval, since=since, now=now, open_limit_s=limit)
        for kind, interval in sorted(intervals.items())
    ]
