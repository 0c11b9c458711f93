"""GPU states and NVML backends for the probe tests."""

from __future__ import annotations

from typing import Any

from fleet.nvml.base import GpuState, NvmlReading


def gpu(index: int = 0, **overrides: Any) -> GpuState:
    """An H200 at work and in good health, unless overridden."""
    values = {
        "index": index,
        "uuid": f"GPU-{index}",
        "name": "NVIDIA H200",
        "pci_bus_id": f"00000000:{index:02x}:00.0",
        "memory_total_mib": 143771,
        "memory_used_mib": 120000,
        "sm_utilization_pct": 60,
        "memory_utilization_pct": 40,
        "temperature_c": 60,
        "power_draw_w": 400.0,
        "power_limit_w": 700.0,
        "sm_clock_mhz": 1980,
        "max_sm_clock_mhz": 1980,
    }
    return GpuState(**(values | overrides))


def reading(*states: GpuState) -> NvmlReading:
    return NvmlReading(driver_version="570.124.06", cuda_version="12.8", gpus=states)


class FixedBackend:
    """An NVML backend that returns one reading, or raises one exception."""

    def __init__(self, result: NvmlReading | Exception) -> None:
        self.result = result

    def read(self) -> NvmlReading:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result
