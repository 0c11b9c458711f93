"""Host memory (`free -h`, guide 2.4.2) and the tokenizer leak's signature in an engine's RSS.

/proc/meminfo gives "MemTotal:  527988752 kB" lines (kB are KiB). MemAvailable is the kernel's
estimate of what can still be allocated without swapping; it exists since Linux 3.14.

The guide's leak (2.4.2) is a vLLM process whose resident memory grows steadily for days ("20 GB
to 45 GB in 3 days"): about 1.7 %/h of its size on the first day. rss_trend fits a line through
samples of at least LEAK_MIN_SPAN_S and calls it a leak when the line explains the samples well
(R² ≥ LEAK_MIN_R2: steady growth, not a step or noise) and it rises more than
LEAK_THRESHOLD_PCT_PER_H of the fitted starting RSS per hour. 1 %/h catches the guide's case on
its first two days; a process warming up after start rises faster but then levels off, which
the R² test sees once the window covers the plateau.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.i18n import Message, later
from fleet.hostchecks.processes import read_problem, read_text

LEAK_MIN_SPAN_S = 30 * 60
LEAK_THRESHOLD_PCT_PER_H = 1.0
LEAK_MIN_R2 = 0.9
LEAK_MIN_SAMPLES = 5
MAX_SAMPLES = 100_000


@dataclass(frozen=True)
class MemInfo:
    total_bytes: int | None = None
    available_bytes: int | None = None  # None before Linux 3.14
    swap_total_bytes: int | None = None
    swap_free_bytes: int | None = None
    malformed: int = 0  # lines in no "Key: value kB" shape
    unreadable: Message | None = None

    @property
    def available_fraction(self) -> float | None:
        if not self.total_bytes or self.available_bytes is None:
            return None
        return self.available_bytes / self.total_bytes

    @property
    def has_swap(self) -> bool | None:
        """GPU servers often run without swap: then a full RAM is an OOM kill (guide 2.4.2)."""
        return None if self.swap_total_bytes is None else self.swap_total_bytes > 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"available_fraction": self.available_fraction, "has_swap": self.has_swap}


def read_meminfo(*, root: Path = Path("/")) -> MemInfo:
    path = root / "proc/meminfo"
    try:
        text, _ = read_text(path)
    except OSError as exc:
        return MemInfo(unreadable=read_problem(path, exc, root=root))
    values, malformed = _meminfo_values(text)
    if "MemTotal" not in values:
        return MemInfo(malformed=malformed, unreadable=later("/proc/meminfo has no MemTotal line"))
    return MemInfo(
        total_bytes=values["MemTotal"],
        available_bytes=values.get("MemAvailable"),
        swap_total_bytes=values.get("SwapTotal"),
        swap_free_bytes=values.get("SwapFree"),
        malformed=malformed,
    )


def _meminfo_values(text: str) -> tuple[dict[str, int], int]:
    values: dict[str, int] = {}
    malformed = 0
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        number, _, unit = rest.strip().partition(" ")
        if not sep or not number.isdigit() or unit.strip() not in ("kB", ""):
            malformed += bool(line.strip())
            continue
        values[key.strip()] = int(number) * (1024 if unit.strip() == "kB" else 1)
    return values, malformed


@dataclass(frozen=True)
class RssTrend:
    samples: int
    span_s: float
    growth_kib_per_h: float | None = None
    growth_pct_per_h: float | None = None  # of the fitted RSS at the first sample
    r_squared: float | None = None
    leak_suspected: bool = False
    reason: Message | None = None  # why it is, or why it cannot be judged

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rss_trend(
    samples: Sequence[tuple[float, float]],
    *,
    min_span_s: float = LEAK_MIN_SPAN_S,
    threshold_pct_per_h: float = LEAK_THRESHOLD_PCT_PER_H,
    min_r2: float = LEAK_MIN_R2,
) -> RssTrend:
    """Growth of an engine's RSS from (seconds, RSS in KiB) samples, and whether it looks like
    the guide's slow leak. Samples that are not finite, negative RSS and repeated times are
    dropped; only the newest MAX_SAMPLES count."""
    points = _clean(samples)
    span = points[-1][0] - points[0][0] if points else 0.0
    if len(points) < LEAK_MIN_SAMPLES or span < min_span_s:
        return RssTrend(
            samples=len(points),
            span_s=span,
            reason=later(
                "too few samples to judge: %(count)s over %(minutes)s min (needs %(needed)s and "
                "%(needed_minutes)s min)",
                count=len(points),
                minutes=round(span / 60),
                needed=LEAK_MIN_SAMPLES,
                needed_minutes=round(min_span_s / 60),
            ),
        )
    slope_per_s, start, r2 = _fit(points)
    growth_h = slope_per_s * 3600
    pct_h = growth_h / start * 100 if start > 0 else None
    leak = pct_h is not None and pct_h > threshold_pct_per_h and r2 >= min_r2
    return RssTrend(
        samples=len(points),
        span_s=span,
        growth_kib_per_h=growth_h,
        growth_pct_per_h=pct_h,
        r_squared=r2,
        leak_suspected=leak,
        reason=_verdict(leak, pct_h, r2, threshold_pct_per_h),
    )


def _clean(samples: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    by_time: dict[float, float] = {}
    for sample in list(samples)[-MAX_SAMPLES:]:
        try:
            t, rss = float(sample[0]), float(sample[1])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(t) and math.isfinite(rss) and rss >= 0:
            by_time[t] = rss
    return sorted(by_time.items())


def _fit(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares: (slope per second, fitted value at the first sample, R²)."""
    t0 = points[0][0]
    xs = [t - t0 for t, _ in points]
    ys = [rss for _, rss in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - mean_y) ** 2 for y in ys)
    slope = sxy / sxx if sxx else 0.0
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 0.0
    return slope, mean_y - slope * mean_x, r2


def _verdict(leak: bool, pct_h: float | None, r2: float, threshold: float) -> Message:
    if pct_h is None:
        return later("the RSS is zero; nothing to judge")
    if leak:
        return later(
            "RSS grows steadily by %(pct).1f %%/h (over %(threshold)s %%/h): the guide's slow "
            "tokenizer leak (2.4.2); plan a restart and check for a fixed version",
            pct=pct_h,
            threshold=threshold,
        )
    if pct_h > threshold:
        return later(
            "RSS grows by %(pct).1f %%/h but not steadily (R² %(r2).2f): a step or noise, not the leak",
            pct=pct_h,
            r2=r2,
        )
    return later("RSS changes by %(pct).1f %%/h: no sign of a leak", pct=pct_h)
