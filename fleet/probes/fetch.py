"""One bounded HTTP request: timeouts by phase, a hard deadline, a byte limit, a trace.

Every probe request goes through `fetch_bounded`, so none can hang past its deadline or
read an unbounded body, and every failure comes back as an `Outcome`. The probes' clients
(`make_instance_client`, `make_probe_client`) are fleet.probes.http_client's ProbeClient;
the streaming probe reads through the httpx client a ProbeClient lends it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import httpx

from fleet.probes.error_bodies import error_message
from fleet.probes.guarded_network import guarded
from fleet.probes.http_client import ProbeClient
from fleet.probes.outcomes import BodyTooLarge, Outcome, describe_exception, outcome_for_exception
from fleet.probes.target import ProbeLimits

ERROR_BODY_BYTES = 64 * 1024


def httpx_timeout(limits: ProbeLimits) -> httpx.Timeout:
    return httpx.Timeout(
        connect=limits.connect_timeout_s,
        read=limits.read_timeout_s,
        write=limits.read_timeout_s,
        pool=limits.total_deadline_s,
    )


_TLS_CONTEXT: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every probe client: building one per client costs a
    load of the CA bundle each time."""
    global _TLS_CONTEXT
    if _TLS_CONTEXT is None:
        _TLS_CONTEXT = ssl.create_default_context()
    return _TLS_CONTEXT


def make_streaming_client(*, limits: ProbeLimits) -> httpx.AsyncClient:
    """The httpx client of the streaming probe (it reads a body as it arrives). Proxies
    from the environment are ignored: probes go straight to the inventory's addresses,
    through the target policy's check (fleet.probes.guarded_network)."""
    pool = httpx.Limits(max_connections=6, max_keepalive_connections=6, keepalive_expiry=5.0)
    return guarded(
        httpx.AsyncClient(timeout=httpx_timeout(limits), limits=pool, trust_env=False, verify=_tls_context())
    )


def make_instance_client(*, limits: ProbeLimits) -> ProbeClient:
    """The client of one instance probe: its requests share the connections it keeps (the
    metrics scrape goes over the connection the health request opened), and closing it
    closes them, so a sweep holds connections only for the probes under way."""
    return ProbeClient(
        connect_timeout_s=limits.connect_timeout_s,
        read_timeout_s=limits.read_timeout_s,
        tls_context=_tls_context(),
        httpx_factory=lambda: make_streaming_client(limits=limits),
    )


def make_probe_client(*, limits: ProbeLimits, concurrency: int = 100) -> ProbeClient:
    """One client shared by many probes: it keeps up to two idle connections per
    concurrent probe (a connection is found by its origin, however many are kept)."""
    return ProbeClient(
        connect_timeout_s=limits.connect_timeout_s,
        read_timeout_s=limits.read_timeout_s,
        tls_context=_tls_context(),
        max_idle=max(6, 2 * concurrency),
        httpx_factory=lambda: make_streaming_client(limits=limits),
    )


@dataclass
class TraceLog:
    """The client's trace events by the short names httpcore's trace uses
    ("connect_tcp.complete"), in seconds from the start of the request; the first occurrence
    of each name is kept."""

    started: float
    events: dict[str, float] = field(default_factory=dict)

    def mark(self, short: str) -> None:
        """The ProbeClient's trace: it names the steps by their short names."""
        self.events.setdefault(short, perf_counter() - self.started)

    def span(self, step: str) -> float | None:
        start, end = self.events.get(f"{step}.started"), self.events.get(f"{step}.complete")
        return None if start is None or end is None else end - start

    @property
    def connected(self) -> bool:
        return "connect_tcp.complete" in self.events or "send_request_headers.started" in self.events


@dataclass(frozen=True, kw_only=True)
class FetchResult:
    url: str
    method: str
    outcome: Outcome
    status: int | None = None
    error: str = ""
    elapsed_s: float = 0.0
    body: bytes = field(default=b"", repr=False)
    content_type: str = ""
    server: str = ""
    retry_after: str = ""
    http_version: str = ""
    trace: TraceLog | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK

    @property
    def error_text(self) -> str:
        """The failure, or for a bad status the status and the body's error message."""
        if self.outcome == Outcome.BAD_STATUS:
            message = error_message(self.body)
            return f"HTTP {self.status}: {message}" if message else f"HTTP {self.status}"
        return self.error


async def iter_bounded(response: httpx.Response, max_bytes: int) -> AsyncIterator[bytes]:
    """The decoded body in chunks; BodyTooLarge as soon as it passes max_bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(f"Content-Length {declared} passes the limit of {max_bytes} bytes")
    seen = 0
    async for chunk in response.aiter_bytes():
        seen += len(chunk)
        if seen > max_bytes:
            raise BodyTooLarge(f"body passed the limit of {max_bytes} bytes")
        yield chunk


async def read_prefix(response: httpx.Response, limit: int = ERROR_BODY_BYTES) -> bytes:
    """At most the first `limit` bytes; the rest is left unread (for error bodies, where
    the message matters and a huge page is no reason to call the answer too large)."""
    parts, size = [], 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


@dataclass
class _Seen:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    http_version: str = ""


def deadline_message(exc: BaseException, deadline_s: float) -> str:
    """'' unless exc is our own deadline firing (httpx's timeouts are not TimeoutError)."""
    if isinstance(exc, TimeoutError) and not isinstance(exc, httpx.TimeoutException):
        return f"the probe's {deadline_s:g} s deadline passed"
    return ""


def _failure_outcome(exc: BaseException, trace: TraceLog) -> Outcome:
    outcome = outcome_for_exception(exc)
    # Our own deadline fired: before a connection it was the connect that hung.
    if isinstance(exc, TimeoutError) and not trace.connected:
        return Outcome.CONNECT_TIMEOUT
    return outcome


async def fetch_bounded(
    *,
    client: ProbeClient,
    url: str,
    limits: ProbeLimits,
    method: str = "GET",
    json: Any = None,
    headers: dict[str, str] | None = None,
    max_bytes: int | None = None,
    deadline_s: float | None = None,
    fresh: bool = False,
) -> FetchResult:
    """Send one request and read at most max_bytes of its body, within the deadline.
    Status >= 400 is `bad_status` (the body is kept, for its error message). With `fresh`
    the request opens its own connection (the client otherwise reuses one it keeps for the
    origin)."""
    deadline = deadline_s if deadline_s is not None else limits.total_deadline_s
    started = perf_counter()
    trace = TraceLog(started=started)
    seen = _Seen()
    try:
        async with asyncio.timeout(deadline):
            answer = await client.request(
                method, url, json=json, headers=headers, max_bytes=max_bytes or limits.max_body_bytes,
                prefix_bytes=ERROR_BODY_BYTES, trace=trace.mark, fresh=fresh,
            )  # fmt: skip
    except Exception as exc:  # every failure is a classified result
        error = deadline_message(exc, deadline) or describe_exception(exc)
        return _result(url, method, seen, trace, started, outcome=_failure_outcome(exc, trace), error=error)
    seen.status, seen.headers, seen.http_version = answer.status, answer.headers, answer.http_version
    outcome = Outcome.BAD_STATUS if answer.status >= 400 else Outcome.OK
    return _result(url, method, seen, trace, started, outcome=outcome, body=answer.body)


def _result(
    url: str,
    method: str,
    seen: _Seen,
    trace: TraceLog,
    started: float,
    *,
    outcome: Outcome,
    error: str = "",
    body: bytes = b"",
) -> FetchResult:
    return FetchResult(
        url=url,
        method=method,
        outcome=outcome,
        status=seen.status,
        error=error,
        elapsed_s=perf_counter() - started,
        body=body,
        content_type=seen.headers.get("content-type", ""),
        server=seen.headers.get("server", ""),
        retry_after=seen.headers.get("retry-after", ""),
        http_version=seen.http_version,
        trace=trace,
    )
