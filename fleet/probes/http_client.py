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
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import ssl
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import httptools
import httpx

from fleet.probes.guarded_network import open_checked_connection
from fleet.probes.outcomes import BodyTooLarge

USER_AGENT = "llm-ops-console-probe"
REUSE_WAIT_S = 1.0
KEEPALIVE_S = 5.0


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@lru_cache(maxsize=8192)
def split_url(url: str) -> tuple[Origin, str]:
    """The origin and the request target (path and query) of an http(s) URL (a sweep asks
    for the same URLs every cycle)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{parts.scheme}://'.")
    if not parts.hostname:
        raise httpx.UnsupportedProtocol(f"Request URL is missing a host: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Origin(parts.scheme, parts.hostname.lower(), port), target


@dataclass
class Answer:
    """One response as the probes read it: status, the headers they read, the body (at most
    the limit), and whether the connection was one kept from an earlier request."""

    status: int
    headers: dict[str, str]
    body: bytes
    http_version: str = "HTTP/1.1"
    reused: bool = False


@dataclass
class _Exchange:
    """One request on a connection: what has arrived, and the future the caller awaits."""

    done: asyncio.Future[None]
    max_bytes: int
    prefix_bytes: int  # for status >= 400: read this much of the body, then stop
    on_headers: Callable[[], None]
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    received_any: bool = False
    headers_done: bool = False
    complete: bool = False  # the whole message arrived (the connection may be kept)
    keep_alive: bool = False  # the server keeps the connection (read when the message ends)
    framed: bool = True  # Content-Length or chunked: the end is known without a close
    decoder: Any = None
    watchdog: asyncio.TimerHandle | None = None

    def fail(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)

    def finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


def _decoder(encoding: str) -> Any:
    if encoding == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    return None


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: a request at a time, the answer parsed as it arrives."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.exchange: _Exchange | None = None
        self.closed = False
        self.idle_since = 0.0
        self.last_read = 0.0
        self.requests = 0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection cannot be trusted
            self.close()
            return
        self.last_read = self.loop.time()
        exchange.received_any = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if not exchange.done.done():
                exchange.fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        exchange = self.exchange
        if exchange is None or exchange.done.done():
            return
        if exc is not None:
            failure = httpx.ReadError(str(exc) or type(exc).__name__)
            failure.__cause__ = exc
            exchange.fail(failure)
        elif exchange.headers_done and not exchange.framed:
            exchange.complete = False  # read to the close: whole, but the connection is gone
            exchange.finish()
        else:
            exchange.fail(
                httpx.RemoteProtocolError("Server disconnected without sending a complete response.")
            )

    # httptools callbacks (they never raise: a failure is set on the exchange)
    def on_header(self, name: bytes, value: bytes) -> None:
        headers = self.exchange.headers  # type: ignore[union-attr]
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        exchange = self.exchange
        assert exchange is not None
        exchange.status = self.parser.get_status_code()
        exchange.headers_done = True
        exchange.on_headers()
        headers = exchange.headers
        exchange.framed = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "")
        exchange.decoder = _decoder(headers.get("content-encoding", "").strip().lower())
        declared = headers.get("content-length", "")
        if exchange.status < 400 and declared.isdigit() and int(declared) > exchange.max_bytes:
            exchange.fail(
                BodyTooLarge(f"Content-Length {declared} passes the limit of {exchange.max_bytes} bytes")
            )
            self.close()

    def on_body(self, body: bytes) -> None:
        exchange = self.exchange
        if exchange is None or exchange.done.done():
            return
        if exchange.decoder is not None:
            try:
                body = exchange.decoder.decompress(body, exchange.max_bytes + 1 - exchange.size)
            except zlib.error as exc:
                exchange.fail(httpx.DecodingError(f"undecodable body: {exc}"))
                self.close()
                return
        exchange.parts.append(body)
        exchange.size += len(body)
        if exchange.status >= 400:
            if exchange.size >= exchange.prefix_bytes:
                exchange.finish()  # an error body's message is at its start; the rest is left unread
                self.close()
        elif exchange.size > exchange.max_bytes:
            exchange.fail(BodyTooLarge(f"body passed the limit of {exchange.max_bytes} bytes"))
            self.close()

    def on_message_complete(self) -> None:
        exchange = self.exchange
        if exchange is not None:
            # llhttp answers should_keep_alive only inside the message's callbacks
            exchange.complete, exchange.keep_alive = True, self.parser.should_keep_alive()
            exchange.finish()

    # the client's side
    @property
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def keep_alive(self) -> bool:
        exchange = self.exchange
        return bool(exchange and exchange.complete and exchange.keep_alive and self.usable)

    async def exchange_once(
        self,
        request: bytes,
        *,
        max_bytes: int,
        prefix_bytes: int,
        read_timeout_s: float,
        on_headers: Callable[[], None],
    ) -> _Exchange:
        """Send `request` and read its answer; the read timeout applies to every wait for
        bytes, as httpx's does."""
        exchange = _Exchange(
            done=self.loop.create_future(),
            max_bytes=max_bytes,
            prefix_bytes=prefix_bytes,
            on_headers=on_headers,
        )
        self.exchange, self.requests = exchange, self.requests + 1
        self.last_read = self.loop.time()
        exchange.watchdog = self.loop.call_at(
            self.last_read + read_timeout_s, self._watch, exchange, read_timeout_s
        )
        try:
            self.transport.write(request)  # type: ignore[union-attr]
            await exchange.done
        finally:
            exchange.watchdog.cancel()
        return exchange

    def _watch(self, exchange: _Exchange, read_timeout_s: float) -> None:
        if exchange.done.done():
            return
        quiet = self.loop.time() - self.last_read
        if quiet >= read_timeout_s:
            exchange.fail(httpx.ReadTimeout(f"no answer for {read_timeout_s:g} s"))
            self.close()
            return
        exchange.watchdog = self.loop.call_at(
            self.last_read + read_timeout_s, self._watch, exchange, read_timeout_s
        )


def _request_bytes(
    method: str, origin: Origin, target: str, headers: dict[str, str] | None, body: bytes | None
) -> bytes:
    lines = [
        f"{method} {target} HTTP/1.1",
        f"Host: {origin.host_header}",
        "Accept: */*",
        "Accept-Encoding: gzip, deflate",
        f"User-Agent: {USER_AGENT}",
    ]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    for name, value in (headers or {}).items():
        if "\r" in name + value or "\n" in name + value:
            raise httpx.LocalProtocolError(f"header {name!r} has a line break")
        lines.append(f"{name}: {value}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


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
        connect_timeout_s: float | None = None,
        read_timeout_s: float | None = None,
    ) -> Answer:
        """One request; httpx's exceptions (and BodyTooLarge) on failure. A GET on a kept
        connection that the server closed meanwhile is sent once more on a new one."""
        origin, target = split_url(url)
        body = None if json is None else jsonlib.dumps(json, separators=(",", ":"), allow_nan=False).encode()
        request = _request_bytes(method, origin, target, headers, body)
        read_timeout = self.read_timeout_s if read_timeout_s is None else read_timeout_s
        connect_timeout = self.connect_timeout_s if connect_timeout_s is None else connect_timeout_s
        for attempt in (1, 2):
            connection, reused = await self._acquire(
                origin, trace, fresh=fresh, connect_timeout_s=connect_timeout
            )
            trace("send_request_headers.started")
            try:
                exchange = await connection.exchange_once(
                    request,
                    max_bytes=max_bytes,
                    prefix_bytes=prefix_bytes,
                    read_timeout_s=read_timeout,
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
                reused=reused,
            )
            self._release(origin, connection, keep=connection.keep_alive())
            return answer
        raise AssertionError("unreachable")

    async def _acquire(
        self, origin: Origin, trace: Callable[[str], None], *, fresh: bool, connect_timeout_s: float
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
            connection = await self._open(origin, trace, connect_timeout_s)
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
        except TimeoutError:
            return None
        finally:
            if not waiter.done():
                waiter.cancel()

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
