"""Resident memory of each Procfile process over the soak, and whether it stayed flat.

Each process is counted with its children (gunicorn's workers, the Celery pool): VmRSS
summed over the tree, sampled every few seconds. Flat means the median of the last third
of the samples after the warm-up is at most the bound above the median of the first third;
medians, so a payload that swells a process for one sample is not growth. The bound is the
larger of MIN_GROWTH_MIB and GROWTH_SHARE of the first third: below 30 MiB, allocator
noise (arenas Python keeps, a pool process that took a large page once) is as big as a
leak; 20 % lets the processes whose size scales with the fleet (the simulator, the
prober) breathe with it. At `make soak`'s steady load a leak of a kilobyte per alert
received passes 30 MiB between the two thirds (docs/soak.md).

The simulator may grow by as much again as its access logs hold: each instance keeps its
last ACCESS_LOG_LINES requests, and at the soak's load they fill for half an hour (about
70 MiB at 200 instances), which is a ring filling, not a leak."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

MIN_GROWTH_MIB = 30.0
GROWTH_SHARE = 0.20
ACCESS_LOG_LINE_BYTES = 176  # measured: a simulator's RSS per access-log line kept


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the load started
    rss_kib: int
    processes: int


@dataclass
class MemoryLog:
    """Samples per Procfile entry, in time order."""

    started: float = field(default_factory=time.monotonic)
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def take(self, roles: dict[str, list[int]]) -> None:
        at = time.monotonic() - self.started
        for role, pids in roles.items():
            rss = [rss_kib(pid) for pid in pids]
            alive = [r for r in rss if r is not None]
            self.samples.setdefault(role, []).append(Sample(at=at, rss_kib=sum(alive), processes=len(alive)))


def rss_kib(pid: int) -> int | None:
    """VmRSS of one process in KiB; None when it is gone (or a zombie, which has none)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def simulator_allowance_mib(instances: int) -> float:
    """What the simulator's access logs hold once full (module docstring)."""
    from fleet.simulator.instance import ACCESS_LOG_LINES

    return instances * ACCESS_LOG_LINES * ACCESS_LOG_LINE_BYTES / 2**20


@dataclass(frozen=True)
class MemoryVerdict:
    role: str
    first_mib: float  # median of the first third after the warm-up
    last_mib: float  # median of the last third
    peak_mib: float
    bound_mib: float
    processes: str  # how many processes the tree held, e.g. "3" or "2-3"
    samples: int

    @property
    def growth_mib(self) -> float:
        return self.last_mib - self.first_mib

    @property
    def ok(self) -> bool:
        return self.growth_mib <= self.bound_mib


def judge(
    samples: list[Sample],
    *,
    role: str,
    warmup_s: float,
    min_growth_mib: float = MIN_GROWTH_MIB,
    share: float = GROWTH_SHARE,
    allowance_mib: float = 0.0,
) -> MemoryVerdict | None:
    """Whether one process tree's memory stayed flat; None with fewer than three samples
    after the warm-up (nothing to compare). allowance_mib: growth the process is known to
    have by design, on top of the bound."""
    measured = [s for s in samples if s.at >= warmup_s]
    if len(measured) < 3:
        return None
    third = len(measured) // 3
    first = statistics.median(s.rss_kib for s in measured[:third]) / 1024
    last = statistics.median(s.rss_kib for s in measured[-third:]) / 1024
    counts = sorted({s.processes for s in measured})
    return MemoryVerdict(
        role=role,
        first_mib=first,
        last_mib=last,
        peak_mib=max(s.rss_kib for s in measured) / 1024,
        bound_mib=max(min_growth_mib, share * first) + allowance_mib,
        processes=str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}",
        samples=len(measured),
    )
