"""What an instance's host says about it: the agent's latest snapshot (fleet.agent.checks)
read against the inventory. The instance page's "On the host" card shows this: the
process listening on the instance's port, its real launch flags and their drift from the
inventory, its container, the kernel's OOM kills of it, its NUMA binding, its memory over
time, and the host's memory, disks and /dev/shm."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.i18n import Message, later
from fleet.hostchecks.launch_flags import FIELDS, FlagDrift, drift
from fleet.hostchecks.memory import RssTrend
from fleet.nvml.kernel_xids import pci_key

# The inventory's fields the process's flags are compared with; the port is left out: the
# snapshot found the process by the instance's port.
INVENTORY_FIELDS = tuple(name for name in FIELDS if name != "port")
GIB = 1024**3


@dataclass(frozen=True, kw_only=True)
class OnHost:
    taken_at: datetime | None
    port: int
    listener: dict[str, Any] | None = None
    engine: dict[str, Any] | None = None
    drifts: tuple[FlagDrift, ...] = ()
    container: dict[str, Any] | None = None
    oom_kills: tuple[dict[str, Any], ...] = ()
    xids: tuple[dict[str, Any], ...] = ()
    numa: Message | dict | None = None
    memory: dict[str, Any] = field(default_factory=dict)
    disks: tuple[dict[str, Any], ...] = ()
    problems: tuple[Any, ...] = ()
    rss_trend: RssTrend | None = None

    @property
    def port_line(self) -> Message:
        if self.listener is None:
            return later("nothing listens on port %(port)s", port=self.port)
        if self.engine is None:
            return later(
                "port %(port)s is held by %(process)s (pid %(pid)s), not an engine process",
                port=self.port,
                process=self.listener.get("process") or "?",
                pid=self.listener.get("pid") or "?",
            )
        return later(
            "port %(port)s: %(engine)s, pid %(pid)s",
            port=self.port,
            engine=self.engine.get("engine", ""),
            pid=self.engine.get("pid"),
        )

    @property
    def rss_gib(self) -> float | None:
        rss = (self.engine or {}).get("rss_kib")
        return round(rss * 1024 / GIB, 1) if isinstance(rss, int) else None


def inventory_values(instance: Any) -> dict[str, object]:
    return {name: getattr(instance, name) for name in INVENTORY_FIELDS}


def on_host(
    *,
    instance: Any,
    snapshot: dict[str, Any] | None,
    port: int,
    taken_at: datetime | None,
    rss_trend: RssTrend | None = None,
) -> OnHost | None:
    """The instance as its host's last snapshot sees it; None without a snapshot."""
    if not isinstance(snapshot, dict):
        return None
    rows = [r for r in snapshot.get("instances", []) if isinstance(r, dict)]
    row = next((r for r in rows if r.get("name") == instance.name), None)
    row = row or next((r for r in rows if r.get("port") == port), {})
    engines = [e for e in snapshot.get("engines", []) if isinstance(e, dict)]
    engine = next((e for e in engines if row.get("engine_pid") and e.get("pid") == row["engine_pid"]), None)
    drifts: tuple[FlagDrift, ...] = ()
    if engine and engine.get("engine") == "vllm" and instance.engine == "vllm":
        drifts = tuple(drift(inventory=inventory_values(instance), running=engine.get("flags") or {}))
    kernel = snapshot.get("kernel") or {}
    return OnHost(
        taken_at=taken_at,
        port=port,
        listener=row.get("listener"),
        engine=engine,
        drifts=drifts,
        container=_container(engine, snapshot),
        oom_kills=tuple((engine or {}).get("oom_kills") or ()),
        xids=_xids_of(instance, kernel.get("xids") or []),
        numa=((engine or {}).get("numa_binding") or {}).get("message"),
        memory=snapshot.get("memory") or {},
        disks=tuple(d for d in snapshot.get("disks") or () if isinstance(d, dict)),
        problems=tuple(snapshot.get("problems") or ()),
        rss_trend=rss_trend,
    )


def _container(engine: dict[str, Any] | None, snapshot: dict[str, Any]) -> dict[str, Any] | None:
    cid = (engine or {}).get("container_id")
    if not cid:
        return None
    containers = [c for c in snapshot.get("containers", []) if isinstance(c, dict)]
    return next((c for c in containers if str(c.get("id", ""))[:12] == str(cid)[:12]), None)


def _xids_of(instance: Any, xids: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The XIDs of the instance's GPUs (by PCI address); all of the host's when the
    inventory does not know the addresses."""
    buses = {pci_key(g.pci_bus_id) for g in instance.gpus.all() if g.pci_bus_id}
    return tuple(x for x in xids if isinstance(x, dict) and (not buses or x.get("pci") in buses))
