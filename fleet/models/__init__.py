from fleet.models.agents import AgentRequest, HostAgent
from fleet.models.changelog import ChangeAction, ChangeLogEntry
from fleet.models.gateways import Gateway, GatewayKind
from fleet.models.hosts import Gpu, GpuHost, GpuTelemetry, MigMode
from fleet.models.instances import DType, Engine, Instance, KvCacheDType
from fleet.models.probes import (
    InstanceState,
    MetricSample,
    ProbeCycle,
    ProbeKindChoice,
    ProbeRun,
    ProbeSettings,
    RunStatus,
    Trigger,
    Verdict,
)

__all__ = [
    "AgentRequest",
    "ChangeAction",
    "ChangeLogEntry",
    "DType",
    "Engine",
    "Gateway",
    "GatewayKind",
    "Gpu",
    "GpuHost",
    "GpuTelemetry",
    "HostAgent",
    "Instance",
    "InstanceState",
    "MetricSample",
    "ProbeCycle",
    "ProbeKindChoice",
    "ProbeRun",
    "ProbeSettings",
    "RunStatus",
    "Trigger",
    "Verdict",
    "KvCacheDType",
    "MigMode",
]
