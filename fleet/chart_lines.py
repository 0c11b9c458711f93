"""The instance charts' lines, each as its values and the same values written as JSON, the
settled part of a range (samples no probe adds to any more) kept in the process: a polled
chart reads and writes only the last few minutes again.

A line is read one of two ways (fleet.chart_series): a short range as every sample, with a
break where samples are missing; a long one as buckets of time, each its lowest and highest
value. The settled part ends at the settled line, SETTLED_AFTER_S before now rounded down to
a minute; as the line moves on, the kept part is extended by the minute of samples it passed
(one small read a minute), so a poll reads only the samples after the line, 10 to 11 minutes
of them. The kept part is read in full again when an edge of its key moves: every
SETTLED_AFTER_S for a short range, every bucket width for a long one (an hour for a week),
and at least every hour.
"""

from __future__ import annotations

import bisect
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from itertools import pairwise
from typing import Any

from django.utils import timezone

from core.figures import number_texts
from fleet.chart_series import (
    GAP_FACTOR,
    SETTLED_AFTER_S,
    Buckets,
    combined,
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

    def set(self, key: str, value: Any, *, extended: bool = False) -> None:
        """Keep `value` under `key`; `extended`: the value extends the one kept, which keeps
        its age (an extended part is still read in full once TTL_S after its first read)."""
        with self.lock:
            kept_at, _old = self.entries.pop(key, (time.monotonic(), None))
            self.entries[key] = (kept_at if extended else time.monotonic(), value)
            while len(self.entries) > self.MAX_ENTRIES:
                del self.entries[next(iter(self.entries))]


cache = _Kept()
Points = list[tuple[float, float | None]]  # (seconds since the epoch, value; None: a break)
LINE_STEP_S = 60  # the settled line moves a minute at a time


def settled_line_s(now: datetime) -> int:
    """Seconds since the epoch before which every sample is in the database: SETTLED_AFTER_S
    before `now`, rounded down to a whole minute."""
    return int((now.timestamp() - SETTLED_AFTER_S) // LINE_STEP_S) * LINE_STEP_S


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
    points: list[tuple[float, float]], *, every_s: float, coarse_before: float | None = None
) -> Points:
    """The points (seconds since the epoch, value) with a None (a break in the line) wherever
    more than GAP_FACTOR sampling intervals pass between two samples. Samples older than
    coarse_before are the retention's averages, one per BUCKET_SECONDS, and are expected that
    far apart."""
    out: Points = list(points[:1])
    fine, coarse = GAP_FACTOR * every_s, GAP_FACTOR * max(every_s, BUCKET_SECONDS)
    for (before, _value), (after, value) in pairwise(points):
        step = after - before
        limit = coarse if coarse_before is not None and before < coarse_before else fine
        if step > limit:
            out.append((before + step / 2, None))
        out.append((after, value))
    return out


def sampling_interval_s(points: list[tuple[float, float]], *, default_s: float) -> float:
    """Seconds between a series' samples: the median spacing of its points, at least the
    default interval of its probe kind (a schedule slowed in the admin shows in the data)."""
    spacing = sorted(b - a for (a, _a), (b, _b) in pairwise(points))
    return max(default_s, spacing[len(spacing) // 2]) if spacing else default_s


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


@dataclass(frozen=True)
class _RawKept:
    """The settled lines of a short range: samples before `upto` (seconds since the epoch)."""

    upto: int
    lines: dict[str, _Settled]


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
    names = list(names)
    start = int(since.timestamp() // SETTLED_AFTER_S) * SETTLED_AFTER_S
    line = settled_line_s(now)
    shift = _Shift()
    key = _key("raw", instance, names, start, shift.zone_name, int(coarse_before // SETTLED_AFTER_S))
    kept: _RawKept | None = cache.get(key)
    if kept is None or kept.upto > line:
        stored = stored_points(instance=instance, names=names, since=_at(start))
        settled = {}
        for name, points in stored.items():
            every = every_s(name, points)
            breaks = with_gaps([p for p in points if p[0] < line], every_s=every, coarse_before=coarse_before)
            settled[name] = _settle(every, breaks, scales.get(name, 1.0), shift)
        cache.set(key, _RawKept(line, settled))
        fresh = {n: [p for p in points if p[0] >= line] for n, points in stored.items()}
    else:
        settled = kept.lines
        if kept.upto < line:  # the line moved on: keep the minutes it passed
            passed = stored_points(instance=instance, names=names, since=_at(kept.upto), until=_at(line))
            settled = settled | {
                name: _extend(
                    settled.get(name) or _Settled(every_s(name, points), [], [], [], [], []),
                    points,
                    scales.get(name, 1.0),
                    shift,
                    coarse_before,
                )
                for name, points in passed.items()
            }
            cache.set(key, _RawKept(line, settled), extended=True)
        fresh = stored_points(instance=instance, names=names, since=_at(line))
    lines = {}
    for name in set(settled) | set(fresh):
        done = settled.get(name, _NOTHING_SETTLED)
        if not done.epochs:  # nothing settled yet: the interval from its fresh points
            done = _Settled(every_s(name, fresh.get(name, [])), [], [], [], [], [])
        line_drawn = _raw_line(
            done, fresh.get(name, []), since.timestamp(), scales.get(name, 1.0), shift, coarse_before
        )
        if line_drawn.y:
            lines[name] = line_drawn
    return lines


def _settle(every_s: float, points: Points, scale: float, shift: _Shift) -> _Settled:
    epochs = [e for e, _v in points]
    values = _scaled([v for _e, v in points], scale)
    xs = shift.ms(epochs)
    return _Settled(every_s, epochs, values, xs, list(map(str, xs)), number_texts(values))


def _extend(done: _Settled, points: list, scale: float, shift: _Shift, coarse_before: float) -> _Settled:
    """`done` followed by later points, with a break before them where samples are missing."""
    last = done.epochs[-1:]
    tail = with_gaps(
        [(last[0], 0.0), *points] if last else points, every_s=done.every_s, coarse_before=coarse_before
    )[len(last) :]
    more = _settle(done.every_s, tail, scale, shift)
    return _Settled(
        done.every_s,
        done.epochs + more.epochs,
        done.values + more.values,
        done.xs + more.xs,
        done.x_texts + more.x_texts,
        done.y_texts + more.y_texts,
    )


def _scaled(values: list[float | None], scale: float) -> list[float | None]:
    return values if scale == 1.0 else [None if v is None else v * scale for v in values]


def _raw_line(
    done: _Settled, fresh: list, since_s: float, scale: float, shift: _Shift, coarse_before: float
) -> Line:
    cut = bisect.bisect_left(done.epochs, since_s)
    if cut < len(done.values) and done.values[cut] is None:
        cut += 1  # a break before the first point shown
    shown = _Settled(
        done.every_s,
        done.epochs[cut:],
        done.values[cut:],
        done.xs[cut:],
        done.x_texts[cut:],
        done.y_texts[cut:],
    )
    fresh = [p for p in fresh if p[0] >= since_s]
    if fresh:  # breaks within the fresh points, and between them and the settled ones
        shown = _extend(shown, fresh, scale, shift, coarse_before)
    return Line(y=shown.values, y_texts=shown.y_texts, x=shown.xs, x_texts=shown.x_texts)


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
        # rounded: SQLite's epoch seconds come through julianday(), a few microseconds off
        if first != last:  # a clock change in the range
            return [round((e + self._offset_s(e)) * 1000) for e in epochs]
        return [round((e + first) * 1000) for e in epochs]

    def texts(self, epochs: list[float]) -> list[str]:
        """The same times as local wall-clock text ("2026-12-05 08:00:00")."""
        if not epochs:
            return []
        first, last = self._offset_s(epochs[0]), self._offset_s(epochs[-1])
        if first != last:  # a clock change in the range
            return [datetime.fromtimestamp(e, self.zone).isoformat(" ", "seconds")[:19] for e in epochs]
        return [datetime.fromtimestamp(e + first, UTC).isoformat(" ", "seconds")[:19] for e in epochs]

    def _offset_s(self, epoch: float) -> float:
        offset = datetime.fromtimestamp(epoch, self.zone).utcoffset()
        return offset.total_seconds() if offset else 0.0


def local_texts(epochs: list[float]) -> list[str]:
    """Seconds since the epoch as local wall-clock text for a date axis (plotly.js reads
    dates as wall-clock time and ignores offsets)."""
    return _Shift().texts(epochs)


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


@dataclass(frozen=True)
class _BucketsKept:
    """The settled part of a long range: each line's groups of settled buckets, and the
    buckets after them (the open ones) counted from the samples before `upto`."""

    upto: int
    groups: dict[str, _Groups]
    open: dict[str, Buckets]


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
    names = list(names)
    first = int(since.timestamp() // width_s)
    line = settled_line_s(now)
    settled = line // width_s  # buckets before it are done
    key = _key("buckets", instance, names, width_s, first, settled, coarse_before)
    kept: _BucketsKept | None = cache.get(key)
    read = partial(stored_buckets, instance=instance, names=names, width_s=width_s)
    if kept is None or kept.upto > line:
        stored = read(since=_at(first * width_s), until=_at(line))
        merges = {n: merge_factor(b, width_s=width_s, every_s=every_s(n), coarse_before=coarse_before)
                  for n, b in stored.items()}  # fmt: skip
        groups = {n: _group(b, merges[n], settled, scales.get(n, 1.0)) for n, b in stored.items()}
        kept = _BucketsKept(line, groups, {n: _open(groups[n], b) for n, b in stored.items()})
        cache.set(key, kept)
    elif kept.upto < line:  # the line moved on: count the minutes it passed
        passed = read(since=_at(kept.upto), until=_at(line))
        opened = {n: combined(kept.open.get(n, {}), b) for n, b in passed.items()}
        kept = _BucketsKept(line, kept.groups, kept.open | opened)
        cache.set(key, kept, extended=True)
    fresh = read(since=_at(line))
    lines = {}
    for name in set(kept.groups) | set(kept.open) | set(fresh):
        done = kept.groups.get(name) or _Groups(1, None, settled, [], [])  # new since the cache was filled
        tail = _open(done, combined(kept.open.get(name, {}), fresh.get(name, {})))
        drawn = _bucket_line(done, tail, scales.get(name, 1.0), width_s)
        if drawn.y:
            lines[name] = drawn
    return lines


def _open(done: _Groups, buckets: Buckets) -> Buckets:
    """The buckets after a line's settled groups."""
    return {i: b for i, b in buckets.items() if i // done.merge >= done.end}


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
