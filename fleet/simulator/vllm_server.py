"""vLLM's OpenAI-compatible server: /health, /version, /v1/models, /metrics, completions.

Behaviour by version follows the vLLM reference: /health is 200 with an empty body, and
500 (<= 0.10) or 503 (0.11+) with an empty body while the engine is dead; a request that
hits a dead engine gets 500 with an empty body; error bodies are flat before 0.10.1 and
nested after. An API key guards /v1 only. Without max_tokens a request runs to a
"natural" length and ends with "stop"; with it, it ends with "length" if the natural
answer is longer (or ignore_eos is set).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from fleet.simulator import fake_text, openai_payloads, vllm_versions
from fleet.simulator.generation import EngineFailed, Generation
from fleet.simulator.http_app import EngineServer, instance_of, json_response
from fleet.simulator.metrics import CONTENT_TYPE, MetricsSource, render_vllm_metrics
from fleet.simulator.openai_errors import (
    RequestRejected,
    bad_value,
    context_length_error,
    error_body,
    field_missing,
    model_not_found,
)
from fleet.simulator.sleep_routes import sleep_routes
from fleet.simulator.stream_bodies import sse_event, start_sse

CHAT = "chat"
COMPLETION = "completion"


class VllmServer(EngineServer):
    engine = "vllm"
    generate_path = "/v1/chat/completions"

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/health", _health),
            web.get("/ping", _health),
            web.post("/ping", _health),
            web.get("/version", _version),
            web.get("/load", _load),
            web.get("/metrics", _metrics),
            web.get("/v1/models", _models),
            web.post("/v1/chat/completions", _chat),
            web.post("/v1/completions", _completions),
            *sleep_routes(),
        ]

    def not_found(self) -> web.Response:
        return json_response({"detail": "Not Found"}, status=404)


async def _health(request: web.Request) -> web.Response:
    instance = instance_of(request)
    if instance.engine_dead:
        return web.Response(status=vllm_versions.dead_engine_health_status(instance.spec.version))
    return web.Response(status=200)


async def _version(request: web.Request) -> web.Response:
    return json_response({"version": instance_of(request).spec.version})


async def _load(request: web.Request) -> web.Response:
    return json_response({"server_load": 0})  # only counted with --enable-server-load-tracking


async def _metrics(request: web.Request) -> web.Response:
    instance = instance_of(request)
    source = MetricsSource(
        spec=instance.spec,
        engine=instance.engine,
        http_requests=instance.http_requests,
        process_start=instance.started_wall,
    )
    body = instance.metrics_body(lambda: render_vllm_metrics(source))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def _models(request: web.Request) -> web.Response:
    instance = instance_of(request)
    if (denied := _unauthorized(request, instance)) is not None:
        return denied
    spec = instance.spec
    return json_response(
        openai_payloads.model_list(
            served_model_name=spec.served_model_name,
            max_model_len=spec.max_model_len,
            created=int(time.time()),
        )
    )


@dataclass(frozen=True, kw_only=True)
class _Plan:
    kind: str
    prompt_tokens: int
    max_tokens: int
    target_tokens: int
    stream: bool
    include_usage: bool


async def _chat(request: web.Request) -> web.StreamResponse:
    return await _serve(request, CHAT)


async def _completions(request: web.Request) -> web.StreamResponse:
    return await _serve(request, COMPLETION)


async def _serve(request: web.Request, kind: str) -> web.StreamResponse:
    instance = instance_of(request)
    if (denied := _unauthorized(request, instance)) is not None:
        return denied
    try:
        plan = _plan(await _json_body(request), instance, kind)
    except RequestRejected as exc:
        body = error_body(
            version=instance.spec.version,
            message=exc.message,
            err_type=exc.err_type,
            status=exc.status,
            param=exc.param,
        )
        return json_response(body, status=exc.status)
    if instance.engine_dead:
        return web.Response(status=500)
    gen = instance.start_generation(
        prompt_tokens=plan.prompt_tokens,
        max_tokens=plan.max_tokens,
        target_tokens=plan.target_tokens,
        client=request.remote or "",
    )
    try:
        if plan.stream:
            return await _stream(request, instance, gen, plan)
        return await _respond(instance, gen, plan)
    finally:
        gen.close()


def _unauthorized(request: web.Request, instance: Any) -> web.Response | None:
    key = instance.spec.api_key
    if key and request.headers.get("Authorization") != f"Bearer {key}":
        return json_response({"error": "Unauthorized"}, status=401)
    return None


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise RequestRejected(
            "[{'type': 'json_invalid', 'loc': ('body', 0), 'msg': 'JSON decode error'}]",
            err_type="Bad Request",
        ) from None
    if not isinstance(body, dict):
        raise RequestRejected(
            "[{'type': 'model_attributes_type', 'loc': ('body',), 'msg': 'Input should be "
            "a valid dictionary or object to extract fields from'}]",
            err_type="Bad Request",
        )
    return body


def _plan(body: dict[str, Any], instance: Any, kind: str) -> _Plan:
    spec = instance.spec
    model = body.get("model")
    if model is not None and model != spec.served_model_name:
        raise model_not_found(str(model))
    prompt_tokens = _prompt_tokens(body, kind)
    max_tokens = _max_tokens(body, kind)
    rejection = context_length_error(
        version=spec.version,
        max_model_len=spec.max_model_len,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
    )
    if rejection is not None:
        raise rejection
    budget = max_tokens if max_tokens is not None else spec.max_model_len - prompt_tokens
    natural = fake_text.natural_length(rng=instance.rng)
    min_tokens = body.get("min_tokens")
    floor = min_tokens if isinstance(min_tokens, int) and not isinstance(min_tokens, bool) else 0
    target = budget if body.get("ignore_eos") else min(budget, max(natural, floor))
    options = body.get("stream_options") or {}
    return _Plan(
        kind=kind,
        prompt_tokens=prompt_tokens,
        max_tokens=budget,
        target_tokens=target,
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
    )


def _prompt_tokens(body: dict[str, Any], kind: str) -> int:
    if kind == CHAT:
        messages = body.get("messages")
        if messages is None:
            raise field_missing("messages", body)
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise bad_value("messages", "must be a list of message objects")
        return fake_text.count_chat_tokens(messages)
    prompt = body.get("prompt")
    if prompt is None:
        raise field_missing("prompt", body)
    if isinstance(prompt, str):
        return fake_text.count_text_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return fake_text.count_text_tokens(prompt[0])
    raise bad_value("prompt", "the simulator serves one prompt (a string or token ids) per request")


def _max_tokens(body: dict[str, Any], kind: str) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return 16 if kind == COMPLETION else None  # CompletionRequest's default is 16
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_value("max_tokens", f"must be an integer >= 1, got {value!r}")
    return value


def _ids(kind: str) -> tuple[str, int]:
    prefix = "chatcmpl" if kind == CHAT else "cmpl"
    return f"{prefix}-{uuid.uuid4().hex}", int(time.time())


def _split(gen: Generation, instance: Any, start: int, end: int) -> tuple[str, str]:
    """(reasoning, content) text of token positions [start, end)."""
    reasoning_end = fake_text.reasoning_split(gen.req.target_tokens) if instance.spec.reasoning else 0
    rid = gen.req.id
    reasoning = fake_text.tokens_text(request_id=rid, start=start, end=min(end, reasoning_end))
    content = fake_text.tokens_text(request_id=rid, start=max(start, reasoning_end), end=end)
    return reasoning, content


async def _respond(instance: Any, gen: Generation, plan: _Plan) -> web.Response:
    try:
        req = await gen.wait()
    except EngineFailed:
        return web.Response(status=500)
    id_, created = _ids(plan.kind)
    model = instance.spec.served_model_name
    reasoning, content = _split(gen, instance, 0, req.output_tokens)
    usage = openai_payloads.usage(prompt_tokens=plan.prompt_tokens, completion_tokens=req.output_tokens)
    if plan.kind == CHAT:
        body = openai_payloads.chat_completion(
            id_=id_,
            created=created,
            model=model,
            content=content,
            reasoning=reasoning if instance.spec.reasoning else None,
            finish_reason=req.finish_reason,
            usage_=usage,
        )
    else:
        body = openai_payloads.completion(
            id_=id_,
            created=created,
            model=model,
            text=reasoning + content,
            finish_reason=req.finish_reason,
            usage_=usage,
        )
    return json_response(body)


async def _stream(request: web.Request, instance: Any, gen: Generation, plan: _Plan) -> web.StreamResponse:
    response = await start_sse(request)
    id_, created = _ids(plan.kind)
    model = instance.spec.served_model_name
    if plan.kind == CHAT:
        first = {"role": "assistant", "content": ""}
        await response.write(
            sse_event(openai_payloads.chat_chunk(id_=id_, created=created, model=model, delta=first))
        )
    try:
        async for start, end in gen.new_tokens():
            events = [_token_chunk(gen, instance, plan, id_, created, i) for i in range(start, end)]
            await response.write(b"".join(events))
    except EngineFailed as exc:
        body = error_body(
            version=instance.spec.version, message=str(exc), err_type="InternalServerError", status=500
        )
        await response.write(sse_event(body if "error" in body else {"error": body}))
    else:
        if plan.include_usage:
            usage = openai_payloads.usage(
                prompt_tokens=plan.prompt_tokens, completion_tokens=gen.req.output_tokens
            )
            object_ = "chat.completion.chunk" if plan.kind == CHAT else "text_completion"
            chunk = openai_payloads.usage_chunk(
                id_=id_, created=created, model=model, object_=object_, usage_=usage
            )
            await response.write(sse_event(chunk))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _token_chunk(gen: Generation, instance: Any, plan: _Plan, id_: str, created: int, position: int) -> bytes:
    req = gen.req
    last = req.done and position == req.output_tokens - 1
    finish = req.finish_reason if last else None
    reasoning, content = _split(gen, instance, position, position + 1)
    model = instance.spec.served_model_name
    if plan.kind == COMPLETION:
        chunk = openai_payloads.completion_chunk(
            id_=id_, created=created, model=model, text=reasoning + content, finish_reason=finish
        )
    else:
        delta = {"reasoning_content": reasoning} if reasoning else {"content": content}
        chunk = openai_payloads.chat_chunk(
            id_=id_, created=created, model=model, delta=delta, finish_reason=finish
        )
    return sse_event(chunk)
