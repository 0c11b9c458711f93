"""The instance charts' lines, each as its values and the same values written as JSON, the
settled part of a range (samples no probe adds to any more) kept in the process: a polled
chart reads and writes only the last few minutes again.

A line is read one of two ways (fleet.chart_series): a short range as every sample, with a
break where samples are missing; a long one as buckets of time, each its lowest and highest
value. The settled part of a range is cached under a key that names its edges, so it is read
in full again when an edge moves: every SETTLED_AFTER_S for a short range, every bucket
width for a long one (an hour for a week).
"""

from __future__ import annotations

import bisect
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from django.utils import timezone

from core.figures import number_texts
from fleet.chart_series import (
    GAP_FACTOR,
    SETTLED_AFTER_S,
    Buckets,
    lows_and_highs,
    merge_factor,
    stored_buckets,
    stored_points,
)
from fleet.retention import BUCKET_SECONDS


class _Kept:
    """The settled parts of the lines last drawn, in this process: a few hundred kilobytes a
    range and instance, the oldest dropped beyond MAX_ENTRIES. Django's cache would pickle
    and unpickle them on every poll, which costs as much as writing them again."""

    MAX_ENTRIES = 64
    TTL_S = 3600  # read in full at least this often (samples deleted, settings changed)

    def __init__(self) -> None:
        self.entries: dict[str, tuple[float, Any]] = {}
        self.lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self.lock:
            kept_at, value = self.entries.get(key, (0.0, None))
        return value if time.monotonic() - kept_at < self.TTL_S else None

    def set(self, key: str, value: Any) -> None:
        with self.lock:
            self.entries.pop(key, None)
            self.entries[key] = (time.monotonic(), value)
            while len(self.entries) > self.MAX_ENTRIES:
                del self.entries[next(iter(self.entries))]


cache = _Kept()
Points = list[tuple[float, float | None]]  # (seconds since the epoch, value; None: a break)


@dataclass(frozen=True)
class Line:
    """A series as a chart draws it: y (and its JSON texts) at x, local wall-clock
    milliseconds, or evenly spaced from x0_s (seconds since the epoch) by dx_s."""

    y: list[float | None]
    y_texts: list[str]
    x: list[int] | None = None
    x_texts: list[str] | None = None
    x0_s: float = 0.0
    dx_s: float = 0.0


def _key(kind: str, instance, names: Iterable[str], *edges: object) -> str:  # noqa: ANN001
    crc = zlib.crc32(",".join(sorted(names)).encode())
    return f"fleet-chart-lines:{kind}:{instance.pk}:{instance.name}:{crc}:" + ":".join(map(str, edges))


# Every sample ---------------------------------------------------------------------------


def with_gaps(
    points: list[tuple[Any, float]], *, every_s: float, coarse_before: Any = None
) -> list[tuple[Any, float | None]]:
    """The points with a None (a break in the line) wherever more than GAP_FACTOR sampling
    intervals pass between two samples. Samples older than coarse_before are the retention's
    averages, one per BUCKET_SECONDS, and are expected that far apart."""
    out: list[tuple[Any, float | None]] = list(points[:1])
    if not points:
        return out
    dated = isinstance(points[0][0], datetime)  # or seconds since the epoch
    fine, coarse = GAP_FACTOR * every_s, GAP_FACTOR * max(every_s, BUCKET_SECONDS)
    for (before, _value), (after, value) in pairwise(points):
        step = after - before
        limit = coarse if coarse_before is not None and before < coarse_before else fine
        if (step.total_seconds() if dated else step) > limit:
            out.append((before + step / 2, None))
        out.append((after, value))
    return out


def sampling_interval_s(points: list[tuple[Any, float]], *, default_s: float) -> float:
    """Seconds between a series' samples: the median spacing of its points, at least the
    default interval of its probe kind (a schedule slowed in the admin shows in the data)."""
    spacing = sorted(_seconds(b - a) for (a, _a), (b, _b) in pairwise(points))
    return max(default_s, spacing[len(spacing) // 2]) if spacing else default_s


def _seconds(delta: timedelta | float) -> float:
    return delta.total_seconds() if isinstance(delta, timedelta) else delta


@dataclass(frozen=True)
class _Settled:
    """A raw line's settled points, breaks included, and how often its samples come."""

    every_s: float
    epochs: list[float]
    values: list[float | None]
    xs: list[int]
    x_texts: list[str]
    y_texts: list[str]


_NOTHING_SETTLED = _Settled(0.0, [], [], [], [], [])


def raw_lines(
    *,
    instance,  # noqa: ANN001
    names: Iterable[str],
    since: datetime,
    now: datetime,
    scales: dict[str, float],
    every_s: Callable[[str, list[tuple[float, float]]], float],
    coarse_before: float,
) -> dict[str, Line]:
    """Every sample since `since` of each series that has some, with breaks where samples
    are missing; `every_s(name, points)`: how often the series' samples come."""
    start = int(since.timestamp() // SETTLED_AFTER_S) * SETTLED_AFTER_S
    settled_at = int((now.timestamp() - SETTLED_AFTER_S) // SETTLED_AFTER_S) * SETTLED_AFTER_S
    shift = _Shift()
    zone = shift.zone_name
    key = _key("raw", instance, names, start, settled_at, zone, int(coarse_before // SETTLED_AFTER_S))
    settled: dict[str, _Settled] | None = cache.get(key)
    if settled is None:
        stored = stored_points(instance=instance, names=names, since=_at(start))
        settled = {}
        for name, points in stored.items():
            every = every_s(name, points)
            breaks = with_gaps(
                [p for p in points if p[0] < settled_at], every_s=every, coarse_before=coarse_before
            )
            settled[name] = _settle(every, breaks, scales.get(name, 1.0), shift)
        cache.set(key, settled)
        fresh = {n: [p for p in points if p[0] >= settled_at] for n, points in stored.items()}
    else:
        fresh = stored_points(instance=instance, names=names, since=_at(settled_at))
    lines = {}
    for name in set(settled) | set(fresh):
        done = settled.get(name, _NOTHING_SETTLED)
        if not done.epochs:  # nothing settled yet: the interval from its fresh points
            done = _Settled(every_s(name, fresh.get(name, [])), [], [], [], [], [])
        line = _raw_line(done, fresh.get(name, []), since.timestamp(), scales.get(name, 1.0), shift)
        if line.y:
            lines[name] = line
    return lines


def _settle(every_s: float, points: Points, scale: float, shift: _Shift) -> _Settled:
    epochs = [e for e, _v in points]
    values = _scaled([v for _e, v in points], scale)
    xs = shift.ms(epochs)
    return _Settled(every_s, epochs, values, xs, list(map(str, xs)), number_texts(values))


def _scaled(values: list[float | None], scale: float) -> list[float | None]:
    return values if scale == 1.0 else [None if v is None else v * scale for v in values]


def _raw_line(done: _Settled, fresh: list, since_s: float, scale: float, shift: _Shift) -> Line:
    cut = bisect.bisect_left(done.epochs, since_s)
    if cut < len(done.values) and done.values[cut] is None:
        cut += 1  # a break before the first point shown
    xs, values = done.xs[cut:], done.values[cut:]
    x_texts, y_texts = done.x_texts[cut:], done.y_texts[cut:]
    last = done.epochs[-1:] if cut < len(done.epochs) else []
    fresh = [p for p in fresh if p[0] >= since_s]
    if fresh:  # breaks within the fresh points, and between them and the settled ones
        tail = with_gaps([(last[0], 0.0), *fresh] if last else fresh, every_s=done.every_s)[len(last) :]
        tail_xs = shift.ms([e for e, _v in tail])
        tail_values = _scaled([v for _e, v in tail], scale)
        xs += tail_xs
        values += tail_values
        x_texts += map(str, tail_xs)
        y_texts += number_texts(tail_values)
    return Line(y=values, y_texts=y_texts, x=xs, x_texts=x_texts)


class _Shift:
    """Seconds since the epoch as local wall-clock milliseconds, as a date axis reads numbers
    (plotly.js reads dates as wall-clock time and ignores offsets)."""

    def __init__(self) -> None:
        self.zone = timezone.get_current_timezone()
        self.zone_name = timezone.get_current_timezone_name()

    def ms(self, epochs: list[float]) -> list[int]:
        if not epochs:
            return []
        first, last = self._offset_s(epochs[0]), self._offset_s(epochs[-1])
        if first != last:  # a clock change in the range
            return [int((e + self._offset_s(e)) * 1000) for e in epochs]
        return [int((e + first) * 1000) for e in epochs]

    def _offset_s(self, epoch: float) -> float:
        offset = datetime.fromtimestamp(epoch, self.zone).utcoffset()
        return offset.total_seconds() if offset else 0.0


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


# Buckets of lowest and highest values --------------------------------------------------


@dataclass(frozen=True)
class _Groups:
    """A bucketed line's settled part: `merge` buckets drawn as one group, the values of the
    groups first..end-1 (lowest, highest; None, None for an empty one)."""

    merge: int
    first: int | None
    end: int
    values: list[float | None]
    texts: list[str]


def bucket_lines(
    *,
    instance,  # noqa: ANN001
    names: Iterable[str],
    since: datetime,
    now: datetime,
    width_s: int,
    scales: dict[str, float],
    every_s: Callable[[str], float],
    coarse_before: int,
) -> dict[str, Line]:
    """Each series that has samples since `since` as buckets of `width_s` seconds, merged so
    that an empty one is a real gap (fleet.chart_series.merge_factor)."""
    first = int(since.timestamp() // width_s)
    settled = int((now.timestamp() - SETTLED_AFTER_S) // width_s)  # buckets before it are done
    key = _key("buckets", instance, names, width_s, first, settled, coarse_before)
    groups: dict[str, _Groups] | None = cache.get(key)
    if groups is None:
        stored = stored_buckets(instance=instance, names=names, since=_at(first * width_s), width_s=width_s)
        merges = {n: merge_factor(b, width_s=width_s, every_s=every_s(n), coarse_before=coarse_before)
                  for n, b in stored.items()}  # fmt: skip
        groups = {n: _group(b, merges[n], settled, scales.get(n, 1.0)) for n, b in stored.items()}
        cache.set(key, groups)
    else:
        start = min((g.end * g.merge for g in groups.values()), default=settled)
        stored = stored_buckets(instance=instance, names=names, since=_at(start * width_s), width_s=width_s)
    lines = {}
    for name in set(groups) | set(stored):
        done = groups.get(name) or _Groups(1, None, settled, [], [])  # new since the cache was filled
        fresh = {i: b for i, b in stored.get(name, {}).items() if i // done.merge >= done.end}
        line = _bucket_line(done, fresh, scales.get(name, 1.0), width_s)
        if line.y:
            lines[name] = line
    return lines


def _group(buckets: Buckets, merge: int, settled: int, scale: float) -> _Groups:
    end = settled // merge  # groups before it hold settled buckets only
    done = {i: b for i, b in buckets.items() if i // merge < end}
    if not done:
        return _Groups(merge, None, end, [], [])
    first, values = lows_and_highs(done, merge=merge)
    values = _scaled(values, scale)
    return _Groups(merge, first // merge, end, values, number_texts(values))


def _bucket_line(done: _Groups, fresh: Buckets, scale: float, width_s: int) -> Line:
    values, texts, first = list(done.values), list(done.texts), done.first
    if fresh:
        start, tail = lows_and_highs(fresh, merge=done.merge)
        tail = _scaled(tail, scale)
        if first is None:
            first = start // done.merge
        else:  # the empty groups between the last settled one with samples and the fresh ones
            missing = start // done.merge - (first + len(values) // 2)
            values += [None] * (2 * missing)
            texts += ["null"] * (2 * missing)
        values += tail
        texts += number_texts(tail)
    if first is None:
        return Line(y=[], y_texts=[])
    step_s = width_s * done.merge
    return Line(y=values, y_texts=texts, x0_s=first * step_s, dx_s=step_s / 2)
