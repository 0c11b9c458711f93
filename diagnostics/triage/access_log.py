"""nginx access-log analysis (the guide's second case, 3.5): requests, 429s and 5xx per
client IP per time window, the top talkers, and the spike over time. Fed chunk by chunk by
the triage pass; memory stays bounded (per-window series are kept for at most
MAX_TRACKED_IPS addresses, the rest count as "other")."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

# combined / common format: IP - user [03/Dec/2026:14:00:07 +0800] "POST /v1/... HTTP/1.1" 429 ...
# The stdlib engine here: findall hands back the groups in C, which RE2's binding does not.
LINE = re.compile(
    rb'(?m)^(\S+) \S+ \S+ \[(\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}):\d{2} [^\]]*\] "[^"]*" (\d{3}) '
)
MAX_TRACKED_IPS = 200
MAX_WINDOWS = 20_000


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
    lines: int = 0
    per_ip: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    per_window: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    per_window_ip: dict[tuple[str, str], Counts] = field(default_factory=lambda: defaultdict(Counts))

    def feed(self, buf: bytes) -> None:
        """Count a chunk's access lines: matched and tallied in C, then folded per distinct
        (client, minute, status), of which there are few."""
        for (raw_ip, minute, raw_status), n in Counter(LINE.findall(buf)).items():
            ip = raw_ip.decode("ascii", errors="replace")
            window = _window(minute, self.window_minutes)
            status = int(raw_status)
            self.lines += n
            self.per_ip[ip].add(status, n)
            if len(self.per_window) < MAX_WINDOWS or window in self.per_window:
                self.per_window[window].add(status, n)
                tracked = ip if len(self.per_ip) <= MAX_TRACKED_IPS else "other"
                self.per_window_ip[(window, tracked)].add(status, n)

    @property
    def found(self) -> bool:
        return self.lines > 0

    def top_talkers(self, n: int = 10) -> list[tuple[str, Counts]]:
        return sorted(self.per_ip.items(), key=lambda item: -item[1].requests)[:n]

    def busiest(self, n: int = 20) -> list[tuple[str, str, Counts]]:
        rows = sorted(self.per_window_ip.items(), key=lambda item: -item[1].requests)[:n]
        return [(window, ip, counts) for (window, ip), counts in rows]

    def to_dict(self) -> dict[str, Any]:
        total = sum(c.requests for c in self.per_ip.values())
        talkers = [
            {"ip": ip, **c.to_dict(), "share": round(c.requests / total, 3) if total else 0}
            for ip, c in self.top_talkers()
        ]
        return {
            "lines": self.lines,
            "window_minutes": self.window_minutes,
            "top_talkers": talkers,
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


@lru_cache(maxsize=4096)
def _window(minute: bytes, window_minutes: int) -> str:
    """b'03/Dec/2026:14:07' -> the start of its window, sortable: '2026-12-03 14:06'."""
    stamp = datetime.strptime(minute.decode("ascii"), "%d/%b/%Y:%H:%M")
    stamp = stamp.replace(minute=stamp.minute - stamp.minute % window_minutes)
    return stamp.strftime("%Y-%m-%d %H:%M")


def looks_like_access_log(head: bytes) -> bool:
    """At least half the lines of the head are access-log lines: an access log, not a mixed
    file that happens to hold a few."""
    lines = head.count(b"\n") or 1
    return len(LINE.findall(head)) * 2 >= lines
