"""PromQL's histogram_quantile over classic (le-bucket) histograms, and window deltas.

`histogram_quantile` follows Prometheus's promql/quantile.go `bucketQuantile` step by
step: sort by upper bound; no +Inf bucket → NaN; merge equal bounds; correct float
precision errors (relative 1e-12); force monotonic counts (the running maximum, like
`ensureMonotonic`); fewer than two buckets or no observations → NaN; then linear
interpolation inside the bucket holding rank q × count. The lowest bucket interpolates
from 0 when its upper bound is above 0 (else its bound is returned); a rank in the +Inf
bucket returns the upper bound of the bucket below it. NaN is returned as None here.
"""

from __future__ import annotations

import math
from bisect import bisect_left

Buckets = list[tuple[float, float]]  # (upper bound, cumulative count)

PRECISION_TOLERANCE = 1e-12


def _coalesce(buckets: Buckets) -> Buckets:
    merged: Buckets = [buckets[0]]
    for bound, count in buckets[1:]:
        if bound == merged[-1][0]:
            merged[-1] = (bound, merged[-1][1] + count)
        else:
            merged.append((bound, count))
    return merged


def _correct_precision(counts: list[float]) -> None:
    previous = counts[0]
    for i in range(1, len(counts)):
        delta = abs(counts[i] - previous)
        if delta == 0:
            continue
        relative = delta / counts[i] if counts[i] else math.inf
        if relative <= PRECISION_TOLERANCE:
            counts[i] = previous
        else:
            previous = counts[i]


def _ensure_monotonic(counts: list[float]) -> None:
    highest = counts[0]
    for i in range(1, len(counts)):
        highest = max(highest, counts[i])
        counts[i] = highest


def histogram_quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile of cumulative buckets exactly as PromQL computes it; None for NaN."""
    if math.isnan(q) or not buckets:
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(buckets, key=lambda b: b[0])
    if not math.isinf(ordered[-1][0]) or ordered[-1][0] < 0:
        return None
    merged = _coalesce(ordered)
    bounds, counts = [b for b, _ in merged], [c for _, c in merged]
    _correct_precision(counts)
    _ensure_monotonic(counts)
    if len(bounds) < 2 or counts[-1] == 0:
        return None
    return _interpolate(q * counts[-1], bounds, counts)


def _interpolate(rank: float, bounds: list[float], counts: list[float]) -> float | None:
    b = bisect_left(counts, rank, hi=len(counts) - 1)  # first bucket with count >= rank
    if b == len(bounds) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start, count, rank = bounds[b - 1], count - counts[b - 1], rank - counts[b - 1]
    if count == 0:  # q = 0 over an empty lowest bucket: Go's 0/0 is NaN
        return None
    return start + (end - start) * (rank / count)


def bucket_deltas(prev: Buckets | None, curr: Buckets) -> Buckets:
    """Observations between two scrapes, bucket by bucket. A counter reset (any bucket
    smaller than before, or a changed bucket layout, as after a restart) means the
    process started over, so the current counts alone are the window's."""
    if not prev:
        return list(curr)
    before = dict(prev)
    if set(before) != {bound for bound, _ in curr}:
        return list(curr)
    deltas = [(bound, count - before[bound]) for bound, count in curr]
    if any(delta < 0 for _, delta in deltas):
        return list(curr)
    return deltas
