"""Celery tasks for the probes: thin wrappers around fleet.probe_service."""

from celery import shared_task
from django.utils import timezone

from fleet import probe_service, retention


@shared_task(name="fleet.probe_cycle", ignore_result=True, soft_time_limit=240, time_limit=300)
def probe_cycle(*, kind: str = "health") -> None:
    """One sweep of one probe kind; beat sends one entry per kind, each at its own interval.
    The alert rules are evaluated after it, over what it stored."""
    probe_service.run_cycle(kind=kind)
    from incidents.tasks import evaluate_alerts

    evaluate_alerts.delay()


@shared_task(name="fleet.probe_instance", ignore_result=True, soft_time_limit=60, time_limit=90)
def probe_instance(*, run_id: int) -> None:
    probe_service.run_requested_probe(run_id=run_id)


@shared_task(name="fleet.prune_samples", ignore_result=True)
def prune_samples() -> None:
    retention.downsample_and_prune(now=timezone.now())
