"""Text Generation Inference's router: /health, /info, /generate, /generate_stream, /metrics.

Errors are {"error": ..., "error_type": ...} (vLLM reference §5.1): 422 "validation" when
inputs + max_new_tokens exceed max_total_tokens, 429 "overloaded" beyond
--max-concurrent-requests, 424 "generation" when the shard fails, and /health answers
503 {"error": "unhealthy", "error_type": "healthcheck"} while the engine is dead.
Streams are SSE written the axum way (`data:{...}`), the last event carrying the text.
"""

from __future__ import annotations

import random
from typing import Any

from aiohttp import web

from fleet.simulator import fake_text
from fleet.simulator.generation import EngineFailed, Generation
from fleet.simulator.http_app import EngineServer, instance_of, json_response
from fleet.simulator.stream_bodies import sse_event, start_sse
from fleet.simulator.tgi_metrics import CONTENT_TYPE, render_tgi_metrics

DEFAULT_MAX_NEW_TOKENS = 100


class TgiServer(EngineServer):
    engine = "tgi"
    generate_path = "/generate"

    def __init__(self) -> None:
        self.in_flight = 0

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/health", _health),
            web.get("/info", _info),
            web.get("/metrics", _metrics),
            web.post("/generate", _generate),
            web.post("/generate_stream", _generate_stream),
            web.post("/", _compat),
        ]

    def failure(self, status: int) -> web.Response:
        return _error("Request failed during generation: Server error: simulated", "generation", status)


def _error(message: str, error_type: str, status: int) -> web.Response:
    return json_response({"error": message, "error_type": error_type}, status=status)


async def _health(request: web.Request) -> web.Response:
    if instance_of(request).engine_dead:
        return _error("unhealthy", "healthcheck", 503)
    return web.Response(status=200)


async def _info(request: web.Request) -> web.Response:
    spec = instance_of(request).spec
    return json_response(
        {
            "model_id": spec.served_model_name,
            "model_sha": None,
            "model_pipeline_tag": "text-generation",
            "max_concurrent_requests": spec.max_concurrent_requests,
            "max_best_of": 2,
            "max_stop_sequences": 4,
            "max_input_tokens": spec.max_model_len - 1,
            "max_total_tokens": spec.max_model_len,
            "validation_workers": 2,
            "max_client_batch_size": 4,
            "router": "text-generation-router",
            "version": spec.version,
            "sha": None,
            "docker_label": None,
        }
    )


async def _metrics(request: web.Request) -> web.Response:
    instance = instance_of(request)
    body = instance.metrics_body(lambda: render_tgi_metrics(engine=instance.engine))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def _generate(request: web.Request) -> web.StreamResponse:
    return await _serve(request, stream=False, as_list=False)


async def _generate_stream(request: web.Request) -> web.StreamResponse:
    return await _serve(request, stream=True, as_list=False)


async def _compat(request: web.Request) -> web.StreamResponse:
    try:
        body = await request.json()
    except ValueError:
        body = {}
    # The Inference API's route: a list of results when not streaming.
    return await _serve(request, stream=bool(isinstance(body, dict) and body.get("stream")), as_list=True)


class _Rejected(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


async def _serve(request: web.Request, *, stream: bool, as_list: bool) -> web.StreamResponse:
    instance = instance_of(request)
    server: TgiServer = instance.server
    try:
        inputs, max_new, details = _validated(await _body(request), instance.spec)
    except _Rejected as exc:
        return exc.response
    if instance.engine_dead:
        return _error("Request failed during generation: Server error: transport error", "generation", 424)
    if server.in_flight >= instance.spec.max_concurrent_requests:
        return _error("Model is overloaded", "overloaded", 429)
    server.in_flight += 1
    natural = fake_text.natural_length(rng=instance.rng)
    gen = instance.start_generation(
        prompt_tokens=inputs, max_tokens=max_new, target_tokens=natural, client=request.remote or ""
    )
    try:
        if stream:
            return await _stream(request, gen, details)
        return await _respond(gen, details, as_list)
    finally:
        server.in_flight -= 1
        gen.close()


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise _Rejected(_error("Failed to parse the request body as JSON", "validation", 422)) from None
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), str):
        raise _Rejected(
            _error("Failed to deserialize the JSON body: missing field `inputs`", "validation", 422)
        )
    return body


def _validated(body: dict[str, Any], spec: Any) -> tuple[int, int, bool]:
    params = body.get("parameters") or {}
    max_new = params.get("max_new_tokens") or DEFAULT_MAX_NEW_TOKENS
    if not isinstance(max_new, int) or max_new < 1:
        raise _Rejected(
            _error("Input validation error: `max_new_tokens` must be strictly positive", "validation", 422)
        )
    inputs = fake_text.count_text_tokens(body["inputs"])
    if inputs + max_new > spec.max_model_len:
        message = (
            f"Input validation error: `inputs` tokens + `max_new_tokens` must be <= {spec.max_model_len}. "
            f"Given: {inputs} `inputs` tokens and {max_new} `max_new_tokens`"
        )
        raise _Rejected(_error(message, "validation", 422))
    return inputs, max_new, bool(params.get("details"))


def _token(gen: Generation, position: int) -> dict[str, Any]:
    text = fake_text.token_text(request_id=gen.req.id, position=position)
    rng = random.Random(gen.req.id * 1000 + position)
    return {
        "id": rng.randrange(100, 32000),
        "text": text,
        "logprob": round(-rng.random(), 4),
        "special": False,
    }


def _details(gen: Generation, *, with_tokens: bool) -> dict[str, Any]:
    req = gen.req
    reason = "eos_token" if req.finish_reason == "stop" else req.finish_reason  # TGI's names
    details: dict[str, Any] = {"finish_reason": reason, "generated_tokens": req.output_tokens, "seed": None}
    if with_tokens:
        details["prefill"] = []
        details["tokens"] = [_token(gen, i) for i in range(req.output_tokens)]
    return details


async def _respond(gen: Generation, details: bool, as_list: bool) -> web.Response:
    try:
        req = await gen.wait()
    except EngineFailed:
        return _error("Request failed during generation: Server error: transport error", "generation", 424)
    body: dict[str, Any] = {
        "generated_text": fake_text.tokens_text(request_id=req.id, start=0, end=req.output_tokens)
    }
    if details:
        body["details"] = _details(gen, with_tokens=True)
    return json_response([body] if as_list else body)


async def _stream(request: web.Request, gen: Generation, details: bool) -> web.StreamResponse:
    response = await start_sse(request)
    try:
        async for start, end in gen.new_tokens():
            await response.write(b"".join(_stream_event(gen, i, details) for i in range(start, end)))
    except EngineFailed:
        error = {
            "error": "Request failed during generation: Server error: transport error",
            "error_type": "generation",
        }
        await response.write(sse_event(error, space=False))
    await response.write_eof()
    return response


def _stream_event(gen: Generation, position: int, details: bool) -> bytes:
    req = gen.req
    last = req.done and position == req.output_tokens - 1
    event: dict[str, Any] = {
        "index": position + 1,
        "token": _token(gen, position),
        "top_tokens": None,
        "generated_text": fake_text.tokens_text(request_id=req.id, start=0, end=req.output_tokens)
        if last
        else None,
        "details": _details(gen, with_tokens=False) if last and details else None,
    }
    return sse_event(event, space=False)
