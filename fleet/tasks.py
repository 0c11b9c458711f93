"""Celery tasks for the probes: thin wrappers around fleet.probe_service."""

import logging

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from fleet import probe_service, retention
from fleet.agent.routing import PROBE_QUEUE
from fleet.models import ProbeCycle


@shared_task(name="fleet.probe_cycle", ignore_result=True, soft_time_limit=240, time_limit=300)
def probe_cycle(*, kind: str = "health", intervals_s: dict[str, float] | None = None) -> None:
    """One sweep of one probe kind, sent out as chunks of settings.PROBE_CHUNK_SIZE instances
    to the probes queue, where any number of prober workers share them. Beat sends one entry
    per kind, each at its own interval, with every kind's interval (ops_console.schedules
    writes them) for staleness."""
    started = probe_service.start_cycle(
        kind=kind, chunk_size=settings.PROBE_CHUNK_SIZE, intervals_s=intervals_s
    )
    if started is None:  # the previous sweep of this kind is still running
        return
    for ids in started.chunks:
        # A chunk still queued when its cycle is given up (STALE_AFTER) is not worth probing.
        probe_chunk.apply_async(
            kwargs={
                "cycle_id": started.cycle.pk,
                "instance_ids": ids,
                "kind": kind,
                "intervals_s": intervals_s,
            },
            expires=ProbeCycle.STALE_AFTER.total_seconds(),
        )


@shared_task(
    name="fleet.probe_chunk", queue=PROBE_QUEUE, ignore_result=True, soft_time_limit=240, time_limit=300
)
def probe_chunk(
    *, cycle_id: int, instance_ids: list[int], kind: str, intervals_s: dict[str, float] | None = None
) -> None:
    """One chunk of a scheduled sweep; no retry: the next sweep probes its instances again."""
    probe_service.sweep_chunk(
        cycle_id=cycle_id, instance_ids=instance_ids, kind=kind, intervals_s=intervals_s
    )


@shared_task(name="fleet.probe_instance", ignore_result=True, soft_time_limit=60, time_limit=90)
def probe_instance(*, run_id: int) -> None:
    probe_service.run_requested_probe(run_id=run_id)


@shared_task(name="fleet.prune_samples", ignore_result=True)
def prune_samples() -> None:
    retention.downsample_and_prune(now=timezone.now())


@shared_task(name="fleet.agent_report", ignore_result=True, soft_time_limit=30, time_limit=60)
def agent_report(*, envelope: dict) -> None:
    """A report from a host's agent (fleet.agent.worker), checked and stored."""
    from fleet.agent.reports import ReportRefused, receive

    try:
        receive(envelope=envelope)
    except ReportRefused as exc:
        logging.getLogger("fleet.agent").warning("agent report refused: %s", exc)


@shared_task(name="fleet.host_checks", ignore_result=True, soft_time_limit=60, time_limit=90)
def host_checks(*, interval_s: float = 60) -> None:
    """Send each live agent its host-side checks; they expire after one interval."""
    from fleet.agent.dispatch import request_snapshots

    request_snapshots(interval_s=interval_s)
