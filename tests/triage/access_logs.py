"""Generated nginx access logs for the story tests: a quiet baseline of several clients, and
the incidents laid over it (a 429 spike from one IP, upstream 504s, a few 502s)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

START = datetime(2026, 12, 3, 13, 50)
CLIENTS = [f"10.0.3.{n}" for n in (12, 15, 21, 22, 30)]
UPSTREAMS = ["10.0.1.10:8000", "10.0.1.11:8000"]


def line(
    ip: str,
    when: datetime,
    status: int,
    *,
    rt: float = 0.8,
    upstream: str = "10.0.1.10:8000",
    key: str = "",
    path: str = "/v1/chat/completions",
) -> str:
    """One line in nginx's combined format with the timing fields a custom log_format adds."""
    stamp = when.strftime("%d/%b/%Y:%H:%M:%S +0800")
    extra = f' rt={rt:.3f} urt="{rt:.3f}" upstream={upstream}' + (f" key={key}" if key else "")
    return f'{ip} - - [{stamp}] "POST {path} HTTP/1.1" {status} 512 "-" "OpenAI/Python 1.54.0"{extra}'


def json_line(
    ip: str, when: datetime, status: int, *, rt: float = 0.8, upstream: str = "10.0.1.10:8000"
) -> str:
    """The same request as nginx's `log_format ... escape=json` writes it."""
    record = {
        "time_iso8601": when.strftime("%Y-%m-%dT%H:%M:%S+08:00"),
        "remote_addr": ip,
        "request": "POST /v1/chat/completions HTTP/1.1",
        "status": str(status),
        "request_time": f"{rt:.3f}",
        "upstream_response_time": f"{rt:.3f}",
        "upstream_addr": upstream,
    }
    return json.dumps(record)


def baseline(minutes: int = 30, per_minute: int = 20, seed: int = 3) -> list[tuple[datetime, str]]:
    """Steady traffic from a few clients, all answered 200 in about a second."""
    rng = random.Random(seed)
    rows = []
    for m in range(minutes):
        for i in range(per_minute):
            when = START + timedelta(minutes=m, seconds=i * 60 // per_minute)
            rows.append((when, line(rng.choice(CLIENTS), when, 200, rt=rng.uniform(0.3, 2.5))))
    return rows


def render(rows: list[tuple[datetime, str]]) -> str:
    return "\n".join(text for _, text in sorted(rows, key=lambda row: row[0])) + "\n"


def rate_limit_spike(ip: str = "10.0.3.7") -> str:
    """One batch client at 14:00-14:05 sends far above the limit: most of its requests get 429
    (500 of 570 429s: 88 %); a few 502s from one upstream come earlier."""
    rows = baseline()
    for m in range(5):
        for i in range(120):
            when = START + timedelta(minutes=10 + m, seconds=i // 2)
            rows.append((when, line(ip, when, 429 if i % 6 else 200, rt=0.0)))
    for i in range(70):  # the others, caught in the same minutes now and then
        when = START + timedelta(minutes=10 + i % 5, seconds=30 + i // 5)
        rows.append((when, line(CLIENTS[i % len(CLIENTS)], when, 429, rt=0.0)))
    for s in range(4):
        when = START + timedelta(minutes=2, seconds=s)
        rows.append((when, line("10.0.3.15", when, 502, rt=0.001, upstream=UPSTREAMS[1])))
    return render(rows)


def upstream_timeouts(fmt: str = "combined") -> str:
    """From 14:05 one upstream stops answering in time: its requests end in 504 after 60 s."""
    rows = baseline()
    rng = random.Random(5)
    for m in range(15, 25):
        for i in range(12):
            when = START + timedelta(minutes=m, seconds=i * 5)
            ip = rng.choice(CLIENTS)
            rows.append((when, line(ip, when, 504, rt=60.0, upstream=UPSTREAMS[1])))
    rows.append((START + timedelta(minutes=3), line("10.0.3.12", START + timedelta(minutes=3), 429, rt=0.0)))
    text = render(rows)
    if fmt == "json":
        return "\n".join(_as_json(row) for row in text.splitlines()) + "\n"
    return text


def _as_json(text: str) -> str:
    ip, _, rest = text.partition(" - - [")
    stamp, _, rest = rest.partition("] ")
    status = int(rest.split('" ', 1)[1].split(" ", 1)[0])
    rt = float(rest.split(" rt=", 1)[1].split(" ", 1)[0])
    upstream = rest.split(" upstream=", 1)[1].split(" ", 1)[0]
    when = datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S +0800")
    return json_line(ip, when, status, rt=rt, upstream=upstream)


def clean() -> str:
    return render(baseline())
