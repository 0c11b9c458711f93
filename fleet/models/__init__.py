from fleet.models.changelog import ChangeAction, ChangeLogEntry
from fleet.models.gateways import Gateway, GatewayKind
from fleet.models.hosts import Gpu, GpuHost, MigMode
from fleet.models.instances import DType, Engine, Instance, KvCacheDType

__all__ = [
    "ChangeAction",
    "ChangeLogEntry",
    "DType",
    "Engine",
    "Gateway",
    "GatewayKind",
    "Gpu",
    "GpuHost",
    "Instance",
    "KvCacheDType",
    "MigMode",
]
