"""Sending the fixed checks to the hosts' agents. Each task expires after its interval:
an agent back from an outage finds the old ones expired and does not replay a backlog.
Hosts whose agent is missing are not sent anything (their queue would only grow)."""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.utils import timezone

from fleet.models import GpuTelemetry, HostAgent


def live_agents(**filters: Any) -> list[HostAgent]:
    """The enrolled agents that are not missing, on real (not drill) hosts."""
    now = timezone.now()
    agents = HostAgent.objects.select_related("host").filter(host__drill=False, **filters)
    return [a for a in agents if not a.is_missing(now=now)]


def send(name: str, *, host: str, expires_s: float, **kwargs: Any) -> None:
    """One check to one host's agent; the project's router (settings.CELERY_TASK_ROUTES)
    picks the host's queue."""
    current_app.send_task(name, kwargs={"host": host, **kwargs}, expires=expires_s)


def request_gpu_readings(*, interval_s: float) -> list[str]:
    """Ask every live agent of a host whose GPU telemetry is NVML for a reading; the names
    of the hosts asked."""
    asked = []
    for agent in live_agents(host__gpu_telemetry=GpuTelemetry.NVML):
        send("agent.read_gpus", host=agent.host.name, expires_s=interval_s)
        asked.append(agent.host.name)
    return asked
