"""What NVML would report for an instance's GPUs, as fleet.nvml.base.NvmlReading JSON.

Tied to the engine: memory is what the engine preallocated (vLLM takes
gpu_memory_utilization x total at start-up, so it is flat whether busy or idle); SM
utilization is the share of time kernels run times how full the batch is; temperature,
power and clocks follow that activity. A thermal fault (tps_drop) shows a hot GPU with
thermal slowdown reasons and lowered clocks; an XID fault shows the event (79: fallen off
the bus, 48: double-bit ECC error, which also counts an uncorrected volatile ECC error),
on the GPU it names or, without one, on every GPU of the instance.

GPUs are numbered as the inventory numbers them (`simulate --from-inventory`: an instance
on GPU 2 reports index 2); GPUs beyond the inventory's (a synthetic spec, or gpu_count
above the GPUs it lists) take the next free indices (gpu_indices).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fleet import gpu_catalog
from fleet.nvml.base import GpuProcess, GpuState, ThrottleReason
from fleet.simulator.spec import InstanceSpec

# (power limit W, idle power W, max SM clock MHz) by catalogue key; others get the default.
_BOARDS = {
    "h100-80gb": (700.0, 72.0, 1980),
    "h100-nvl": (400.0, 60.0, 1785),
    "h200-141gb": (700.0, 75.0, 1980),
    "b200-180gb": (1000.0, 110.0, 1965),
    "a100-80gb": (400.0, 55.0, 1410),
    "a100-40gb": (400.0, 50.0, 1410),
    "l40s": (350.0, 35.0, 2520),
    "l40": (300.0, 35.0, 2490),
    "l4": (72.0, 16.0, 2040),
    "a10": (150.0, 20.0, 1695),
    "a10g": (150.0, 20.0, 1710),
    "t4": (70.0, 10.0, 1590),
}
_DEFAULT_BOARD = (350.0, 50.0, 1800)
IDLE_SM_CLOCK_MHZ = 345
AMBIENT_C = 31
THERMAL_C = 89


@dataclass(frozen=True, kw_only=True)
class GpuLoad:
    """The engine side of one instance, as the GPUs feel it."""

    holds_memory: bool  # a process owns the GPU (false once it has exited)
    busy_fraction: float  # share of recent time in engine steps
    occupancy: float  # running sequences / a full batch, 0..1
    memory_share: float  # share of total memory the process holds
    process_name: str
    pid: int
    thermal_throttle: bool = False
    xid: int | None = None
    xid_gpu: int | None = None  # None: every GPU of the instance


def gpu_indices(spec: InstanceSpec) -> list[int]:
    """The NVML indices of the instance's GPUs, in order: the inventory's, then the next free ones."""
    indices = [slot.index for slot in spec.gpus[: spec.gpu_count]]
    spare = (i for i in range(max(indices, default=-1) + 1, 1 << 16) if i not in indices)
    return indices + [next(spare) for _ in range(spec.gpu_count - len(indices))]


def nvml_reading(*, spec: InstanceSpec, load: GpuLoad) -> dict[str, Any]:
    gpus = [_gpu_state(spec, load, i, index).to_dict() for i, index in enumerate(gpu_indices(spec))]
    return {"driver_version": spec.driver_version, "cuda_version": spec.cuda_version, "gpus": gpus}


def _gpu_state(spec: InstanceSpec, load: GpuLoad, position: int, index: int) -> GpuState:
    board = gpu_catalog.get(spec.gpu_model)
    limit, idle_w, max_clock = _BOARDS.get(spec.gpu_model, _DEFAULT_BOARD)
    activity = load.busy_fraction * (0.55 + 0.45 * load.occupancy) if load.holds_memory else 0.0
    total = spec.gpu_total_mib
    used = int(total * load.memory_share) if load.holds_memory else 0
    power = min(limit, idle_w + (limit - idle_w) * activity**0.8)
    clock = IDLE_SM_CLOCK_MHZ if activity < 0.02 else max_clock
    temperature = AMBIENT_C + round(45 * activity)
    reasons: list[str] = [ThrottleReason.GPU_IDLE] if activity < 0.02 else []
    if power >= 0.98 * limit:
        reasons.append(ThrottleReason.SW_POWER_CAP)
    if load.thermal_throttle:
        temperature, clock = THERMAL_C + position % 2, int(max_clock * 0.55)
        reasons = [ThrottleReason.SW_THERMAL, ThrottleReason.HW_THERMAL]
    slot = spec.gpus[position] if position < len(spec.gpus) else None
    xid_here = load.xid is not None and load.xid_gpu in (None, index)
    processes = (GpuProcess(pid=load.pid, name=load.process_name, used_memory_mib=used),) if used else ()
    return GpuState(
        index=index,
        uuid=(slot.uuid if slot and slot.uuid else _uuid(spec.name, index)),
        name=board.name,
        pci_bus_id=(
            slot.pci_bus_id if slot and slot.pci_bus_id else f"00000000:{0x18 + 0x10 * index:02X}:00.0"
        ),
        memory_total_mib=total,
        memory_used_mib=used,
        sm_utilization_pct=round(100 * activity),
        memory_utilization_pct=round(100 * activity * (0.4 + 0.5 * load.occupancy)),
        temperature_c=temperature,
        power_draw_w=round(power, 1),
        power_limit_w=limit,
        sm_clock_mhz=clock,
        max_sm_clock_mhz=max_clock,
        throttle_reasons=tuple(str(r) for r in reasons),
        processes=processes,
        xid_errors=(load.xid,) if xid_here else (),
        ecc_uncorrected_volatile=1 if xid_here and load.xid == 48 else 0,
        numa_node=slot.numa_node if slot and slot.numa_node is not None else (0 if index < 4 else 1),
    )


def _uuid(name: str, index: int) -> str:
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.gpu{index}.fleet-simulator"))
