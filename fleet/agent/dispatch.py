"""Sending the fixed checks to the hosts' agents. Each task expires after its interval:
an agent back from an outage finds the old ones expired and does not replay a backlog.
Hosts whose agent is missing are not sent anything (their queue would only grow)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from celery import current_app
from django.utils import timezone

from fleet.models import AgentRequest, GpuHost, GpuTelemetry, HostAgent


def live_agents(*, prefetch: tuple[str, ...] = (), **filters: Any) -> list[HostAgent]:
    """The enrolled agents that are not missing, on real (not drill) hosts."""
    now = timezone.now()
    agents = HostAgent.objects.select_related("host").prefetch_related(*prefetch)
    agents = agents.filter(host__drill=False, **filters)
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


def expectations(agent: HostAgent) -> dict[str, Any]:
    """What the host's checks look for: the inventory's instances on it, by port."""
    instances = sorted((i for i in agent.host.instances.all() if i.enabled), key=lambda i: i.name)
    return {
        "instances": [{"name": i.name, "engine": i.engine, "port": port_of(i.base_url)} for i in instances]
    }


def port_of(base_url: str) -> int:
    parts = urlsplit(base_url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def request_snapshots(*, interval_s: float) -> list[str]:
    """Ask every live agent for a snapshot of its host's checks; the names of the hosts asked."""
    asked = []
    for agent in live_agents(prefetch=("host__instances",)):
        send("agent.snapshot", host=agent.host.name, expires_s=interval_s, expect=expectations(agent))
        asked.append(agent.host.name)
    return asked


def ask(check: str, *, host: GpuHost, purpose: str, expires_s: float, **kwargs: Any) -> AgentRequest:
    """Send a check whose answer someone waits for; the AgentRequest row says when it comes."""
    request = AgentRequest.objects.create(
        host=host,
        task=check,
        purpose=purpose[:64],
        expires_at=timezone.now() + timedelta(seconds=expires_s),
    )
    send(check, host=host.name, expires_s=expires_s, request_id=request.request_id, **kwargs)
    return request
