"""One HTTP/1.1 connection of the probes' client (fleet.probes.http_client): the request
written as bytes, the answer read by httptools' C parser through asyncio's transport
callbacks, gzip and deflate bodies decoded, the body's limit and the read timeout kept.

A connection carries one exchange at a time. Its answer is read to the end (or, for an
error status, to a prefix) before the connection can be kept for the next request; what
goes wrong is raised as httpx's exception types, so fleet.probes.outcomes classifies it as
it classifies httpx's.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import httptools
import httpx

from fleet.probes.outcomes import BodyTooLarge

USER_AGENT = "llm-ops-console-probe"


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
    the limit)."""

    status: int
    headers: dict[str, str]
    body: bytes
    http_version: str = "HTTP/1.1"


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
        self.exchange = exchange
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


def request_bytes(
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
