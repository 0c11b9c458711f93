"""Small asyncio HTTP servers on 127.0.0.1 for the probe tests: well-behaved engine
routes and the faults a fleet produces (hangs, resets, garbage, huge bodies, streams)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Responder = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> Request:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {
        k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
    }
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return Request(method=method, path=path, headers=headers, body=body)


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes | str | dict | list = b"",
    *,
    content_type: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    if isinstance(body, dict | list):
        body, content_type = json.dumps(body).encode(), content_type or "application/json"
    data = body.encode() if isinstance(body, str) else body
    extra = {"Content-Length": str(len(data)), **({"Content-Type": content_type} if content_type else {})}
    writer.write(_head(status, {**extra, **(headers or {})}) + data)
    await writer.drain()


async def respond_chunked(
    writer: asyncio.StreamWriter,
    parts: Iterable[tuple[float, bytes]],
    *,
    status: int = 200,
    content_type: str = "text/event-stream",
    end: bool = True,
) -> None:
    """Send each part after its delay as one HTTP chunk; end=False leaves the body open."""
    writer.write(_head(status, {"Content-Type": content_type, "Transfer-Encoding": "chunked"}))
    await writer.drain()
    for delay, data in parts:
        await asyncio.sleep(delay)
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()
    if end:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def sse(*events: tuple[float, Any]) -> list[tuple[float, bytes]]:
    """SSE parts: each a delay and a JSON object (or a literal string like "[DONE]")."""
    return [
        (delay, f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode()) for delay, e in events
    ]


def app(routes: dict[str, Responder]) -> Handler:
    """A handler dispatching "METHOD /path" to a responder; 404 for anything else."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        responder = routes.get(f"{request.method} {request.path.split('?')[0]}")
        if responder is None:
            await respond(writer, 404, {"detail": "Not Found"})
        else:
            await responder(request, writer)

    return handle


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    """Serve on a free port; yields the base URL; cancels hanging handlers at the end."""
    tasks: set[asyncio.Task] = set()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            tasks.discard(task)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await server.wait_closed()


def closed_port_url() -> str:
    """A URL on a port nothing listens on: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accept, read the request, never answer."""
    await read_request(reader)
    await asyncio.sleep(3600)


async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the request, then reset the connection (RST, not FIN)."""
    await read_request(reader)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def not_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer with bytes that are not HTTP at all."""
    await read_request(reader)
    writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02garbage\r\n\r\n")
    await writer.drain()


async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Headers at once, then one byte of body every 0.2 s forever: no read timeout ever fires."""
    await read_request(reader)
    await respond_chunked(writer, ((0.2, b".") for _ in range(100000)), content_type="text/plain", end=False)


def huge(size: int, *, declared: bool) -> Handler:
    """A body of `size` bytes, with a Content-Length or chunked without one."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if declared:
            writer.write(_head(200, {"Content-Length": str(size), "Content-Type": "text/plain"}))
            for _ in range(size // 65536):
                writer.write(b"x" * 65536)
                await writer.drain()
        else:
            await respond_chunked(
                writer, ((0, b"# x\n" * 16384) for _ in range(size // 65536)), content_type="text/plain"
            )

    return handle
