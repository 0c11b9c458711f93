"""vLLM's sleep-mode routes: POST /sleep?level=N, POST /wake_up, GET /is_sleeping.

vLLM registers them only with VLLM_SERVER_DEV_MODE=1 (the spec's dev_mode); without it
they are FastAPI's 404 {"detail":"Not Found"}. /sleep and /wake_up answer 200 with an
empty body; /is_sleeping answers {"is_sleeping": true|false}, true also while the
engine_asleep fault holds the engine asleep. Asleep, /health stays 200 (it only checks for
a dead engine) and generation requests wait unanswered until the engine wakes
(docs/vllm-metrics.md §5).
"""

from __future__ import annotations

from aiohttp import web

from fleet.simulator.http_app import instance_of, json_response
from fleet.simulator.openai_errors import error_body


def sleep_routes() -> list[web.RouteDef]:
    return [
        web.post("/sleep", _sleep),
        web.post("/wake_up", _wake_up),
        web.get("/is_sleeping", _is_sleeping),
    ]


async def _sleep(request: web.Request) -> web.StreamResponse:
    instance = instance_of(request)
    if not instance.spec.dev_mode:
        return instance.server.not_found()
    level = request.query.get("level", "1")
    if level not in ("1", "2"):
        body = error_body(
            version=instance.spec.version,
            message=f"level must be 1 or 2, got {level!r}",
            err_type="BadRequestError",
            status=400,
            param="level",
        )
        return json_response(body, status=400)
    instance.engine.sleep(int(level))
    return web.Response(status=200)


async def _wake_up(request: web.Request) -> web.StreamResponse:
    instance = instance_of(request)
    if not instance.spec.dev_mode:
        return instance.server.not_found()
    instance.engine.wake_up()
    return web.Response(status=200)


async def _is_sleeping(request: web.Request) -> web.StreamResponse:
    instance = instance_of(request)
    if not instance.spec.dev_mode:
        return instance.server.not_found()
    return json_response({"is_sleeping": bool(instance.engine.sleep_level)})
