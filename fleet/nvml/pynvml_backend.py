"""The real NVML backend: pynvml (nvidia-ml-py) on the machine the worker runs on.

Each read initialises NVML, reads every GPU and shuts NVML down again, so a driver
reload between reads does no harm. Required fields (name, UUID, PCI bus id, memory)
fail the read when NVML refuses them; optional ones (temperature, power, clocks,
throttle reasons, processes, ECC, NUMA node, remapped rows, violation times) fall back to
0 / empty / None when the GPU or driver does not support them (row remapping needs an A100
or later and a driver from R450 on). XID events need a long-lived NVML event set, which a
snapshot read does not hold, so `xid_errors` comes from the driver's reports in the
kernel log instead (fleet.nvml.kernel_xids: the last 15 minutes, matched by PCI address).
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from fleet.nvml.base import GpuProcess, GpuState, NvmlError, NvmlReading, ThrottleReason
from fleet.nvml.kernel_xids import KMSG, XidLog, recent_xids

MiB = 1024 * 1024

# NVML's clocks-event (throttle) reason bits (nvml.h; stable across driver versions).
REASON_BITS: tuple[tuple[int, ThrottleReason], ...] = (
    (0x001, ThrottleReason.GPU_IDLE),
    (0x002, ThrottleReason.APPLICATIONS_CLOCKS),
    (0x004, ThrottleReason.SW_POWER_CAP),
    (0x008, ThrottleReason.HW_SLOWDOWN),
    (0x010, ThrottleReason.SYNC_BOOST),
    (0x020, ThrottleReason.SW_THERMAL),
    (0x040, ThrottleReason.HW_THERMAL),
    (0x080, ThrottleReason.HW_POWER_BRAKE),
    (0x100, ThrottleReason.DISPLAY_CLOCKS),
    (0x200, ThrottleReason.BOARD_LIMIT),
    (0x400, ThrottleReason.RELIABILITY),
)


def throttle_reasons_from_mask(mask: int) -> tuple[str, ...]:
    """Reason names for a clocks-event bitmask; bits we do not know come back as
    "unknown_0x…" so nothing NVML reports is silently dropped."""
    names = [str(reason) for bit, reason in REASON_BITS if mask & bit]
    known = sum(bit for bit, _ in REASON_BITS)
    unknown = mask & ~known
    bit = 1
    while unknown >= bit:
        if unknown & bit:
            names.append(f"unknown_{bit:#x}")
        bit <<= 1
    return tuple(names)


def load_pynvml() -> ModuleType:
    try:
        with warnings.catch_warnings():
            # The "pynvml" shim package warns on import; the module itself is nvidia-ml-py's.
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError as exc:
        raise NvmlError(f"pynvml (nvidia-ml-py) is not installed: {exc}") from None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cuda_version_text(version: int) -> str:
    """NVML's CUDA driver version integer (12040) as "12.4"."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def _sysfs_numa_node(pci_bus_id: str) -> int | None:
    # NVML's "00000000:19:00.0" is sysfs's "0000:19:00.0"
    domain, _, rest = pci_bus_id.lower().partition(":")
    path = Path(f"/sys/bus/pci/devices/{int(domain, 16):04x}:{rest}/numa_node")
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


class _Device:
    """One GPU handle plus the calls to read it."""

    def __init__(self, nvml: ModuleType, index: int) -> None:
        self.nvml, self.index = nvml, index
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)

    def optional(self, name: str, *args: Any, default: Any = None) -> Any:
        fn = getattr(self.nvml, name, None)
        if fn is None:
            return default
        try:
            return fn(self.handle, *args)
        except self.nvml.NVMLError:
            return default

    def reasons(self) -> tuple[str, ...]:
        mask = self.optional("nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self.optional("nvmlDeviceGetCurrentClocksThrottleReasons", default=0)
        return throttle_reasons_from_mask(int(mask))

    def processes(self) -> tuple[GpuProcess, ...]:
        found = self.optional("nvmlDeviceGetComputeRunningProcesses", default=[]) or []
        return tuple(
            GpuProcess(
                pid=int(p.pid),
                name=self._process_name(int(p.pid)),
                used_memory_mib=int(p.usedGpuMemory or 0) // MiB,
            )
            for p in found
        )

    def _process_name(self, pid: int) -> str:
        try:
            return _text(self.nvml.nvmlSystemGetProcessName(pid))
        except self.nvml.NVMLError:
            return ""

    def ecc(self) -> int:
        nvml = self.nvml
        count = self.optional(
            "nvmlDeviceGetTotalEccErrors", nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
        )
        return int(count or 0)

    def remapped_rows(self) -> dict[str, Any]:
        """Row-remapping state; empty (the defaults) where the GPU or driver has none."""
        rows = self.optional("nvmlDeviceGetRemappedRows")
        if rows is None:
            return {}
        correctable, uncorrectable, pending, failure = rows
        return {
            "remapped_rows_correctable": int(correctable),
            "remapped_rows_uncorrectable": int(uncorrectable),
            "row_remap_pending": bool(pending),
            "row_remap_failure": bool(failure),
        }

    def violation_ns(self, policy_name: str) -> int | None:
        policy = getattr(self.nvml, policy_name, None)
        status = None if policy is None else self.optional("nvmlDeviceGetViolationStatus", policy)
        return None if status is None else int(status.violationTime)

    def numa_node(self, pci_bus_id: str) -> int | None:
        node = self.optional("nvmlDeviceGetNumaNodeId")
        if node is not None and int(node) >= 0:
            return int(node)
        return _sysfs_numa_node(pci_bus_id)

    def state(self, xids: XidLog) -> GpuState:
        nvml, handle = self.nvml, self.handle
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        pci = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
        util = self.optional("nvmlDeviceGetUtilizationRates")
        return GpuState(
            index=self.index,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            name=_text(nvml.nvmlDeviceGetName(handle)),
            pci_bus_id=pci,
            memory_total_mib=int(memory.total) // MiB,
            memory_used_mib=int(memory.used) // MiB,
            sm_utilization_pct=int(util.gpu) if util else 0,
            memory_utilization_pct=int(util.memory) if util else 0,
            temperature_c=int(
                self.optional("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU, default=0)
            ),
            power_draw_w=self.optional("nvmlDeviceGetPowerUsage", default=0) / 1000,
            power_limit_w=self.optional("nvmlDeviceGetEnforcedPowerLimit", default=0) / 1000,
            sm_clock_mhz=int(self.optional("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM, default=0)),
            max_sm_clock_mhz=int(self.optional("nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM, default=0)),
            throttle_reasons=self.reasons(),
            processes=self.processes(),
            ecc_uncorrected_volatile=self.ecc(),
            xid_errors=xids.for_bus_id(pci),
            numa_node=self.numa_node(pci),
            power_violation_ns=self.violation_ns("NVML_PERF_POLICY_POWER"),
            thermal_violation_ns=self.violation_ns("NVML_PERF_POLICY_THERMAL"),
            **self.remapped_rows(),
        )


class PynvmlBackend:
    """Reads this machine's GPUs through NVML. NvmlError when NVML (the driver, the
    library or pynvml) is missing or a required call fails. XIDs are those the kernel
    log holds from the last `xid_window_s` seconds."""

    def __init__(self, *, xid_window_s: float = 900.0, kmsg_path: str = KMSG) -> None:
        self.xid_window_s, self.kmsg_path = xid_window_s, kmsg_path

    def read(self) -> NvmlReading:
        nvml = load_pynvml()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise NvmlError(
                f"NVML could not start ({exc}): is the NVIDIA driver installed and a GPU visible?"
            ) from None
        try:
            return self._read(nvml, recent_xids(window_s=self.xid_window_s, path=self.kmsg_path))
        except nvml.NVMLError as exc:
            raise NvmlError(f"NVML read failed: {exc}") from None
        except (AttributeError, TypeError, ValueError) as exc:  # an NVML older than these calls
            raise NvmlError(f"NVML read failed: {type(exc).__name__}: {exc}") from None
        finally:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlShutdown()

    @staticmethod
    def _read(nvml: ModuleType, xids: XidLog) -> NvmlReading:
        count = nvml.nvmlDeviceGetCount()
        return NvmlReading(
            driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
            cuda_version=cuda_version_text(int(nvml.nvmlSystemGetCudaDriverVersion())),
            gpus=tuple(_Device(nvml, i).state(xids) for i in range(count)),
        )
