"""Stored series at the resolution a chart can show: at most MAX_POINTS points a trace.

A long range is read as buckets of time, each its lowest and highest value (the database
groups the samples), so a week of 30-second samples becomes a few hundred points and a
single-sample spike still shows: it is its bucket's highest value. Buckets are whole
multiples of a minute counted from the Unix epoch, so the retention's 5-minute averages
(fleet.retention) fall one to a bucket of 5 minutes or more.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from fleet.models import Instance, InstanceState, MetricSample, ProbeSettings
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
    "AND ts >= %s{until} ORDER BY ts, id"
)
_BUCKETS_SQL = (
    "SELECT name, {bucket} AS bucket, MIN(value), MAX(value), COUNT(id) FROM {table} "
    "WHERE instance_id = %s AND name IN ({names}) AND ts >= %s{until} GROUP BY name, bucket"
)


_PHASES = {
    "postgresql": "state.kinds #> '{health,result,phases}'",
    "sqlite": "json_extract(state.kinds, '$.health.result.phases')",
}
_INSTANCE_SQL = (
    "SELECT instance.id, instance.name, {phases}, "
    "(SELECT raw_retention_hours FROM {settings} WHERE id = 1) "
    "FROM {instances} instance LEFT JOIN {states} state ON state.instance_id = instance.id "
    "WHERE instance.id = %s"
)


@dataclass(frozen=True)
class Charted:
    """What the charts read of an instance: its name, the latest health probe's phases (not
    the whole state) and the retention's raw_retention_hours (None: no settings row yet)."""

    pk: int
    name: str
    phases: dict[str, Any] | None
    raw_hours: int | None


def charted_instance(pk: int) -> Charted | None:
    """The instance `pk` as the charts read it, in one query; None when there is none."""
    quote = connection.ops.quote_name
    text = _INSTANCE_SQL.format(
        phases=_PHASES[connection.vendor],
        settings=quote(ProbeSettings._meta.db_table),
        instances=quote(Instance._meta.db_table),
        states=quote(InstanceState._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(text, [pk])
        row = cursor.fetchone()
    if row is None:
        return None
    instance_id, name, phases, raw_hours = row
    if isinstance(phases, str | bytes):
        phases = json.loads(phases)
    return Charted(instance_id, name, phases if isinstance(phases, dict) else None, raw_hours)


def _rows(
    sql: str,
    *,
    instance,  # noqa: ANN001
    names: list[str],
    since: datetime,
    until: datetime | None = None,
    leading: tuple = (),
) -> list[tuple]:
    if not names:
        return []
    text = sql.format(
        epoch=_EPOCH[connection.vendor],
        bucket=_BUCKET[connection.vendor],
        table=connection.ops.quote_name(MetricSample._meta.db_table),
        names=", ".join(["%s"] * len(names)),
        until="" if until is None else " AND ts < %s",
    )
    edges = [since] if until is None else [since, until]
    with connection.cursor() as cursor:
        cursor.execute(
            text, [*leading, instance.pk, *names, *map(connection.ops.adapt_datetimefield_value, edges)]
        )
        return cursor.fetchall()


def stored_buckets(
    *,
    instance,  # noqa: ANN001
    names: Iterable[str],
    since: datetime,
    width_s: int,
    until: datetime | None = None,
) -> dict[str, Buckets]:
    """{series name: {bucket index: (lowest, highest, samples)}} of an instance's samples
    from `since`, up to `until` (excluded) where given."""
    rows = _rows(
        _BUCKETS_SQL, instance=instance, names=list(names), since=since, until=until, leading=(int(width_s),)
    )
    found: dict[str, Buckets] = {}
    for name, bucket, lo, hi, n in rows:
        found.setdefault(name, {})[int(bucket)] = (float(lo), float(hi), n)
    return found


def stored_points(
    *,
    instance,  # noqa: ANN001
    names: Iterable[str],
    since: datetime,
    until: datetime | None = None,
) -> dict[str, list[tuple[float, float]]]:
    """{series name: [(seconds since the epoch, value), ...]} of an instance's samples from
    `since`, up to `until` (excluded) where given, in time order."""
    found: dict[str, list[tuple[float, float]]] = {}
    for name, epoch, value in _rows(
        _POINTS_SQL, instance=instance, names=list(names), since=since, until=until
    ):
        found.setdefault(name, []).append((float(epoch), value))
    return found


def combined(*parts: Buckets) -> Buckets:
    """Buckets counted in parts (samples before and after a moment) as one."""
    out: Buckets = {}
    for part in parts:
        for index, (lo, hi, n) in part.items():
            if index in out:
                olo, ohi, on = out[index]
                out[index] = (min(olo, lo), max(ohi, hi), on + n)
            else:
                out[index] = (lo, hi, n)
    return out


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
