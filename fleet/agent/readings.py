"""The GPU reading of a host whose telemetry is NVML: the one its agent last reported.
The probe reads it through the NVML backend interface like any other backend; a missing
agent, an old reading or the agent's own NVML error is an NvmlError that says which."""

from __future__ import annotations

from datetime import datetime, timedelta

from fleet.host_condition import ago
from fleet.models import GpuHost, HostAgent
from fleet.nvml.base import NvmlError, NvmlReading


class ReportedReading:
    """An NvmlBackend over a reading already in hand (or the error in its place)."""

    def __init__(self, *, reading: NvmlReading | None = None, error: str = "") -> None:
        self.reading, self.error = reading, error

    def read(self) -> NvmlReading:
        if self.reading is None:
            raise NvmlError(self.error or "no reading")
        return self.reading


def reported_reading(*, host: GpuHost, now: datetime, fresh_for: timedelta) -> ReportedReading:
    try:
        agent = host.agent
    except HostAgent.DoesNotExist:
        return ReportedReading(
            error=f"host {host.name} has no agent: enrol one (host page) or read dcgm-exporter instead"
        )
    if agent.is_missing(now=now):
        if agent.last_heartbeat_at is None:
            return ReportedReading(error=f"agent missing: host {host.name}'s agent has never reported")
        return ReportedReading(
            error=f"agent missing: no heartbeat from host {host.name}'s agent for "
            f"{ago(agent.last_heartbeat_at, now)}"
        )
    if agent.gpu_reading_at is None or now - agent.gpu_reading_at > fresh_for:
        return ReportedReading(error=f"host {host.name}'s agent has sent no GPU reading lately")
    if agent.gpu_reading is None:
        return ReportedReading(error=f"the agent on {host.name} could not read NVML: {agent.gpu_error}")
    try:
        return ReportedReading(reading=NvmlReading.from_dict(agent.gpu_reading))
    except ValueError as exc:
        return ReportedReading(error=f"the stored reading of {host.name} does not read: {exc}")
