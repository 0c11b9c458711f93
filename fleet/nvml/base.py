"""The NVML backend interface and the GPU state it reports.

A backend reads every GPU it can see and returns `GpuState` snapshots. The real backend
(`pynvml_backend.py`) calls NVML on the machine it runs on, so it serves a GPU host from a
worker running on that host; the dcgm backend (`dcgm.py`) reads NVIDIA's dcgm-exporter over
HTTP, for hosts without a console agent; the simulated backend (`simulated_backend.py`) reads
the fleet simulator's `/_sim/nvml` endpoint, which serves the same JSON (`GpuState.to_dict`).

Fields after `numa_node` are optional: a backend that cannot read them leaves the default,
and stored readings from before they existed still load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class ThrottleReason(StrEnum):
    """NVML's clocks-event (throttle) reasons, by the names the console shows."""

    GPU_IDLE = "gpu_idle"
    APPLICATIONS_CLOCKS = "applications_clocks_setting"
    SW_POWER_CAP = "sw_power_cap"
    HW_SLOWDOWN = "hw_slowdown"
    SYNC_BOOST = "sync_boost"
    SW_THERMAL = "sw_thermal_slowdown"
    HW_THERMAL = "hw_thermal_slowdown"
    HW_POWER_BRAKE = "hw_power_brake_slowdown"
    DISPLAY_CLOCKS = "display_clock_setting"
    BOARD_LIMIT = "board_limit"  # newer drivers (nvmlClocksThrottleReasonBoardLimit)
    RELIABILITY = "reliability"  # newer drivers (nvmlClocksThrottleReasonReliability)


# The reasons that mean the GPU is running slower than it could because of heat or power.
SLOWDOWN_REASONS = frozenset(
    {
        ThrottleReason.SW_POWER_CAP,
        ThrottleReason.HW_SLOWDOWN,
        ThrottleReason.SW_THERMAL,
        ThrottleReason.HW_THERMAL,
        ThrottleReason.HW_POWER_BRAKE,
    }
)


@dataclass(frozen=True, kw_only=True)
class GpuProcess:
    pid: int
    name: str
    used_memory_mib: int


@dataclass(frozen=True, kw_only=True)
class GpuState:
    index: int
    uuid: str
    name: str
    pci_bus_id: str
    memory_total_mib: int
    memory_used_mib: int
    sm_utilization_pct: int
    memory_utilization_pct: int
    temperature_c: int
    power_draw_w: float
    power_limit_w: float
    sm_clock_mhz: int
    max_sm_clock_mhz: int
    throttle_reasons: tuple[str, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    xid_errors: tuple[int, ...] = ()  # XID event codes seen since the last read
    ecc_uncorrected_volatile: int = 0
    numa_node: int | None = None
    # xid_messages[i] says what xid_errors[i] is, where the source names it (dcgm-exporter's
    # err_msg label); empty when it does not.
    xid_messages: tuple[str, ...] = ()
    # Row remapping (A100 and later; NVML's nvmlDeviceGetRemappedRows, DCGM's remapped-row fields).
    remapped_rows_correctable: int = 0
    remapped_rows_uncorrectable: int = 0
    row_remap_pending: bool = False  # a remap waits for the next GPU reset
    row_remap_failure: bool = False  # a remap failed: the GPU needs service
    # Time the clocks were held down by the power / thermal policy since the driver loaded,
    # in ns (NVML's violationTime, DCGM_FI_DEV_POWER_VIOLATION / _THERMAL_VIOLATION): a
    # counter, so a rate needs two readings. None: not reported.
    power_violation_ns: int | None = None
    thermal_violation_ns: int | None = None

    def __post_init__(self) -> None:
        if self.xid_messages and len(self.xid_messages) != len(self.xid_errors):
            raise ValueError(
                f"GPU {self.index}: {len(self.xid_messages)} XID messages for {len(self.xid_errors)} XIDs"
            )

    @property
    def memory_free_mib(self) -> int:
        return self.memory_total_mib - self.memory_used_mib

    @property
    def slowdown_reasons(self) -> tuple[str, ...]:
        return tuple(r for r in self.throttle_reasons if r in SLOWDOWN_REASONS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuState:
        """Build from JSON, refusing missing or unknown fields with a message naming them."""
        names = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown GPU state fields: {', '.join(sorted(unknown))}")
        values = dict(data)
        values["throttle_reasons"] = tuple(values.get("throttle_reasons", ()))
        values["xid_errors"] = tuple(int(x) for x in values.get("xid_errors", ()))
        values["xid_messages"] = tuple(str(m) for m in values.get("xid_messages", ()))
        values["processes"] = tuple(GpuProcess(**p) for p in values.get("processes", ()))
        try:
            return cls(**values)
        except TypeError as exc:
            raise ValueError(f"bad GPU state: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class NvmlReading:
    driver_version: str
    cuda_version: str  # "" where the source does not say (dcgm-exporter by default)
    gpus: tuple[GpuState, ...] = field(default_factory=tuple)
    hostname: str = ""  # the host the source says it runs on (dcgm-exporter's Hostname label)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "gpus": [g.to_dict() for g in self.gpus],
        }
        return data | ({"hostname": self.hostname} if self.hostname else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NvmlReading:
        """Build from JSON (the simulator's /_sim/nvml); ValueError naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("an NVML reading must be a JSON object")
        missing = {"driver_version", "cuda_version"} - set(data)
        if missing:
            raise ValueError(f"NVML reading lacks: {', '.join(sorted(missing))}")
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list):
            raise ValueError("NVML reading 'gpus' must be a list")
        return cls(
            driver_version=str(data["driver_version"]),
            cuda_version=str(data["cuda_version"]),
            gpus=tuple(GpuState.from_dict(g) for g in gpus),
            hostname=str(data.get("hostname", "")),
        )


class NvmlBackend(Protocol):
    """Reads the GPUs of one host. Raises NvmlError when NVML cannot be read."""

    def read(self) -> NvmlReading: ...


class NvmlError(Exception):
    """NVML could not be read (no driver, no GPU, the simulator did not answer)."""
