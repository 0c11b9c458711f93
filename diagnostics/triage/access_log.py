"""nginx access-log analysis (the guide's second case, 3.5): requests, status codes, 429s and
5xx per client IP, API key, upstream and time window, the top talkers, and the slow requests.
Fed chunk by chunk by the triage pass; memory stays bounded (per-window series are kept for
at most MAX_TRACKED addresses or keys, the rest count as "other").

Two formats are read, told apart from the head of the log:

- combined (or common): ``IP - user [time] "request" status ...``, with optional
  ``key=value`` fields after it, as custom log formats add them: ``rt=`` or
  ``request_time=`` ($request_time), ``urt=`` or ``upstream_response_time=``,
  ``upstream=`` or ``upstream_addr=``, ``key=`` or ``api_key=``;
- JSON lines (``log_format ... escape=json``): ``remote_addr``, ``status``,
  ``time_local`` or ``time_iso8601``, and optionally ``request_time``,
  ``upstream_response_time``, ``upstream_addr`` and ``api_key``.

API keys are masked as they are read: the analysis never holds a whole key (the matched
lines of the rules quote the log as it is).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

# combined / common format: IP - user [03/Dec/2026:14:00:07 +0800] "POST /v1/... HTTP/1.1" 429 ...
# The stdlib engine here: findall hands back the groups in C, which RE2's binding does not.
# The optional fields are lookaheads, each scanning the rest of the line (their order is free);
# a pattern holds only those the head of the log shows, so a plain combined log reads as fast
# as before. Times are kept in whole seconds, so that lines fold into few distinct tuples, and
# only the first time field of a line is read: request_time where it comes first, as usual.
PREFIX = {
    "combined": rb"(?m)^(\S+) \S+ \S+ "
    rb'\[(\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}):\d{2} [^\]]*\] "[^"]*" (\d{3}) ',
    "json": rb"(?m)^\{"
    rb'(?=[^\n]*?"remote_addr"\s*:\s*"([^"]*)")'
    rb'(?=[^\n]*?"time_(?:local|iso8601)"\s*:\s*"(\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}))'
    rb'(?=[^\n]*?"status"\s*:\s*"?(\d{3}))',
}
FIELDS = {  # format -> (the key, the value's group) of seconds, upstream, API key
    "combined": (
        (rb"[ \t](?:u?rt|request_time|upstream_response_time)=", rb'"?(\d+)'),
        (rb"[ \t](?:upstream|upstream_addr)=", rb'"?([^\s",]+)'),
        (rb"[ \t](?:key|api_key)=", rb'"?(?:Bearer )?([^\s"]+)'),
    ),
    "json": (
        (rb'"(?:request_time|upstream_response_time)"\s*:\s*', rb'"?(\d+)'),
        (rb'"upstream_addr"\s*:\s*', rb'"([^\s",]+)'),
        (rb'"(?:api_key|http_x_api_key)"\s*:\s*', rb'"(?:Bearer )?([^\s"]+)'),
    ),
}


@lru_cache(maxsize=32)
def pattern(fmt: str, fields: tuple[bool, ...] = (True, True, True)) -> re.Pattern[bytes]:
    """The line pattern of a format, with six groups: client, minute, status, seconds,
    upstream, key; a field left out is an empty group."""
    parts = [PREFIX[fmt]]
    for (key, value), wanted in zip(FIELDS[fmt], fields, strict=True):
        parts.append(rb"(?=(?:[^\n]*?" + key + value + rb")?)" if wanted else rb"()")
    return re.compile(b"".join(parts))


def fields_in(head: bytes, fmt: str) -> tuple[bool, ...]:
    """Which optional fields the head of the log holds."""
    return tuple(re.search(key, head) is not None for key, _ in FIELDS[fmt])


COMBINED = pattern("combined")
JSON = pattern("json")
FORMATS = {"combined": COMBINED, "json": JSON}
LINE = COMBINED  # the combined format's pattern, as other modules knew it
MAX_TRACKED_IPS = 200
MAX_TRACKED = MAX_TRACKED_IPS
MAX_WINDOWS = 20_000
SLOW_SECONDS = 30  # half of nginx's default proxy_read_timeout: slow, but not yet a 504
OTHER = "other"


@dataclass
class Counts:
    requests: int = 0
    limited: int = 0  # 429
    errors: int = 0  # 5xx

    def add(self, status: int, n: int = 1) -> None:
        self.requests += n
        self.limited += n if status == 429 else 0
        self.errors += n if status >= 500 else 0

    def to_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "429": self.limited, "5xx": self.errors}


@dataclass
class AccessStats:
    window_minutes: int = 1
    format: str = "combined"
    fields: tuple[bool, ...] = (True, True, True)  # the optional fields to read (fields_in)
    slow_seconds: int = SLOW_SECONDS
    lines: int = 0
    per_ip: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    per_window: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    per_window_ip: dict[tuple[str, str], Counts] = field(default_factory=lambda: defaultdict(Counts))
    statuses: Counter[int] = field(default_factory=Counter)
    per_window_status: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    per_key: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    per_window_key: dict[tuple[str, str], Counts] = field(default_factory=lambda: defaultdict(Counts))
    per_upstream: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    timed: int = 0  # requests whose log line holds a request or upstream time
    seconds: Counter[int] = field(default_factory=Counter)  # answered requests (not 429, not 5xx)
    slow_per_window: Counter[str] = field(default_factory=Counter)
    slow_per_upstream: Counter[str] = field(default_factory=Counter)

    def feed(self, buf: bytes) -> None:
        """Count a chunk's access lines: matched and tallied in C, then folded per distinct
        (client, minute, status, seconds, upstream, key), of which there are few."""
        for groups, n in Counter(pattern(self.format, self.fields).findall(buf)).items():
            self._add(*groups, n=n)

    def _add(self, raw_ip: bytes, minute: bytes, raw_status: bytes, *extra: bytes, n: int) -> None:
        raw_seconds, raw_upstream, raw_key = extra
        window = _window(minute, self.window_minutes)
        if window is None:  # a time no clock shows (31/Feb, 25:61): not an access line
            return
        ip = raw_ip.decode("ascii", errors="replace")
        status = int(raw_status)
        self.lines += n
        self.statuses[status] += n
        self.per_ip[ip].add(status, n)
        key = mask_key(raw_key.decode("ascii", errors="replace")) if raw_key else ""
        if key:
            self.per_key[_tracked(key, self.per_key)].add(status, n)
        upstream = raw_upstream.decode("ascii", errors="replace") if raw_upstream not in (b"", b"-") else ""
        if upstream:
            self.per_upstream[_tracked(upstream, self.per_upstream)][status] += n
        tracked_window = len(self.per_window) < MAX_WINDOWS or window in self.per_window
        if tracked_window:
            self.per_window[window].add(status, n)
            self.per_window_status[window][status] += n
            tracked = ip if len(self.per_ip) <= MAX_TRACKED_IPS else OTHER
            self.per_window_ip[(window, tracked)].add(status, n)
            if key:
                self.per_window_key[(window, _tracked(key, self.per_key))].add(status, n)
        self._time(raw_seconds, status, window if tracked_window else "", upstream, n)

    def _time(self, raw: bytes, status: int, window: str, upstream: str, n: int) -> None:
        """Slow requests are the answered ones that took long: a 429 or a 5xx is counted as such."""
        if not raw:
            return
        self.timed += n
        if status == 429 or status >= 500:
            return
        seconds = int(raw) if len(raw) <= 9 else 10**9  # past any timeout; and no int() of a huge number
        self.seconds[seconds] += n
        if seconds >= self.slow_seconds:
            if window:
                self.slow_per_window[window] += n
            if upstream:
                self.slow_per_upstream[upstream] += n

    @property
    def found(self) -> bool:
        return self.lines > 0

    def top_talkers(self, n: int = 10) -> list[tuple[str, Counts]]:
        return sorted(self.per_ip.items(), key=lambda item: -item[1].requests)[:n]

    def top_keys(self, n: int = 10) -> list[tuple[str, Counts]]:
        return sorted(self.per_key.items(), key=lambda item: -item[1].requests)[:n]

    def busiest(self, n: int = 20) -> list[tuple[str, str, Counts]]:
        rows = sorted(self.per_window_ip.items(), key=lambda item: -item[1].requests)[:n]
        return [(window, ip, counts) for (window, ip), counts in rows]

    def to_dict(self) -> dict[str, Any]:
        total = sum(c.requests for c in self.per_ip.values())
        talkers = [
            {"ip": ip, **c.to_dict(), "share": round(c.requests / total, 3) if total else 0}
            for ip, c in self.top_talkers()
        ]
        keys = [
            {"key": key, **c.to_dict(), "share": round(c.requests / total, 3) if total else 0}
            for key, c in self.top_keys()
        ]
        return {
            "lines": self.lines,
            "format": self.format,
            "window_minutes": self.window_minutes,
            "top_talkers": talkers,
            "top_keys": keys,
            "busiest": [{"window": w, "ip": ip, **c.to_dict()} for w, ip, c in self.busiest()],
            "per_window": {w: c.to_dict() for w, c in sorted(self.per_window.items())},
            "per_window_top": self._series(talkers[:5]),
        }

    def _series(self, talkers: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
        """Requests per window of the top talkers, for the chart."""
        series: dict[str, dict[str, int]] = {t["ip"]: {} for t in talkers}
        for (window, ip), counts in self.per_window_ip.items():
            if ip in series:
                series[ip][window] = counts.requests
        return {ip: dict(sorted(points.items())) for ip, points in series.items()}


def _tracked(name: str, seen: dict[str, Any]) -> str:
    return name if name in seen or len(seen) < MAX_TRACKED else OTHER


def mask_key(key: str) -> str:
    """An API key as the console may show it: its start and its last four characters."""
    if key in ("", "-"):
        return ""
    return key if len(key) <= 8 else f"{key[:6]}…{key[-4:]}"


@lru_cache(maxsize=4096)
def _window(minute: bytes, window_minutes: int) -> str | None:
    """b'03/Dec/2026:14:07' (or b'2026-12-03T14:07') -> the start of its window, sortable:
    '2026-12-03 14:06'; None for a time that is none (b'99/Zzz/9999:99:99')."""
    text = minute.decode("ascii", errors="replace")
    try:
        stamp = datetime.strptime(text, "%Y-%m-%dT%H:%M" if "T" in text else "%d/%b/%Y:%H:%M")
    except ValueError:
        return None
    stamp = stamp.replace(minute=stamp.minute - stamp.minute % window_minutes)
    return stamp.strftime("%Y-%m-%d %H:%M")


def access_format(head: bytes) -> str | None:
    """The access-log format of which at least half the lines of the head are: an access log,
    not a mixed file that happens to hold a few."""
    lines = head.count(b"\n") or 1
    for name, pattern in FORMATS.items():
        if len(pattern.findall(head)) * 2 >= lines:
            return name
    return None


def looks_like_access_log(head: bytes) -> bool:
    return access_format(head) is not None
