"""SGLang's HTTP server (`python -m sglang.launch_server`): its native routes and the
OpenAI-compatible chat completions, as 0.5.10 answers them (facts and sources: docs/sglang.md).

- /health_generate, and /health from 0.4.10.post2, check the engine with a one-token
  generation: they poll once a second and answer 200 (empty body) once the scheduler has
  sent anything since the check began (an idle engine runs the check's own request), or
  503 after SGLANG_HEALTH_CHECK_TIMEOUT (20 s). So a healthy /health takes about a second,
  and a stuck scheduler (engine_stall) or a dead one (engine_dead) reads 503 only after
  20 s. Up to 0.4.10 /health answers 200 at once whatever the engine does.
- engine_dead is a scheduler process gone while the HTTP process lives: requests are never
  answered (the tokenizer manager waits for a reply that will not come) and /get_server_info,
  which asks the scheduler, hangs too; /v1/models and /get_model_info still answer. From
  0.5.10 a watchdog turns a dead scheduler into a whole-server exit: that is the crash fault.
- Errors are {"object": "error", "message", "type", "param", "code"}; a prompt of the
  context length or more, or prompt + max_tokens reaching it, is a 400. The request's
  "model" is not checked and is echoed back.
- A stream's first chunk (role "assistant", empty content) comes with the first token, then
  one chunk per token, a chunk with the finish reason and an empty delta, the usage chunk
  when stream_options.include_usage is set, and `data: [DONE]`. From 0.5.10 the status
  and headers wait for that first chunk, so a stream's time to headers is its TTFT.
- --api-key guards every route except /health* and /metrics: 401 {"error": "Unauthorized"}.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from fleet.simulator import fake_text
from fleet.simulator.generation import EngineFailed, Generation
from fleet.simulator.http_app import EngineServer, instance_of, json_response
from fleet.simulator.sglang_metrics import (
    CONTENT_TYPE,
    SchedulerLog,
    SglangMetricsSource,
    max_total_num_tokens,
    render_sglang_metrics,
    version_tuple,
)
from fleet.simulator.stream_bodies import sse_event, start_sse

GIB = 1024**3
HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT
HEALTH_POLL_S = 1.0  # the health check looks for an answer once a second
HEALTH_RUNS_GENERATION_FROM = (0, 4, 10, 2)  # /health = /health_generate (sglang#8444)
KICK_START_STREAM_FROM = (0, 5, 10, 0)  # headers only once the first chunk is ready
INFO_ALIASES_FROM = (0, 5, 10, 0)  # /server_info and /model_info beside the get_ names
EOS_TOKEN_ID = 128009  # what matched_stop names for an end-of-sequence stop (Llama 3's)
DEFAULT_MODEL_NAME = "default"  # ChatCompletionRequest's model when none is given


class SglangServer(EngineServer):
    engine = "sglang"
    generate_path = "/v1/chat/completions"

    def __init__(self) -> None:
        self._log: SchedulerLog | None = None

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/health", _health),
            web.get("/health_generate", _health_generate),
            web.get("/get_server_info", _server_info),
            web.get("/server_info", _server_info),
            web.get("/get_model_info", _model_info),
            web.get("/model_info", _model_info),
            web.get("/v1/models", _models),
            web.get("/v1/models/{model:.+}", _model),
            web.get("/metrics", _metrics),
            web.post("/v1/chat/completions", _chat),
        ]

    def failure(self, status: int) -> web.Response:
        if status == 503:
            return _error("The request queue is full.", "503", 503)
        return _error("Internal server error: simulated", "InternalServerError", status)

    def not_found(self) -> web.Response:
        return json_response({"detail": "Not Found"}, status=404)

    def scheduler_log(self, instance: Any) -> SchedulerLog:
        """What the scheduler last logged, brought up to now (a new one after a restart)."""
        if self._log is None or self._log.engine is not instance.engine:
            self._log = SchedulerLog(engine=instance.engine, started=instance.started_at)
        self._log.refresh(instance.clock())
        return self._log


def _error(message: str, err_type: str, status: int) -> web.Response:
    body = {"object": "error", "message": message, "type": err_type, "param": None, "code": status}
    return json_response(body, status=status)


def _unauthorized(request: web.Request, instance: Any) -> web.Response | None:
    key = instance.spec.api_key
    if key and request.headers.get("Authorization") != f"Bearer {key}":
        return json_response({"error": "Unauthorized"}, status=401)
    return None


async def _forever() -> None:
    """What a request waiting on a scheduler that will not answer does: wait until the
    client gives up (aiohttp cancels the handler) or the instance stops."""
    await asyncio.Event().wait()


def _scheduler_answers(instance: Any) -> bool:
    knobs = instance.engine.knobs
    return not (knobs.dead or knobs.stalled)


# -- health -----------------------------------------------------------------------------


async def _health(request: web.Request) -> web.Response:
    if version_tuple(instance_of(request).spec.version) < HEALTH_RUNS_GENERATION_FROM:
        return web.Response(status=200)  # the HTTP server's own liveness only
    return await _health_generate(request)


def _steps(engine: Any) -> int:
    return engine.stats.prefill_steps + engine.stats.decode_steps


async def _health_generate(request: web.Request) -> web.Response:
    instance = instance_of(request)
    engine, before = instance.engine, _steps(instance.engine)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HEALTH_CHECK_TIMEOUT_S
    while loop.time() < deadline:
        await asyncio.sleep(HEALTH_POLL_S)
        if instance.engine is not engine:
            break  # restarted under the check: the old process never answers it
        idle = not engine.running and not engine.waiting
        if _scheduler_answers(instance) and (idle or _steps(engine) > before):
            return web.Response(status=200)
    return web.Response(status=503)


# -- information --------------------------------------------------------------------------


async def _server_info(request: web.Request) -> web.Response:
    instance = instance_of(request)
    if request.path == "/server_info" and version_tuple(instance.spec.version) < INFO_ALIASES_FROM:
        return instance.server.not_found()
    if (denied := _unauthorized(request, instance)) is not None:
        return denied
    if not _scheduler_answers(instance):
        await _forever()  # it asks the scheduler for its internal state
    return json_response(server_info(instance))


def server_info(instance: Any) -> dict[str, Any]:
    """/get_server_info: the server arguments, the scheduler's start-up info, its internal
    state (per data-parallel rank) and the version."""
    spec = instance.spec
    log = instance.server.scheduler_log(instance)
    args = server_args(spec)
    tokens = max_total_num_tokens(spec)
    internal: dict[str, Any] = {
        **args,
        "last_gen_throughput": log.gen_throughput,
        "memory_usage": {
            "weight": round(spec.weights_gib / spec.gpu_count, 2),
            "kvcache": round(tokens * spec.kv_bytes_per_token_effective / spec.gpu_count / GIB, 2),
            "token_capacity": tokens,
            "graph": 0.54,
        },
    }
    if version_tuple(spec.version) >= INFO_ALIASES_FROM:
        internal["effective_max_running_requests_per_dp"] = spec.max_num_seqs
    return {
        **args,
        "status": "ready",
        "max_total_num_tokens": tokens,
        "max_req_input_len": min(spec.max_model_len - 1, tokens - 1) - 5,
        "internal_states": [internal],
        "version": spec.version,
    }


def server_args(spec: Any) -> dict[str, Any]:
    """ServerArgs as dataclasses.asdict writes it, for the fields a console reads (the
    simulated launch sets --context-length, --max-running-requests and --chunked-prefill-size).
    SGLang includes api_key in clear; so does the simulator."""
    return {
        "model_path": spec.served_model_name,
        "tokenizer_path": spec.served_model_name,
        "tokenizer_mode": "auto",
        "load_format": "auto",
        "trust_remote_code": False,
        "context_length": spec.max_model_len,
        "is_embedding": False,
        "host": spec.host,
        "port": spec.port,
        "dtype": "auto",
        "quantization": None,
        "kv_cache_dtype": spec.kv_cache_dtype,
        "mem_fraction_static": spec.gpu_memory_utilization,
        "max_running_requests": spec.max_num_seqs,
        "max_queued_requests": None,
        "max_total_tokens": None,
        "chunked_prefill_size": spec.max_num_batched_tokens,
        "max_prefill_tokens": 16384,
        "schedule_policy": "fcfs",
        "schedule_conservativeness": 1.0,
        "page_size": 1,
        "device": "cuda",
        "tp_size": spec.gpu_count,
        "pp_size": 1,
        "dp_size": 1,
        "stream_interval": 1,
        "random_seed": spec.seed,
        "watchdog_timeout": 300,
        "log_level": "info",
        "enable_metrics": True,
        "decode_log_interval": 40,
        "api_key": spec.api_key or None,
        "served_model_name": spec.served_model_name,
        "weight_version": "default",
        "disable_radix_cache": not spec.enable_prefix_caching,
        "enable_mixed_chunk": False,
        "attention_backend": None,
    }


async def _model_info(request: web.Request) -> web.Response:
    instance = instance_of(request)
    if request.path == "/model_info" and version_tuple(instance.spec.version) < INFO_ALIASES_FROM:
        return instance.server.not_found()
    if (denied := _unauthorized(request, instance)) is not None:
        return denied
    name = instance.spec.served_model_name
    return json_response(
        {
            "model_path": name,
            "tokenizer_path": name,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
        }
    )


def _card(model: str, max_model_len: int | None) -> dict[str, Any]:
    return {
        "id": model,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "sglang",
        "root": model,
        "parent": None,
        "max_model_len": max_model_len,
    }


async def _models(request: web.Request) -> web.Response:
    instance = instance_of(request)
    if (denied := _unauthorized(request, instance)) is not None:
        return denied
    spec = instance.spec
    return json_response({"object": "list", "data": [_card(spec.served_model_name, spec.max_model_len)]})


async def _model(request: web.Request) -> web.Response:
    instance = instance_of(request)
    if (denied := _unauthorized(request, instance)) is not None:
        return denied
    model, spec = request.match_info["model"], instance.spec
    if model != spec.served_model_name:
        error = {
            "message": f"The model '{model}' does not exist",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
        return json_response({"error": error}, status=404)
    return json_response(_card(model, spec.max_model_len))


async def _metrics(request: web.Request) -> web.Response:
    instance = instance_of(request)
    source = SglangMetricsSource(
        spec=instance.spec, engine=instance.engine, log=instance.server.scheduler_log(instance)
    )
    body = instance.metrics_body(lambda: render_sglang_metrics(source))
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


# -- chat completions ---------------------------------------------------------------------


class _Rejected(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


@dataclass(frozen=True, kw_only=True)
class _Plan:
    model: str
    prompt_tokens: int
    max_tokens: int
    target_tokens: int
    stream: bool
    include_usage: bool


async def _chat(request: web.Request) -> web.StreamResponse:
    instance = instance_of(request)
    if (denied := _unauthorized(request, instance)) is not None:
        return denied
    try:
        plan = _plan(await _json_body(request), instance)
    except _Rejected as exc:
        return exc.response
    if instance.engine_dead:
        await _forever()
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


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise _Rejected(_error("JSON decode error", "Bad Request", 400)) from None
    if not isinstance(body, dict):
        raise _Rejected(_error("Input should be a valid dictionary", "Bad Request", 400))
    return body


def _plan(body: dict[str, Any], instance: Any) -> _Plan:
    spec = instance.spec
    messages = body.get("messages")
    if messages is None:
        detail = "[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]"
        raise _Rejected(_error(detail, "Bad Request", 400))
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _Rejected(_error("messages: Input should be a valid list of messages", "Bad Request", 400))
    if not messages:
        raise _Rejected(_error("Messages cannot be empty.", "BadRequestError", 400))
    max_new = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_new is not None and (isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1):
        raise _Rejected(_error(f"max_tokens must be a positive integer, got {max_new!r}", "Bad Request", 400))
    prompt = fake_text.count_chat_tokens(messages)
    _check_context(prompt, max_new, spec.max_model_len)
    # The scheduler caps max_new_tokens to what the context and the KV pool leave.
    room = min(spec.max_model_len - 1, max_total_num_tokens(spec) - 1) - prompt - 1
    budget = max(1, min(max_new if max_new is not None else room, room))
    natural = fake_text.natural_length(rng=instance.rng)
    target = budget if body.get("ignore_eos") else min(budget, natural)
    options = body.get("stream_options") or {}
    return _Plan(
        model=str(body.get("model") or DEFAULT_MODEL_NAME),
        prompt_tokens=prompt,
        max_tokens=budget,
        target_tokens=target,
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
    )


def _check_context(prompt: int, max_new: int | None, context: int) -> None:
    """The tokenizer manager's length checks: both reject reaching the context length."""
    if prompt >= context:
        message = f"The input ({prompt} tokens) is longer than the model's context length ({context} tokens)."
        raise _Rejected(_error(message, "BadRequestError", 400))
    if max_new is not None and prompt + max_new >= context:
        message = (
            f"Requested token count exceeds the model's maximum context length of {context} tokens. "
            f"You requested a total of {prompt + max_new} tokens: {prompt} tokens from the input messages "
            f"and {max_new} tokens for the completion. Please reduce the number of tokens in the input "
            "messages or the completion to fit within the limit."
        )
        raise _Rejected(_error(message, "BadRequestError", 400))


def _split(gen: Generation, instance: Any, start: int, end: int) -> tuple[str, str]:
    """(reasoning, content) text of token positions [start, end)."""
    reasoning_end = fake_text.reasoning_split(gen.req.target_tokens) if instance.spec.reasoning else 0
    rid = gen.req.id
    reasoning = fake_text.tokens_text(request_id=rid, start=start, end=min(end, reasoning_end))
    content = fake_text.tokens_text(request_id=rid, start=max(start, reasoning_end), end=end)
    return reasoning, content


def _usage(gen: Generation, instance: Any, plan: _Plan) -> dict[str, Any]:
    output = gen.req.output_tokens
    reasoning = (
        min(output, fake_text.reasoning_split(gen.req.target_tokens)) if instance.spec.reasoning else 0
    )
    return {
        "prompt_tokens": plan.prompt_tokens,
        "total_tokens": plan.prompt_tokens + output,
        "completion_tokens": output,
        "prompt_tokens_details": None,
        "reasoning_tokens": reasoning,
    }


def _matched_stop(reason: str | None) -> int | None:
    return EOS_TOKEN_ID if reason == "stop" else None


async def _respond(instance: Any, gen: Generation, plan: _Plan) -> web.Response:
    try:
        req = await gen.wait()
    except EngineFailed:
        await _forever()
    reasoning, content = _split(gen, instance, 0, req.output_tokens)
    message = {
        "role": "assistant",
        "content": content,
        "reasoning_content": reasoning or None,
        "tool_calls": None,
    }
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": req.finish_reason,
        "matched_stop": _matched_stop(req.finish_reason),
    }
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": plan.model,
        "choices": [choice],
        "usage": _usage(gen, instance, plan),
        "metadata": {"weight_version": "default"},
    }
    return json_response(body)


def _chunk(id_: str, plan: _Plan, choices: list[dict[str, Any]], usage: Any = None) -> bytes:
    body = {
        "id": id_,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": plan.model,
        "choices": choices,
        "usage": usage,
    }
    return sse_event(body)


def _delta_choice(
    *, role: str | None = None, content: str | None = None, reasoning: str | None = None, finish: Any = None
) -> dict[str, Any]:
    delta = {"role": role, "content": content, "reasoning_content": reasoning, "tool_calls": None}
    return {
        "index": 0,
        "delta": delta,
        "logprobs": None,
        "finish_reason": finish,
        "matched_stop": _matched_stop(finish),
    }


async def _stream(request: web.Request, instance: Any, gen: Generation, plan: _Plan) -> web.StreamResponse:
    id_ = f"chatcmpl-{uuid.uuid4().hex}"
    kick_start = version_tuple(instance.spec.version) >= KICK_START_STREAM_FROM
    response = None if kick_start else await start_sse(request)
    first = True
    try:
        async for start, end in gen.new_tokens():
            if response is None:
                response = await start_sse(request)
            events = []
            if first:
                events.append(_chunk(id_, plan, [_delta_choice(role="assistant", content="")]))
                first = False
            for position in range(start, end):
                reasoning, content = _split(gen, instance, position, position + 1)
                choice = _delta_choice(reasoning=reasoning) if reasoning else _delta_choice(content=content)
                events.append(_chunk(id_, plan, [choice]))
            await response.write(b"".join(events))
    except EngineFailed:
        await _forever()
    if response is None:
        response = await start_sse(request)
    tail = [_chunk(id_, plan, [_delta_choice(finish=gen.req.finish_reason)])]
    if plan.include_usage:
        tail.append(_chunk(id_, plan, [], usage=_usage(gen, instance, plan)))
    await response.write(b"".join(tail) + b"data: [DONE]\n\n")
    await response.write_eof()
    return response
