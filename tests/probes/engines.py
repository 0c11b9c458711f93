"""Fake engines for the probe tests: vLLM, TGI and Ollama routes served by `servers.app`."""

from __future__ import annotations

from typing import Any

from fleet.probes.target import ProbeLimits, ProbeTarget
from tests.probes.servers import Responder, respond, respond_chunked, sse

FAST = ProbeLimits(
    connect_timeout_s=1.0,
    read_timeout_s=1.0,
    total_deadline_s=2.0,
    stream_deadline_s=3.0,
    max_body_bytes=256 * 1024,
    stream_max_tokens=8,
)
# Generous bound on "ended within its deadline": scheduling noise, not a timing test.
SLACK_S = 2.0

MODEL = "Qwen/Qwen3-8B"

VLLM_METRICS = f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{MODEL}"}} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{MODEL}"}} 0.25
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="{MODEL}"}} 1000.0
"""


def make_target(base_url: str, engine: str = "vllm", **overrides: Any) -> ProbeTarget:
    values = {
        "instance_id": 1,
        "name": "qwen-a",
        "engine": engine,
        "engine_version": "",
        "base_url": base_url,
        "served_model_name": MODEL,
        "max_num_seqs": 256,
        "max_model_len": 32768,
    } | overrides
    return ProbeTarget(**values)


def chunk(content: str = "", *, reasoning: str = "", finish: str | None = None) -> dict[str, Any]:
    delta = {"content": content} if content else {}
    if reasoning:
        delta["reasoning_content"] = reasoning
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def token_stream(*, first_delay: float = 0.0, gap: float = 0.0, tokens: int = 4) -> list[tuple[float, bytes]]:
    events = [(first_delay, chunk("ok"))] + [(gap, chunk(" ok")) for _ in range(tokens - 2)]
    events += [(gap, chunk("!", finish="length")), (0, usage_chunk(12, tokens)), (0, "[DONE]")]
    return sse(*events)


def vllm_routes(
    *,
    models: tuple[str, ...] = (MODEL,),
    metrics: str = VLLM_METRICS,
    stream: list[tuple[float, bytes]] | None = None,
) -> dict[str, Responder]:
    async def health(request, writer):
        await respond(writer, 200)

    async def model_list(request, writer):
        await respond(writer, 200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})

    async def version(request, writer):
        await respond(writer, 200, {"version": "0.11.2"})

    async def scrape(request, writer):
        await respond(writer, 200, metrics, content_type="text/plain; version=0.0.4; charset=utf-8")

    async def chat(request, writer):
        if request.json().get("stream"):
            await respond_chunked(writer, stream if stream is not None else token_stream())
        else:
            await respond(
                writer,
                200,
                {
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "length",
                        }
                    ],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 1},
                },
            )

    return {
        "GET /health": health,
        "GET /v1/models": model_list,
        "GET /version": version,
        "GET /metrics": scrape,
        "POST /v1/chat/completions": chat,
    }
