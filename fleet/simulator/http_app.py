"""The aiohttp application every simulated instance serves, whatever its engine.

An engine's server (vllm_server, tgi_server, ollama_server, sglang_server) is an `EngineServer`: its
routes, its bodies for a failed request and for an unknown path, and the handlers that
/metrics is counted under. `build_app` adds what all of them share: the /_sim control
routes, the HTTP-level faults (rate_limited, hang, slow_headers, http_500/503), an access
log line per request, and the per-handler request counts behind vLLM's http_requests_total.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from fleet.simulator.faults import FaultKind
from fleet.simulator.sim_routes import INSTANCE_KEY, sim_routes

if TYPE_CHECKING:
    from fleet.simulator.instance import SimInstance

_UNCOUNTED = {"/metrics", "/health", "/ping", "/version", "/load"}  # vLLM's instrumentator skips these


class EngineServer:
    """One engine's HTTP surface. Subclasses set `engine` and implement the hooks."""

    engine = ""
    generate_path = "/"  # where background traffic "arrives", for the access log

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    def failure(self, status: int) -> web.Response:
        """The body a failing request gets (the http_500 / http_503 faults)."""
        return web.Response(status=status)

    def not_found(self) -> web.Response:
        return web.Response(status=404)


def json_response(data: Any, *, status: int = 200, content_type: str = "application/json") -> web.Response:
    # Compact separators, as pydantic and serde write JSON.
    return web.Response(
        text=json.dumps(data, separators=(",", ":")), status=status, content_type=content_type
    )


def instance_of(request: web.Request) -> SimInstance:
    return request.app[INSTANCE_KEY]


def build_app(instance: SimInstance, server: EngineServer) -> web.Application:
    app = web.Application(middlewares=[_observe, _faults], client_max_size=64 * 1024**2)
    app[INSTANCE_KEY] = instance
    app.add_routes(sim_routes())
    app.add_routes(server.routes())
    return app


@web.middleware
async def _observe(request: web.Request, handler: Any) -> web.StreamResponse:
    instance = instance_of(request)
    started = time.monotonic()
    status, size = 500, 0
    try:
        response = await _handle(request, handler, instance)
        status, size = response.status, _size(response)
        return response
    except asyncio.CancelledError:
        status = 499  # the client closed the connection (nginx's code for it)
        raise
    finally:
        if not request.path.startswith("/_sim"):
            _count(instance, request, status, size, time.monotonic() - started)


def _size(response: web.StreamResponse) -> int:
    body = getattr(response, "body", None)  # a plain Response, not yet sent
    if isinstance(body, bytes | bytearray):
        return len(body)
    return response.body_length  # a stream, already written


async def _handle(request: web.Request, handler: Any, instance: SimInstance) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return instance.server.not_found()
    except web.HTTPMethodNotAllowed:
        return web.Response(status=405)


def _count(instance: SimInstance, request: web.Request, status: int, size: int, elapsed: float) -> None:
    route = request.match_info.route.resource
    handler = route.canonical if route is not None else request.path
    if handler not in _UNCOUNTED and status != 404:
        instance.http_requests[(handler, request.method, f"{status // 100}xx")] += 1
    instance.log_access(
        client=request.remote or "-",
        method=request.method,
        path=request.path_qs,
        status=status,
        elapsed=elapsed,
    )


@web.middleware
async def _faults(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.path.startswith("/_sim"):
        return await handler(request)  # control routes always answer
    instance = instance_of(request)
    faults = instance.faults
    if _fails(faults.get(FaultKind.RATE_LIMITED), request.path, instance.rng):
        return _rate_limited(faults.param(FaultKind.RATE_LIMITED, "retry_after_s"))
    if FaultKind.HANG in faults:
        await asyncio.Event().wait()  # until the client gives up or the instance stops
    delay = faults.param(FaultKind.SLOW_HEADERS, "delay_s")
    if delay:
        await asyncio.sleep(delay)
    for kind, status in ((FaultKind.HTTP_500, 500), (FaultKind.HTTP_503, 503)):
        if _fails(faults.get(kind), request.path, instance.rng):
            return instance.server.failure(status)
    return await handler(request)


def _rate_limited(retry_after_s: int) -> web.Response:
    """What a gateway in front of the engine answers when it throttles (vLLM never sends 429;
    nginx sends Retry-After only when configured to, corrections #8)."""
    body = {
        "error": {
            "message": "Rate limit exceeded. Please retry after a short wait.",
            "type": "rate_limit_error",
            "code": "rate_limit_exceeded",
        }
    }
    response = json_response(body, status=429)
    response.headers["Retry-After"] = str(retry_after_s)
    return response


def _fails(fault: Any, path: str, rng: random.Random) -> bool:
    if fault is None:
        return False
    paths = fault.params["paths"]
    if paths and not any(path.startswith(prefix) for prefix in paths):
        return False
    return rng.random() < fault.params["fraction"]
