"""Check the real NVML backend on a GPU machine: `python -m fleet.nvml.device_check`.

Prints the reading as JSON, then checks invariants every real GPU must satisfy. Exits 0
when all hold, 1 when one fails, 2 when NVML cannot be read at all. It also says which
catalogue card each GPU's name is read as, and whether NVML's memory total matches the
catalogue's (a note, never a failure: the catalogue may lag a new board).
"""

from __future__ import annotations

import json
import re
import sys

from fleet.gpu_names import find_gpu
from fleet.nvml.base import GpuState, NvmlError, NvmlReading, ThrottleReason
from fleet.nvml.kernel_xids import recent_xids
from fleet.nvml.pynvml_backend import PynvmlBackend

MEMORY_TOLERANCE = 0.02  # boards of one model differ by a few MiB (ECC, VBIOS), not by 2 %
KNOWN_REASONS = frozenset(str(r) for r in ThrottleReason)
PCI_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")


def gpu_problems(gpu: GpuState) -> list[str]:
    """What is impossible about one GPU's state, as messages."""
    checks = [
        (gpu.memory_total_mib > 0, f"memory total {gpu.memory_total_mib} MiB is not positive"),
        (
            0 <= gpu.memory_used_mib <= gpu.memory_total_mib,
            f"memory used {gpu.memory_used_mib} MiB is outside 0..{gpu.memory_total_mib}",
        ),
        (gpu.max_sm_clock_mhz > 0, f"max SM clock {gpu.max_sm_clock_mhz} MHz is not positive"),
        (
            0 <= gpu.sm_clock_mhz <= gpu.max_sm_clock_mhz,
            f"SM clock {gpu.sm_clock_mhz} MHz is outside 0..{gpu.max_sm_clock_mhz}",
        ),
        (0 <= gpu.sm_utilization_pct <= 100, f"SM utilization {gpu.sm_utilization_pct} % is outside 0..100"),
        (
            0 <= gpu.memory_utilization_pct <= 100,
            f"memory utilization {gpu.memory_utilization_pct} % is outside 0..100",
        ),
        (0 < gpu.temperature_c < 130, f"temperature {gpu.temperature_c} °C is implausible"),
        (gpu.power_limit_w > 0, f"power limit {gpu.power_limit_w} W is not positive"),
        (0 <= gpu.power_draw_w <= gpu.power_limit_w * 1.5, f"power draw {gpu.power_draw_w} W is implausible"),
        (gpu.uuid.startswith(("GPU-", "MIG-")), f"UUID {gpu.uuid!r} does not start with GPU-"),
        (
            bool(PCI_BUS_ID.match(gpu.pci_bus_id)),
            f"PCI bus id {gpu.pci_bus_id!r} is not domain:bus:device.function",
        ),
        (
            set(gpu.throttle_reasons) <= KNOWN_REASONS,
            f"unknown throttle reasons {sorted(set(gpu.throttle_reasons) - KNOWN_REASONS)}",
        ),
        (
            sum(p.used_memory_mib for p in gpu.processes) <= gpu.memory_used_mib + 1,
            "processes use more memory than the GPU reports used",
        ),
        (gpu.ecc_uncorrected_volatile >= 0, "negative ECC count"),
    ]
    return [f"GPU {gpu.index}: {message}" for ok, message in checks if not ok]


def reading_problems(reading: NvmlReading) -> list[str]:
    problems = [] if reading.gpus else ["NVML reports no GPU"]
    if not reading.driver_version:
        problems.append("no driver version")
    if not re.match(r"^\d+\.\d+$", reading.cuda_version):
        problems.append(f"CUDA version {reading.cuda_version!r} is not major.minor")
    indices = [g.index for g in reading.gpus]
    if indices != list(range(len(indices))):
        problems.append(f"GPU indices {indices} are not 0..n-1")
    return problems + [p for g in reading.gpus for p in gpu_problems(g)]


def catalogue_notes(reading: NvmlReading) -> list[str]:
    """For each GPU: the catalogue card its name is read as and how NVML's total compares,
    or that it is not in the catalogue (size it as a custom GPU of its memory)."""
    notes = []
    for gpu in reading.gpus:
        entry = find_gpu(gpu.name)
        if entry is None:
            notes.append(
                f"GPU {gpu.index}: {gpu.name!r} is not in the GPU catalogue; "
                f"size it as a custom GPU of {gpu.memory_total_mib} MiB"
            )
        elif abs(gpu.memory_total_mib - entry.memory_mib) > MEMORY_TOLERANCE * entry.memory_mib:
            notes.append(
                f"GPU {gpu.index}: {gpu.name!r} is {entry.key}, but NVML reports {gpu.memory_total_mib} MiB "
                f"and the catalogue {entry.memory_mib} MiB"
            )
        else:
            notes.append(f"GPU {gpu.index}: {gpu.name!r} is {entry.key} ({gpu.memory_total_mib} MiB)")
    return notes


def main() -> int:
    try:
        reading = PynvmlBackend().read()
    except NvmlError as exc:
        print(f"NVML could not be read: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(reading.to_dict(), indent=2))
    problems = reading_problems(reading)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    for note in catalogue_notes(reading):
        print(f"note {note}", file=sys.stderr)
    xids = recent_xids()
    print(
        f"kernel log: {xids.unreadable or 'readable'}; XIDs of the last 15 min: {xids.by_gpu}",
        file=sys.stderr,
    )
    print(f"{len(reading.gpus)} GPU(s), {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
