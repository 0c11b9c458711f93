"""A small HTTP/1.1 client for the probes' requests: asyncio transports and httptools' C parser.

httpx (with httpcore under it) cost the probe sweep about 1 ms of CPU per request on two
cores, more than the rest of the probe together (docs/probe-performance.md has the
measurements): anyio wrappers, a trace callback per step, a pool that polls every idle
socket before each request. The probes need little of it: GET and a small JSON POST,
bounded bodies, curl-style phase times, the target policy checked on the address actually
connected to. This client does that much:

- Connecting resolves the name itself, checks every address with the target policy
  (fleet.probes.guarded_network) and connects to a checked address; TLS verifies the name
  in the URL. Nothing follows redirects.
- `connect_timeout_s` bounds the TCP connect and the TLS handshake each; `read_timeout_s`
  the wait for any byte of the answer (like httpx's read timeout); the caller's deadline
  bounds the whole (fleet.probes.fetch).
- A connection is kept per origin once its answer was read to the end and the server
  keeps it alive, for the probe's next request there (a sweep's metrics scrape reuses the
  connection its health request opened and timed). A request may ask for a fresh
  connection (a timed phase wants a real connect). A request that finds the origin's
  connections busy waits up to REUSE_WAIT_S for one before it opens its own.
- Failures are raised as httpx's exception types, so fleet.probes.outcomes classifies
  them as it classifies httpx's: refused, reset, DNS, TLS, timeouts by phase, garbage.

This module is the pool and the request; one connection's reading and writing is
fleet.probes.http_connection.
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx

from fleet.probes.guarded_network import open_checked_connection
from fleet.probes.http_connection import Answer, Connection, Origin, request_bytes, split_url

REUSE_WAIT_S = 1.0
KEEPALIVE_S = 5.0


class ProbeClient:
    """The probes' client: a few kept connections per origin, closed with the client.

    `trace(name)` is called at the steps httpcore's trace extension names
    (connect_tcp.started/complete, start_tls.*, send_request_headers.started,
    receive_response_headers.complete), so the phase timings read the same events.
    The streaming probe, not on a sweep's hot path, uses `streaming_client()`: a guarded
    httpx client made on first use."""

    def __init__(
        self,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        tls_context: ssl.SSLContext | None = None,
        max_idle: int = 6,
        httpx_factory: Callable[[], httpx.AsyncClient] | None = None,
    ) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._tls_context = tls_context
        self._max_idle = max_idle
        self._idle: dict[Origin, deque[Connection]] = {}
        self._busy: dict[Origin, int] = {}
        self._waiters: dict[Origin, deque[asyncio.Future[Connection | None]]] = {}
        self._idle_count = 0
        self._httpx_factory = httpx_factory
        self._httpx: httpx.AsyncClient | None = None
        self.connects = 0  # connections opened (the benchmark reads it)

    async def __aenter__(self) -> ProbeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
        self._idle_count = 0
        if self._httpx is not None:
            await self._httpx.aclose()
            self._httpx = None

    def streaming_client(self) -> httpx.AsyncClient:
        if self._httpx is None:
            if self._httpx_factory is None:
                raise RuntimeError("this probe client has no streaming client")
            self._httpx = self._httpx_factory()
        return self._httpx

    def tls_context(self) -> ssl.SSLContext:
        if self._tls_context is None:
            self._tls_context = ssl.create_default_context()
        return self._tls_context

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
        max_bytes: int,
        prefix_bytes: int,
        trace: Callable[[str], None],
        fresh: bool = False,
    ) -> Answer:
        """One request; httpx's exceptions (and BodyTooLarge) on failure. A GET on a kept
        connection that the server closed meanwhile is sent once more on a new one."""
        origin, target = split_url(url)
        body = None if json is None else jsonlib.dumps(json, separators=(",", ":"), allow_nan=False).encode()
        request = request_bytes(method, origin, target, headers, body)
        for attempt in (1, 2):
            connection, reused = await self._acquire(origin, trace, fresh=fresh)
            trace("send_request_headers.started")
            try:
                exchange = await connection.exchange_once(
                    request,
                    max_bytes=max_bytes,
                    prefix_bytes=prefix_bytes,
                    read_timeout_s=self.read_timeout_s,
                    on_headers=lambda: trace("receive_response_headers.complete"),
                )
            except (httpx.ReadError, httpx.RemoteProtocolError):
                stale = reused and not connection.exchange.received_any  # type: ignore[union-attr]
                self._release(origin, connection, keep=False)
                if attempt == 1 and stale and method == "GET":
                    continue
                raise
            except BaseException:
                self._release(origin, connection, keep=False)
                raise
            body = b"".join(exchange.parts)
            answer = Answer(
                status=exchange.status,
                headers=exchange.headers,
                body=body[:prefix_bytes] if exchange.status >= 400 else body,
                http_version=f"HTTP/{connection.parser.get_http_version()}",
            )
            self._release(origin, connection, keep=connection.keep_alive())
            return answer
        raise AssertionError("unreachable")

    async def _acquire(
        self, origin: Origin, trace: Callable[[str], None], *, fresh: bool
    ) -> tuple[Connection, bool]:
        if not fresh:
            kept = self._pop_idle(origin)
            if kept is None and self._busy.get(origin):
                kept = await self._wait_for_one(origin)
            if kept is not None:
                self._busy[origin] = self._busy.get(origin, 0) + 1
                return kept, True
        self._busy[origin] = self._busy.get(origin, 0) + 1
        try:
            connection = await self._open(origin, trace, self.connect_timeout_s)
        except BaseException:
            self._release(origin, None, keep=False)
            raise
        return connection, False

    def _pop_idle(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()
            self._idle_count -= 1
            if connection.usable and now - connection.idle_since < KEEPALIVE_S:
                return connection
            connection.close()
        return None

    async def _wait_for_one(self, origin: Origin) -> Connection | None:
        """A connection another request of this origin releases within REUSE_WAIT_S."""
        waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(origin, deque()).append(waiter)
        try:
            async with asyncio.timeout(REUSE_WAIT_S):
                return await waiter
        except BaseException as exc:
            if not waiter.done():
                waiter.cancel()
            elif not waiter.cancelled() and waiter.result() is not None:
                waiter.result().close()  # handed over just as the wait ended: never used
            if isinstance(exc, TimeoutError):
                return None
            raise

    def _release(self, origin: Origin, connection: Connection | None, *, keep: bool) -> None:
        self._busy[origin] = max(0, self._busy.get(origin, 0) - 1)
        if connection is not None:
            connection.exchange = None
        if connection is not None and not keep:
            connection.close()
        waiters = self._waiters.get(origin)
        while waiters:
            waiter = waiters.popleft()
            if waiter.done():
                continue
            waiter.set_result(connection if keep else None)  # None: go and open your own
            return
        if connection is None or not keep:
            return
        connection.idle_since = connection.loop.time()
        self._idle.setdefault(origin, deque()).append(connection)
        self._idle_count += 1
        if self._idle_count > self._max_idle:
            self._close_oldest_idle()

    def _close_oldest_idle(self) -> None:
        for origin, idle in self._idle.items():
            if idle:
                idle.popleft().close()
                self._idle_count -= 1
                if not idle:
                    del self._idle[origin]
                return

    async def _open(
        self, origin: Origin, trace: Callable[[str], None], connect_timeout_s: float
    ) -> Connection:
        loop = asyncio.get_running_loop()
        trace("connect_tcp.started")
        transport, connection = await open_checked_connection(
            lambda: Connection(loop), origin.host, origin.port, timeout_s=connect_timeout_s
        )
        self.connects += 1
        trace("connect_tcp.complete")
        if origin.scheme == "https":
            trace("start_tls.started")
            try:
                async with asyncio.timeout(connect_timeout_s):
                    secure = await loop.start_tls(
                        transport, connection, self.tls_context(), server_hostname=origin.host
                    )
            except TimeoutError:
                transport.close()
                raise httpx.ConnectTimeout(f"the TLS handshake took over {connect_timeout_s:g} s") from None
            except (OSError, ssl.SSLError) as exc:
                transport.close()
                raise httpx.ConnectError(f"TLS handshake failed: {exc}") from exc
            connection.transport = secure  # type: ignore[assignment]
            trace("start_tls.complete")
        return connection
