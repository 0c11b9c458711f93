"""Whether an engine's CPUs sit on its GPUs' NUMA nodes (`numactl -s`, `nvidia-smi topo -m`,
guide 2.2.3).

On a two-socket host each GPU hangs off one socket's PCIe root; a process running on the other
socket's CPUs copies through the inter-socket link, at about half the bandwidth. The nodes come
from sysfs: /sys/devices/system/node/node<N>/cpulist ("0-31,64-95") and
/sys/bus/pci/devices/<domain:bus:device.function>/numa_node (-1 when the firmware does not say).
A process's allowed CPUs are /proc/<pid>/status's Cpus_allowed_list (processes.EngineProcess).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.i18n import Message, later
from fleet.hostchecks.processes import parse_cpu_list, read_problem, read_text

NODES = "sys/devices/system/node"
PCI_DEVICES = "sys/bus/pci/devices"
_NODE_RE = re.compile(r"^node(\d+)$")
MAX_NODES = 1024


@dataclass(frozen=True)
class NumaTopology:
    cpus_by_node: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    unreadable: Message | None = None

    def node_of_cpu(self, cpu: int) -> int | None:
        return next((node for node, cpus in self.cpus_by_node.items() if cpu in cpus), None)

    def nodes_of(self, cpus: Iterable[int]) -> tuple[int, ...]:
        found = {self.node_of_cpu(cpu) for cpu in cpus}
        return tuple(sorted(node for node in found if node is not None))

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus_by_node": {str(node): list(cpus) for node, cpus in self.cpus_by_node.items()},
            "unreadable": asdict(self.unreadable) if self.unreadable else None,
        }


def read_topology(*, root: Path = Path("/")) -> NumaTopology:
    """CPUs by NUMA node. A kernel built without NUMA has no node directory: no nodes, nothing
    to cross."""
    directory = root / NODES
    if not directory.exists():
        return NumaTopology()
    cpus_by_node: dict[int, tuple[int, ...]] = {}
    path = directory
    try:
        for name in sorted(entry.name for entry in directory.iterdir())[:MAX_NODES]:
            if match := _NODE_RE.match(name):
                path = directory / name / "cpulist"
                text, _ = read_text(path, limit=64 * 1024)
                cpus_by_node[int(match[1])] = parse_cpu_list(text)
    except OSError as exc:
        return NumaTopology(unreadable=read_problem(path, exc, root=root))
    except ValueError:
        return NumaTopology(
            unreadable=later("%(path)s is not a CPU list", path="/" + path.relative_to(root).as_posix())
        )
    return NumaTopology(cpus_by_node=dict(sorted(cpus_by_node.items())))


def sysfs_bus_id(bus_id: str) -> str:
    """sysfs's spelling of a PCI address: NVML's "00000000:3B:00.0" is "0000:3b:00.0"."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    if "." not in rest:
        rest += ".0"
    return f"{int(domain, 16):04x}:{rest}"


def gpu_node(bus_id: str, *, root: Path = Path("/")) -> int | None:
    """The NUMA node of a PCI device; None when unknown (-1, missing, unreadable)."""
    try:
        path = root / PCI_DEVICES / sysfs_bus_id(bus_id) / "numa_node"
        text, _ = read_text(path, limit=64)
        node = int(text.strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


@dataclass(frozen=True)
class Binding:
    verdict: str  # ok, unbound (may run on other nodes too), wrong_node, unknown
    cpu_nodes: tuple[int, ...] = ()
    gpu_nodes: tuple[int, ...] = ()
    message: Message | None = None

    @property
    def ok(self) -> bool | None:
        return None if self.verdict == "unknown" else self.verdict == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ok": self.ok}


def binding_check(
    *, cpus_allowed: Iterable[int], gpu_nodes: Iterable[int | None], topology: NumaTopology
) -> Binding:
    """Whether the CPUs a process may run on all sit on the nodes of its GPUs."""
    gpus = tuple(sorted({node for node in gpu_nodes if node is not None}))
    cpus = topology.nodes_of(cpus_allowed)
    if len(topology.cpus_by_node) <= 1:
        return Binding("ok", cpus, gpus)  # one node: nothing to cross
    if not gpus or not cpus:
        return Binding("unknown", cpus, gpus)
    if set(cpus) <= set(gpus):
        return Binding("ok", cpus, gpus)
    node_list = ",".join(str(node) for node in gpus)
    if set(cpus) & set(gpus):
        message = later(
            "the process may run on NUMA nodes %(cpu_nodes)s but its GPUs sit on node %(gpu_nodes)s: "
            "when it runs on the other node, host-to-GPU copies cross the socket link (guide 2.2.3); "
            "start it under numactl --cpunodebind=%(gpu_nodes)s --membind=%(gpu_nodes)s",
            cpu_nodes=",".join(str(node) for node in cpus),
            gpu_nodes=node_list,
        )
        return Binding("unbound", cpus, gpus, message)
    message = later(
        "the process is bound to NUMA node %(cpu_nodes)s but its GPUs sit on node %(gpu_nodes)s: every "
        "host-to-GPU copy crosses the socket link (guide 2.2.3); bind it with "
        "numactl --cpunodebind=%(gpu_nodes)s --membind=%(gpu_nodes)s",
        cpu_nodes=",".join(str(node) for node in cpus),
        gpu_nodes=node_list,
    )
    return Binding("wrong_node", cpus, gpus, message)
