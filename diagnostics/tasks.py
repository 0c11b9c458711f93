"""Celery tasks of the engineer's tools: thin wrappers around their services."""

from celery import shared_task

from diagnostics import capacity_service


@shared_task(name="diagnostics.capacity_check", ignore_result=True, soft_time_limit=240, time_limit=300)
def capacity_check() -> None:
    """Size every enabled vLLM instance against its GPUs and its observed load."""
    capacity_service.check_fleet()
