"""A host's condition (fleet.host_condition) from the database: its agent's heartbeat and
its instances' latest verdicts and findings."""

from __future__ import annotations

from django.utils import timezone

from fleet.host_condition import HostCondition, host_condition
from fleet.models import GpuHost, HostAgent, InstanceState


def agent_of(host: GpuHost) -> HostAgent | None:
    try:
        return host.agent
    except HostAgent.DoesNotExist:
        return None


def condition_of(host: GpuHost) -> HostCondition:
    agent = agent_of(host)
    states = InstanceState.objects.filter(instance__host=host, instance__enabled=True).only(
        "verdict", "findings"
    )
    return host_condition(
        enrolled=agent is not None,
        last_heartbeat_at=agent.last_heartbeat_at if agent else None,
        missing_after=HostAgent.MISSING_AFTER,
        instances=[(s.verdict, s.findings) for s in states],
        now=timezone.now(),
    )
