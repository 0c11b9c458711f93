"""Stored series at the resolution a chart can show: at most MAX_POINTS points a trace.

A long range is read as buckets of time, each its lowest and highest value (the database
groups the samples), so a week of 30-second samples becomes a few hundred points and a
single-sample spike still shows: it is its bucket's highest value. Buckets are whole
multiples of a minute counted from the Unix epoch, so the retention's 5-minute averages
(fleet.retention) fall one to a bucket of 5 minutes or more.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, F, FloatField, Func, IntegerField, Max, Min

from fleet.models import MetricSample
from fleet.retention import BUCKET_SECONDS

GAP_FACTOR = 2.5  # a gap of more than this many sampling intervals is missing samples
MAX_POINTS = 600  # a trace never carries more: about the width of a chart in pixels
POINTS_PER_BUCKET = 2  # its lowest and its highest value
WIDTHS_S = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)

# A sample this old is in the database: a probe stores its samples well within this of its
# start, the host agent's snapshots too. What is older is settled (fleet.chart_lines keeps
# it in the process), so a polled chart reads only the recent samples again.
SETTLED_AFTER_S = 600

Buckets = dict[int, tuple[float, float, int]]  # bucket index: (lowest, highest, samples)


def bucket_width_s(span_s: float) -> int:
    """The narrowest bucket that keeps `span_s` within MAX_POINTS points a trace."""
    for width in WIDTHS_S:
        if POINTS_PER_BUCKET * (math.ceil(span_s / width) + 1) <= MAX_POINTS:
            return width
    return WIDTHS_S[-1] * math.ceil(span_s * POINTS_PER_BUCKET / (MAX_POINTS - 2) / WIDTHS_S[-1])


class _Epoch(Func):
    """Seconds since the epoch of a timestamp column, in the database."""

    output_field = FloatField()

    def as_postgresql(self, compiler, connection, **extra):  # noqa: ANN001, ANN003, ANN201
        return self.as_sql(compiler, connection, template="date_part('epoch', %(expressions)s)", **extra)

    def as_sqlite(self, compiler, connection, **extra):  # noqa: ANN001, ANN003, ANN201
        template = "((julianday(%(expressions)s) - 2440587.5) * 86400.0)"
        return self.as_sql(compiler, connection, template=template, **extra)


class _BucketIndex(Func):
    """floor(seconds since the epoch / width) of a timestamp column, in the database."""

    output_field = IntegerField()

    def __init__(self, expression: F, *, width_s: int) -> None:
        super().__init__(expression)
        self.width_s = int(width_s)

    def as_postgresql(self, compiler, connection, **extra):  # noqa: ANN001, ANN003, ANN201
        template = f"floor(date_part('epoch', %(expressions)s) / {self.width_s})::bigint"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler, connection, **extra):  # noqa: ANN001, ANN003, ANN201
        # '%%%%s': '%%s' once the template is filled in, '%s' once the backend's '%%' is undone
        template = f"(CAST(strftime('%%%%s', %(expressions)s) AS INTEGER) / {self.width_s})"
        return self.as_sql(compiler, connection, template=template, **extra)


def stored_buckets(*, instance, names: Iterable[str], since: datetime, width_s: int) -> dict[str, Buckets]:  # noqa: ANN001
    """{series name: {bucket index: (lowest, highest, samples)}} of an instance since `since`."""
    rows = (
        MetricSample.objects.filter(instance=instance, name__in=list(names), ts__gte=since)
        .annotate(bucket=_BucketIndex(F("ts"), width_s=width_s))
        .values("name", "bucket")
        .annotate(lo=Min("value", output_field=FloatField()), hi=Max("value", output_field=FloatField()))
        .annotate(n=Count("id"))
        .order_by()
        .values_list("name", "bucket", "lo", "hi", "n")
    )
    found: dict[str, Buckets] = {}
    for name, bucket, lo, hi, n in rows:
        found.setdefault(name, {})[bucket] = (lo, hi, n)
    return found


def stored_points(*, instance, names: Iterable[str], since: datetime) -> dict[str, list[tuple[float, float]]]:  # noqa: ANN001
    """{series name: [(seconds since the epoch, value), ...]} of an instance since `since`, in
    time order (seconds, not datetimes: a tenth of the cost of reading them)."""
    rows = (
        MetricSample.objects.filter(instance=instance, name__in=list(names), ts__gte=since)
        .annotate(epoch=_Epoch(F("ts")))
        .order_by("ts", "id")
        .values_list("name", "epoch", "value")
    )
    found: dict[str, list[tuple[float, float]]] = {}
    for name, epoch, value in rows:
        found.setdefault(name, []).append((epoch, value))
    return found


def merge_factor(buckets: Buckets, *, width_s: int, every_s: float, coarse_before: int | None = None) -> int:
    """How many buckets to draw as one so that an empty one is a real gap: a bucket must
    span GAP_FACTOR sampling intervals of the series (estimated from the buckets when it
    is sampled more slowly than `every_s`), and hold one retention average where the
    range reaches back to them (bucket indexes below `coarse_before`)."""
    indexes = sorted(buckets)
    steps = [b - a for a, b in zip(indexes, indexes[1:], strict=False)]
    if steps:
        per_bucket = statistics.median(buckets[i][2] for i in indexes)
        every_s = max(every_s, width_s * statistics.median(steps) / per_bucket)
    needed = GAP_FACTOR * every_s
    if coarse_before is not None and indexes and indexes[0] < coarse_before:
        needed = max(needed, BUCKET_SECONDS)
    return max(1, math.ceil(needed / width_s - 1e-9))


def lows_and_highs(buckets: Buckets, *, merge: int = 1) -> tuple[int, list[float | None]]:
    """(the first bucket's index, [lowest, highest, lowest, highest, ...]) from the first to
    the last bucket with samples, `merge` buckets as one; None, None for an empty one."""
    if merge > 1:
        merged: Buckets = {}
        for index, (lo, hi, n) in buckets.items():
            key = index // merge
            mlo, mhi, mn = merged.get(key, (lo, hi, 0))
            merged[key] = (min(mlo, lo), max(mhi, hi), mn + n)
        buckets = merged
    first, last = min(buckets), max(buckets)
    values: list[float | None] = []
    for index in range(first, last + 1):
        lo, hi, _n = buckets.get(index, (None, None, 0))
        values += (lo, hi)
    return first * merge, values
