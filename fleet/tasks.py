"""Celery tasks for the probes: thin wrappers around fleet.probe_service."""

import logging

from celery import shared_task
from django.utils import timezone

from fleet import probe_service, retention


@shared_task(name="fleet.probe_cycle", ignore_result=True, soft_time_limit=240, time_limit=300)
def probe_cycle(*, kind: str = "health", intervals_s: dict[str, float] | None = None) -> None:
    """One sweep of one probe kind; beat sends one entry per kind, each at its own interval,
    with every kind's interval (ops_console.schedules writes them) for staleness."""
    probe_service.run_cycle(kind=kind, intervals_s=intervals_s)


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
