"""Ollama's native API: /, /api/version, /api/tags, /api/ps, /api/chat, /api/generate.

Ollama has no /metrics (vLLM reference §5.2); what a console learns comes from /api/ps and
the timing fields (nanoseconds) of each final response. The model stays loaded for
keep_alive (5 minutes) after its last request; /api/ps lists it only while loaded, and a
request to an unloaded model pays a load_duration first. Errors are {"error": "..."}: 404
for an unknown model, 503 "server busy" when the queue is full (OLLAMA_MAX_QUEUE, 512).
A reasoning model streams `thinking` before `content`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from fleet.simulator import fake_text
from fleet.simulator.generation import EngineFailed, Generation
from fleet.simulator.http_app import EngineServer, instance_of, json_response
from fleet.simulator.stream_bodies import ndjson_line, start_ndjson

KEEP_ALIVE_S = 300.0
LOAD_S = 1.5
MAX_QUEUE = 512
DEFAULT_NUM_PREDICT = 128


class OllamaServer(EngineServer):
    engine = "ollama"
    generate_path = "/api/chat"

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", _root),
            web.get("/api/version", _version),
            web.get("/api/tags", _tags),
            web.get("/api/ps", _ps),
            web.post("/api/chat", _chat),
            web.post("/api/generate", _generate),
        ]

    def failure(self, status: int) -> web.Response:
        if status == 503:
            return _error("server busy, please try again.  maximum pending requests exceeded", 503)
        return _error("an error was encountered while running the model", status)

    def not_found(self) -> web.Response:
        return web.Response(status=404, text="404 page not found", content_type="text/plain")


def _error(message: str, status: int) -> web.Response:
    return json_response({"error": message}, status=status)


def _now_text(at: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if at is None else at, tz=UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


async def _root(request: web.Request) -> web.Response:
    return web.Response(text="Ollama is running", content_type="text/plain")


async def _version(request: web.Request) -> web.Response:
    return json_response({"version": instance_of(request).spec.version})


def _model_entry(spec: Any) -> dict[str, Any]:
    name = spec.served_model_name if ":" in spec.served_model_name else f"{spec.served_model_name}:latest"
    size = int(spec.weights_gib * 1024**3)
    return {
        "name": name,
        "model": name,
        "size": size,
        "digest": hashlib.sha256(name.encode()).hexdigest(),
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "llama",
            "families": ["llama"],
            "parameter_size": f"{spec.params_b:g}B",
            "quantization_level": "Q4_K_M" if spec.weight_bytes_per_param < 1 else "F16",
        },
    }


async def _tags(request: web.Request) -> web.Response:
    entry = _model_entry(instance_of(request).spec)
    entry["modified_at"] = _now_text(instance_of(request).started_wall)
    return json_response({"models": [entry]})


def _loaded_until(instance: Any) -> float | None:
    """Wall time the model unloads at (keep_alive after the last request), or None if unloaded."""
    engine = instance.engine
    last = instance.last_generation_at or instance.started_at
    idle = 0.0 if engine.num_running or engine.num_waiting else instance.clock() - last
    remaining = KEEP_ALIVE_S - idle
    return time.time() + remaining if remaining > 0 else None


async def _ps(request: web.Request) -> web.Response:
    instance = instance_of(request)
    until = _loaded_until(instance)
    if until is None:
        return json_response({"models": []})
    entry = _model_entry(instance.spec)
    entry["expires_at"] = _now_text(until)
    entry["size_vram"] = entry["size"]
    return json_response({"models": [entry]})


async def _chat(request: web.Request) -> web.StreamResponse:
    return await _serve(request, chat=True)


async def _generate(request: web.Request) -> web.StreamResponse:
    return await _serve(request, chat=False)


async def _serve(request: web.Request, *, chat: bool) -> web.StreamResponse:
    instance = instance_of(request)
    try:
        body = await request.json()
    except ValueError:
        return _error("invalid character in request body", 400)
    if not isinstance(body, dict):
        return _error("invalid request body", 400)
    model = str(body.get("model", ""))
    if model not in _accepted_names(instance.spec.served_model_name):
        return _error(f'model "{model}" not found, try pulling it first', 404)
    if instance.engine.num_waiting >= MAX_QUEUE:
        return instance.server.failure(503)
    if instance.engine_dead:
        return _error("llama runner process has terminated: exit status 2", 500)
    load_s = 0.0 if _loaded_until(instance) else LOAD_S
    if load_s:
        await asyncio.sleep(load_s)
    prompt_tokens, num_predict = _sizes(body, chat, instance.spec.max_model_len)
    natural = fake_text.natural_length(rng=instance.rng)
    gen = instance.start_generation(
        prompt_tokens=prompt_tokens,
        max_tokens=num_predict,
        target_tokens=natural,
        client=request.remote or "",
    )
    try:
        if body.get("stream", True):  # Ollama streams unless told not to
            return await _stream(request, instance, gen, model, chat, load_s)
        return await _respond(instance, gen, model, chat, load_s)
    finally:
        gen.close()


def _accepted_names(served: str) -> set[str]:
    base = served.removesuffix(":latest")
    return {served, base, f"{base}:latest"}


def _sizes(body: dict[str, Any], chat: bool, max_model_len: int) -> tuple[int, int]:
    if chat:
        prompt = fake_text.count_chat_tokens([m for m in body.get("messages") or [] if isinstance(m, dict)])
    else:
        prompt = fake_text.count_text_tokens(str(body.get("prompt", "")))
    options = body.get("options") or {}
    num_predict = options.get("num_predict") if isinstance(options, dict) else None
    if not isinstance(num_predict, int) or num_predict < 1:
        num_predict = DEFAULT_NUM_PREDICT
    # Ollama truncates an over-long prompt to the context instead of refusing it.
    prompt = min(prompt, max(1, max_model_len - num_predict))
    return prompt, min(num_predict, max_model_len - prompt)


def _piece(instance: Any, gen: Generation, chat: bool, start: int, end: int) -> dict[str, Any]:
    split = fake_text.reasoning_split(gen.req.target_tokens) if instance.spec.reasoning else 0
    rid = gen.req.id
    thinking = fake_text.tokens_text(request_id=rid, start=start, end=min(end, split))
    content = fake_text.tokens_text(request_id=rid, start=max(start, split), end=end)
    if not chat:
        return {"response": content, **({"thinking": thinking} if thinking else {})}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking:
        message["thinking"] = thinking
    return {"message": message}


def _final(gen: Generation, model: str, chat: bool, load_s: float) -> dict[str, Any]:
    req = gen.req
    prompt_eval = (req.first_token_at or req.finished_at or 0.0) - (req.scheduled_at or req.arrival)
    eval_s = (req.finished_at or 0.0) - (req.first_token_at or req.finished_at or 0.0)
    empty = {"message": {"role": "assistant", "content": ""}} if chat else {"response": ""}
    return {
        "model": model,
        "created_at": _now_text(),
        **empty,
        "done_reason": "length" if req.finish_reason == "length" else "stop",
        "done": True,
        "total_duration": int(((req.finished_at or 0.0) - req.arrival + load_s) * 1e9),
        "load_duration": int(load_s * 1e9),
        "prompt_eval_count": req.prompt_tokens,
        "prompt_eval_duration": int(max(0.0, prompt_eval) * 1e9),
        "eval_count": req.output_tokens,
        "eval_duration": int(max(0.0, eval_s) * 1e9),
    }


async def _respond(instance: Any, gen: Generation, model: str, chat: bool, load_s: float) -> web.Response:
    try:
        req = await gen.wait()
    except EngineFailed:
        return _error("llama runner process has terminated: exit status 2", 500)
    body = _final(gen, model, chat, load_s)
    body.update(_piece(instance, gen, chat, 0, req.output_tokens))
    return json_response(body)


async def _stream(
    request: web.Request, instance: Any, gen: Generation, model: str, chat: bool, load_s: float
) -> web.StreamResponse:
    response = await start_ndjson(request)
    try:
        async for start, end in gen.new_tokens():
            lines = [
                ndjson_line(
                    {
                        "model": model,
                        "created_at": _now_text(),
                        **_piece(instance, gen, chat, i, i + 1),
                        "done": False,
                    }
                )
                for i in range(start, end)
            ]
            await response.write(b"".join(lines))
    except EngineFailed:
        await response.write(ndjson_line({"error": "llama runner process has terminated: exit status 2"}))
    else:
        await response.write(ndjson_line(_final(gen, model, chat, load_s)))
    await response.write_eof()
    return response
