"""curl -w style phase timings of one request (guide 2.2.1).

Times are cumulative from the start, like curl's time_namelookup, time_connect,
time_appconnect, time_starttransfer and time_total. The connect and TLS steps come from
httpx's `trace` extension; DNS is a timed getaddrinfo on the event loop before the
request (0 for IP literals). httpcore resolves the name again inside its connect step,
normally from the resolver's cache, so connect_s includes that second lookup.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import httpx

from fleet.probes.fetch import FetchResult, fetch_bounded
from fleet.probes.http_client import ProbeClient
from fleet.probes.jsonable import shallow_dict
from fleet.probes.outcomes import Outcome, describe_exception
from fleet.probes.target import ProbeLimits


@dataclass(frozen=True, kw_only=True)
class PhaseResult:
    url: str
    method: str
    outcome: Outcome
    status: int | None = None
    error: str = ""
    dns_s: float | None = None
    connect_s: float | None = None
    tls_s: float | None = None  # None on plain HTTP (curl prints 0 there)
    ttfb_s: float | None = None
    total_s: float | None = None
    body_bytes: int = 0
    reused_connection: bool = False
    http_version: str = ""
    server: str = ""
    retry_after: str = ""

    @property
    def decode_gap_s(self) -> float | None:
        """Total − TTFB: the time spent receiving the body after the headers."""
        if self.total_s is None or self.ttfb_s is None:
            return None
        return self.total_s - self.ttfb_s

    def to_dict(self) -> dict[str, Any]:
        return shallow_dict(self) | {"decode_gap_s": self.decode_gap_s}


async def _resolve(host: str, port: int, timeout_s: float) -> tuple[float, BaseException | None]:
    """Seconds spent resolving host, and the error if it failed."""
    try:
        ipaddress.ip_address(host)
        return 0.0, None
    except ValueError:
        pass
    started = perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except Exception as exc:  # a failed or slow lookup is a DNS failure
        return perf_counter() - started, exc
    return perf_counter() - started, None


def _phases(fetch: FetchResult, dns_s: float) -> dict[str, Any]:
    trace = fetch.trace
    events = trace.events if trace else {}
    tcp = trace.span("connect_tcp") if trace else None
    tls = trace.span("start_tls") if trace else None
    connect_s = dns_s + tcp if tcp is not None else (dns_s if trace and trace.connected else None)
    headers_at = events.get("receive_response_headers.complete")
    return {
        "connect_s": connect_s,
        "tls_s": connect_s + tls if tls is not None and connect_s is not None else None,
        "ttfb_s": dns_s + headers_at if headers_at is not None else None,
        "reused_connection": tcp is None and bool(trace and trace.connected),
    }


def _failed(url: str, method: str, outcome: Outcome, error: str, dns_s: float | None = None) -> PhaseResult:
    return PhaseResult(url=url, method=method, outcome=outcome, error=error, dns_s=dns_s, total_s=dns_s)


async def measure_phases(
    *,
    client: ProbeClient,
    url: str,
    limits: ProbeLimits,
    method: str = "GET",
    json: Any = None,
    headers: dict[str, str] | None = None,
) -> PhaseResult:
    """Time one request's phases; never raises. A status >= 400 is `bad_status`. The
    request opens its own connection, so its connect phase is a real connect (the
    connection is then kept for the probe's next request to the origin)."""
    try:
        parsed = httpx.URL(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        dns_s, dns_error = await _resolve(parsed.host, port, limits.connect_timeout_s)
    except Exception as exc:  # an unusable URL is a probe error, not a crash
        return _failed(url, method, Outcome.ERROR, describe_exception(exc))
    if dns_error is not None:
        return _failed(url, method, Outcome.DNS_FAILURE, describe_exception(dns_error), dns_s)
    fetch = await fetch_bounded(
        client=client,
        url=url,
        limits=limits,
        method=method,
        json=json,
        headers=headers,
        deadline_s=max(0.1, limits.total_deadline_s - dns_s),
        fresh=True,
    )
    return PhaseResult(
        url=url,
        method=method,
        outcome=fetch.outcome,
        status=fetch.status,
        error=fetch.error_text,
        dns_s=dns_s,
        total_s=dns_s + fetch.elapsed_s,
        body_bytes=len(fetch.body),
        http_version=fetch.http_version,
        server=fetch.server,
        retry_after=fetch.retry_after,
        **_phases(fetch, dns_s),
    )
