"""Celery tasks of the engineer's tools: thin wrappers around their services."""

from celery import shared_task

from diagnostics import capacity_service


@shared_task(name="diagnostics.capacity_check", ignore_result=True, soft_time_limit=240, time_limit=300)
def capacity_check() -> None:
    """Size every enabled vLLM instance against its GPUs and its observed load."""
    capacity_service.check_fleet()


@shared_task(name="diagnostics.triage_upload", ignore_result=True, soft_time_limit=1800, time_limit=1900)
def triage_upload(*, run_id: int) -> None:
    """Triage an uploaded log, recording progress on its run."""
    from diagnostics import triage_service

    triage_service.run_upload(run_id=run_id)
