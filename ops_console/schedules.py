"""Periodic tasks, defined in code and registered with django-celery-beat.

`sync_periodic_tasks()` creates or updates each entry by name; an operator can then
change the interval or disable a task in the admin, and a later sync keeps that choice
(it only sets the interval when it creates the entry).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask


@dataclass(frozen=True, kw_only=True)
class Schedule:
    name: str
    task: str
    every_seconds: int
    description: str


SCHEDULES: tuple[Schedule, ...] = (
    Schedule(
        name="worker heartbeat",
        task="ops_console.heartbeat",
        every_seconds=60,
        description="Shows on /healthz that a worker and beat are running.",
    ),
    Schedule(
        name="probe cycle",
        task="fleet.probe_cycle",
        every_seconds=30,
        description="Health, latency phases, streaming, metrics and GPU state of every enabled instance.",
    ),
    Schedule(
        name="prune metric samples",
        task="fleet.prune_samples",
        every_seconds=3600,
        description="Downsamples raw samples older than the raw retention and prunes the oldest.",
    ),
)


def sync_periodic_tasks() -> list[PeriodicTask]:
    synced = []
    for schedule in SCHEDULES:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=schedule.every_seconds, period=IntervalSchedule.SECONDS
        )
        task, created = PeriodicTask.objects.get_or_create(
            name=schedule.name,
            defaults={
                "task": schedule.task,
                "interval": interval,
                "description": schedule.description,
                # due at once: a fresh console shows results without waiting an interval
                "last_run_at": timezone.now() - timedelta(seconds=schedule.every_seconds),
            },
        )
        if not created and task.task != schedule.task:
            task.task = schedule.task
            task.save(update_fields=["task"])
        synced.append(task)
    return synced
