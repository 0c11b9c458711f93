"""Read a host's GPUs through an NVML backend, and check NUMA placement.

NUMA (guide 2.2.3): an instance whose GPUs sit on different NUMA nodes sends PCIe
traffic across the socket interconnect; and an inventory NUMA node that disagrees with
NVML's means the inventory (and any numactl binding made from it) is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from core.i18n import Message, later
from fleet.nvml.base import NvmlBackend, NvmlError, NvmlReading
from fleet.probes.evidence import joined
from fleet.probes.outcomes import Outcome, describe_exception


@dataclass(frozen=True, kw_only=True)
class GpuProbeResult:
    outcome: Outcome
    error: str = ""
    elapsed_s: float = 0.0
    reading: NvmlReading | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "error": self.error,
            "elapsed_s": self.elapsed_s,
            "reading": self.reading.to_dict() if self.reading else None,
        }


def read_gpus(*, backend: NvmlBackend) -> GpuProbeResult:
    """One NVML reading; NvmlError (or any failure of the backend) is an error result."""
    started = perf_counter()
    try:
        reading = backend.read()
    except NvmlError as exc:
        return GpuProbeResult(outcome=Outcome.ERROR, error=str(exc), elapsed_s=perf_counter() - started)
    except Exception as exc:  # a backend bug must not take the probe down
        return GpuProbeResult(
            outcome=Outcome.ERROR, error=describe_exception(exc), elapsed_s=perf_counter() - started
        )
    return GpuProbeResult(outcome=Outcome.OK, reading=reading, elapsed_s=perf_counter() - started)


def _nodes(pairs: Iterable[tuple[int, int | None]]) -> dict[int, int]:
    return {index: node for index, node in pairs if node is not None and node >= 0}


def _spread(label: str | Message, nodes: dict[int, int]) -> Message | None:
    if len(set(nodes.values())) < 2:
        return None
    placed = joined(
        (later("GPU %(index)s on node %(node)s", index=i, node=n) for i, n in sorted(nodes.items())), sep=","
    )
    return later(
        "The instance's GPUs span NUMA nodes %(nodes)s (%(label)s: %(placed)s): PCIe traffic crosses "
        "sockets, so TPS can drop (guide 2.2.3)",
        nodes=", ".join(map(str, sorted(set(nodes.values())))),
        label=label,
        placed=placed,
    )


def numa_messages(
    *, instance_gpus: Iterable[Mapping[str, Any]], reading: NvmlReading | None
) -> list[Message]:
    """NUMA trouble of one instance, as messages: its GPUs span several NUMA nodes (by
    NVML, else by the inventory), or the inventory's node for a GPU disagrees with NVML's."""
    inventory = _nodes((int(g["index"]), g.get("numa_node")) for g in instance_gpus)
    indices = {int(g["index"]) for g in instance_gpus}
    nvml = _nodes((g.index, g.numa_node) for g in reading.gpus if g.index in indices) if reading else {}
    found = [m for m in (_spread("NVML", nvml) or _spread(later("inventory"), inventory),) if m]
    for index in sorted(set(inventory) & set(nvml)):
        if inventory[index] != nvml[index]:
            found.append(
                later(
                    "GPU %(index)s: the inventory says NUMA node %(ours)s, NVML says %(nvml)s; fix the "
                    "inventory (and any %(command)s binding taken from it)",
                    command="numactl",
                    index=index,
                    ours=inventory[index],
                    nvml=nvml[index],
                )
            )
    return found


def numa_findings(*, instance_gpus: Iterable[Mapping[str, Any]], reading: NvmlReading | None) -> list[str]:
    """numa_messages in English."""
    return [str(m) for m in numa_messages(instance_gpus=instance_gpus, reading=reading)]
