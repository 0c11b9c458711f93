"""Streaming response bodies as the engines write them: SSE and NDJSON.

vLLM (Starlette) writes `data: {json}\n\n`; TGI (axum) writes `data:{json}\n\n`, no space.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web


async def start_sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    return response


def sse_event(data: Any, *, space: bool = True) -> bytes:
    prefix = "data: " if space else "data:"
    return f"{prefix}{json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def start_ndjson(request: web.Request) -> web.StreamResponse:
    """Ollama's streaming responses: one JSON object per line."""
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/x-ndjson"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    return response


def ndjson_line(data: Any) -> bytes:
    return (json.dumps(data, separators=(",", ":")) + "\n").encode()
