"""Periodic tasks, defined in code and registered with django-celery-beat.

`sync_periodic_tasks()` creates or updates each entry by name; an operator can then
change the interval or disable a task in the admin, and a later sync keeps that choice
(it only sets the interval when it creates the entry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask


@dataclass(frozen=True, kw_only=True)
class Schedule:
    name: str
    task: str
    every_seconds: int
    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)


SCHEDULES: tuple[Schedule, ...] = (
    Schedule(
        name="worker heartbeat",
        task="ops_console.heartbeat",
        every_seconds=60,
        description="Shows on /healthz that a worker and beat are running.",
    ),
    Schedule(
        name="probe health",
        task="fleet.probe_cycle",
        kwargs={"kind": "health"},
        every_seconds=30,
        description="Readiness (/health, model list, version) and the latency phases of a one-token "
        "request, for every enabled instance.",
    ),
    Schedule(
        name="probe stream",
        task="fleet.probe_cycle",
        kwargs={"kind": "stream"},
        every_seconds=60,
        description="A small streaming chat request: TTFT, inter-token latency and tokens/s.",
    ),
    Schedule(
        name="probe metrics",
        task="fleet.probe_cycle",
        kwargs={"kind": "metrics"},
        every_seconds=30,
        description="The engine's /metrics: gauges, rates between scrapes and latency quantiles.",
    ),
    Schedule(
        name="probe gpu",
        task="fleet.probe_cycle",
        kwargs={"kind": "gpu"},
        every_seconds=30,
        description="GPU state through NVML for instances whose host has GPU telemetry.",
    ),
    Schedule(
        name="evaluate alerts",
        task="incidents.evaluate_alerts",
        every_seconds=15,
        description="The alert rules over the probes' latest results: firing opens or joins the "
        "incident for the instance and cause, clearing mitigates it.",
    ),
    Schedule(
        name="sweep alert deliveries",
        task="incidents.sweep_alert_deliveries",
        every_seconds=60,
        description="Processes the Alertmanager payloads still unprocessed half a minute after they "
        "arrived (the broker was away, a worker stopped, processing failed), oldest first, and prunes "
        "processed ones after a week.",
    ),
    Schedule(
        name="capacity check",
        task="diagnostics.capacity_check",
        every_seconds=300,
        description="Sizes every enabled vLLM instance from its flags and GPUs, against the prompt "
        "lengths and KV pressure the probes saw in the last hour; findings show on the instance "
        "page and the fleet overview.",
    ),
    Schedule(
        name="host checks",
        task="fleet.host_checks",
        kwargs={"interval_s": 60},
        every_seconds=60,
        description="Asks each GPU host's agent for its host-side checks (kernel log, containers, the "
        "engine's process and flags, memory, disks, ports, NUMA); hosts whose agent is missing are "
        "skipped.",
    ),
    Schedule(
        name="prune metric samples",
        task="fleet.prune_samples",
        every_seconds=3600,
        description="Downsamples raw samples older than the raw retention and prunes the oldest.",
    ),
)


PROBE_TASK = "fleet.probe_cycle"

# Entries an earlier version created; sync removes them.
RETIRED = ("probe cycle",)


def _kwargs(schedule: Schedule, intervals: dict[str, int]) -> dict[str, Any]:
    """A probe entry also carries every kind's interval: the probes judge staleness by them."""
    if schedule.task != PROBE_TASK:
        return schedule.kwargs
    return schedule.kwargs | {"intervals_s": intervals}


def sync_periodic_tasks() -> list[PeriodicTask]:
    """Create the missing entries; bring the task and kwargs of existing ones up to date
    (the probe entries' intervals_s follow intervals edited in the admin at each sync)."""
    PeriodicTask.objects.filter(name__in=RETIRED).delete()
    intervals = probe_intervals()
    synced = []
    for schedule in SCHEDULES:
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=schedule.every_seconds, period=IntervalSchedule.SECONDS
        )
        task, created = PeriodicTask.objects.get_or_create(
            name=schedule.name,
            defaults={
                "task": schedule.task,
                "kwargs": json.dumps(_kwargs(schedule, intervals)),
                "interval": interval,
                "description": schedule.description,
                # due at once: a fresh console shows results without waiting an interval
                "last_run_at": timezone.now() - timedelta(seconds=schedule.every_seconds),
            },
        )
        kwargs = json.dumps(_kwargs(schedule, intervals))
        if not created and (task.task, task.kwargs) != (schedule.task, kwargs):
            task.task, task.kwargs = schedule.task, kwargs
            task.save(update_fields=["task", "kwargs"])
        synced.append(task)
    return synced


def probe_intervals() -> dict[str, int]:
    """Seconds between runs of each probe kind: the beat entry's interval as edited in the
    admin, or the default of SCHEDULES where the entry is missing or not an interval."""
    intervals = {s.kwargs["kind"]: s.every_seconds for s in SCHEDULES if s.task == "fleet.probe_cycle"}
    entries = PeriodicTask.objects.filter(task="fleet.probe_cycle", interval__isnull=False)
    for entry in entries.select_related("interval"):
        try:
            kind = json.loads(entry.kwargs or "{}").get("kind")
        except (ValueError, AttributeError):
            continue
        seconds = entry.interval.schedule.run_every.total_seconds()
        if kind in intervals and seconds > 0:
            intervals[kind] = int(seconds)
    return intervals
