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

from django.db import connection

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


# The two reads of a chart, written once per database (the ORM built and compiled the same
# query on every request, which cost more than running it). Seconds since the epoch, not
# datetimes: a tenth of the cost of reading them.
_EPOCH = {
    "postgresql": "date_part('epoch', ts)",
    "sqlite": "((julianday(ts) - 2440587.5) * 86400.0)",
}
_BUCKET = {
    "postgresql": "floor(date_part('epoch', ts) / %s)::bigint",
    "sqlite": "(CAST(strftime('%%s', ts) AS INTEGER) / %s)",
}
_POINTS_SQL = (
    "SELECT name, {epoch}, value FROM {table} WHERE instance_id = %s AND name IN ({names}) "
    "AND ts >= %s ORDER BY ts, id"
)
_BUCKETS_SQL = (
    "SELECT name, {bucket} AS bucket, MIN(value), MAX(value), COUNT(id) FROM {table} "
    "WHERE instance_id = %s AND name IN ({names}) AND ts >= %s GROUP BY name, bucket"
)


def _rows(sql: str, *, instance, names: list[str], since: datetime, leading: tuple = ()) -> list[tuple]:  # noqa: ANN001
    if not names:
        return []
    text = sql.format(
        epoch=_EPOCH[connection.vendor],
        bucket=_BUCKET[connection.vendor],
        table=connection.ops.quote_name(MetricSample._meta.db_table),
        names=", ".join(["%s"] * len(names)),
    )
    since_value = connection.ops.adapt_datetimefield_value(since)
    instance_id = getattr(instance, "pk", instance)
    with connection.cursor() as cursor:
        cursor.execute(text, [*leading, instance_id, *names, since_value])
        return cursor.fetchall()


def stored_buckets(*, instance, names: Iterable[str], since: datetime, width_s: int) -> dict[str, Buckets]:  # noqa: ANN001
    """{series name: {bucket index: (lowest, highest, samples)}} of an instance since `since`."""
    rows = _rows(_BUCKETS_SQL, instance=instance, names=list(names), since=since, leading=(int(width_s),))
    found: dict[str, Buckets] = {}
    for name, bucket, lo, hi, n in rows:
        found.setdefault(name, {})[int(bucket)] = (float(lo), float(hi), n)
    return found


def stored_points(*, instance, names: Iterable[str], since: datetime) -> dict[str, list[tuple[float, float]]]:  # noqa: ANN001
    """{series name: [(seconds since the epoch, value), ...]} of an instance since `since`, in
    time order."""
    found: dict[str, list[tuple[float, float]]] = {}
    for name, epoch, value in _rows(_POINTS_SQL, instance=instance, names=list(names), since=since):
        found.setdefault(name, []).append((float(epoch), value))
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
