"""dcgm-exporter's /metrics text for simulated GPUs, rendered from their NVML readings.

GET /_sim/dcgm on an instance's port serves its GPUs; GET /_sim/hosts/{host}/dcgm on the
control port serves every GPU of an inventory host (control_routes.py), so the console's
dcgm backend (fleet.nvml.dcgm) can be tried against the simulator. The text is shaped as
dcgm-exporter 4.x prints it: a # HELP and # TYPE line per field, then one sample per GPU
labelled gpu, UUID, pci_bus_id, device ("nvidia<index>"), modelName, Hostname (left out
when the instance names no host, as --no-hostname does) and DCGM_FI_DRIVER_VERSION; the
XID sample also carries err_code and err_msg. The fields are the exporter's default ones
the console reads plus those it reads when enabled (max SM clock, enforced power limit,
clock event reasons, ECC); the violation counters only where a reading has them.

Faults show as in /_sim/nvml: gpu_xid as DCGM_FI_DEV_XID_ERRORS (the last XID, with its
message), tps_drop's hot GPU as DCGM_FI_DEV_GPU_TEMP, a lower DCGM_FI_DEV_SM_CLOCK and the
thermal bits of DCGM_FI_DEV_CLOCKS_EVENT_REASONS, a crashed engine as idle, empty memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from fleet.nvml.base import GpuState, NvmlReading
from fleet.nvml.pynvml_backend import REASON_BITS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RESERVED_MIB = 512  # what the driver keeps back on a data-centre GPU, roughly
# dcgm-exporter's err_msg texts for the XIDs the simulator's faults are likely to use
XID_TEXT = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
}
UNKNOWN_XID_TEXT = "Unknown Error"


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # gauge | counter
    help: str
    value: Callable[[GpuState], float | int | None]  # None: no sample for this GPU


def _mask(g: GpuState) -> int:
    return sum(bit for bit, reason in REASON_BITS if str(reason) in g.throttle_reasons)


def _last_xid(g: GpuState) -> int:
    return g.xid_errors[-1] if g.xid_errors else 0


def _reserved(g: GpuState) -> int:
    return min(RESERVED_MIB, g.memory_used_mib)


FIELDS = (
    Field("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda g: g.sm_clock_mhz),
    Field("DCGM_FI_DEV_MAX_SM_CLOCK", "gauge", "Maximum SM clock (in MHz).", lambda g: g.max_sm_clock_mhz),
    Field("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temperature_c),
    Field("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: float(g.power_draw_w)),
    Field(
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
        "gauge",
        "Power limit the driver enforces (in W).",
        lambda g: float(g.power_limit_w),
    ),
    Field("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: g.sm_utilization_pct),
    Field(
        "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", lambda g: g.memory_utilization_pct
    ),
    Field("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).", _mask),
    Field("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", _last_xid),
    Field(
        "DCGM_FI_DEV_POWER_VIOLATION",
        "counter",
        "Throttling duration due to power constraints (in ns).",
        lambda g: g.power_violation_ns,
    ),
    Field(
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "counter",
        "Throttling duration due to thermal constraints (in ns).",
        lambda g: g.thermal_violation_ns,
    ),
    Field("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", lambda g: g.memory_free_mib),
    Field(
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        lambda g: g.memory_used_mib - _reserved(g),
    ),
    Field("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", _reserved),
    Field(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        lambda g: g.ecc_uncorrected_volatile,
    ),
    Field(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        lambda g: g.remapped_rows_uncorrectable,
    ),
    Field(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
        lambda g: g.remapped_rows_correctable,
    ),
    Field(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        lambda g: int(g.row_remap_failure),
    ),
)


def dcgm_text(*, gpus: Sequence[GpuState], driver_version: str, hostname: str = "") -> str:
    """The exporter's text for these GPUs (a host's, each once)."""
    lines: list[str] = []
    for spec in FIELDS:
        samples = [(g, v) for g in gpus if (v := spec.value(g)) is not None]
        if not samples:
            continue
        lines += [f"# HELP {spec.name} {spec.help}", f"# TYPE {spec.name} {spec.kind}"]
        for g, value in samples:
            labels = _labels(g, hostname=hostname, driver_version=driver_version)
            if spec.name == "DCGM_FI_DEV_XID_ERRORS":
                labels += [("err_code", str(value)), ("err_msg", XID_TEXT.get(int(value), UNKNOWN_XID_TEXT))]
            lines.append(f"{spec.name}{{{_render(labels)}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def host_gpus(readings: Iterable[NvmlReading]) -> list[GpuState]:
    """The GPUs of a host's instances, each once, by index: instances of one host number
    GPUs as the inventory does, so one index is one physical GPU."""
    found: dict[int, GpuState] = {}
    for reading in readings:
        for gpu in reading.gpus:
            found[gpu.index] = _shared(found[gpu.index], gpu) if gpu.index in found else gpu
    return [found[i] for i in sorted(found)]


def _shared(a: GpuState, b: GpuState) -> GpuState:
    """One GPU two instances both list: the busier one's readings, with the memory, processes,
    XIDs and ECC errors of both."""
    busy = a if (a.sm_utilization_pct, a.temperature_c) >= (b.sm_utilization_pct, b.temperature_c) else b
    return replace(
        busy,
        memory_used_mib=min(busy.memory_total_mib, a.memory_used_mib + b.memory_used_mib),
        processes=a.processes + b.processes,
        xid_errors=tuple(dict.fromkeys(a.xid_errors + b.xid_errors)),
        xid_messages=(),
        ecc_uncorrected_volatile=max(a.ecc_uncorrected_volatile, b.ecc_uncorrected_volatile),
    )


def _labels(g: GpuState, *, hostname: str, driver_version: str) -> list[tuple[str, str]]:
    labels = [
        ("gpu", str(g.index)),
        ("UUID", g.uuid),
        ("pci_bus_id", g.pci_bus_id),
        ("device", f"nvidia{g.index}"),
        ("modelName", g.name),
    ]
    if hostname:
        labels.append(("Hostname", hostname))
    return [*labels, ("DCGM_FI_DRIVER_VERSION", driver_version)]


def _render(labels: list[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{_escaped(v)}"' for k, v in labels)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float | int) -> str:
    # The exporter prints DCGM's doubles with Go's %f and its integers as they are.
    return f"{value:f}" if isinstance(value, float) else str(value)
