import asyncio
import json
import time

import pytest

from fleet.probes.outcomes import Outcome
from fleet.probes.streaming import probe_stream
from tests.probes.engines import FAST, SLACK_S, chunk, make_target, token_stream, usage_chunk, vllm_routes
from tests.probes.servers import app, closed_port_url, respond, respond_chunked, serve, sse

pytestmark = pytest.mark.anyio


def _stream(
    parts, *, path="POST /v1/chat/completions", content_type="text/event-stream", end=True, seen=None
):
    """Stream the parts; end=False keeps the connection open and silent afterwards."""

    async def handler(request, writer):
        if seen is not None:
            seen["body"] = request.json()
        await respond_chunked(writer, parts, content_type=content_type, end=end)
        if not end:
            await asyncio.sleep(3600)

    return app({path: handler})


async def test_it_times_the_first_token_and_the_gaps_between_tokens(http_client):
    seen = {}
    async with serve(_stream(token_stream(first_delay=0.3, gap=0.05, tokens=5), seen=seen)) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.OK
    assert 0.3 <= result.ttft_s < 0.3 + SLACK_S
    assert result.total_s > result.ttft_s
    assert result.itl_mean_s == pytest.approx(0.05, abs=0.04)
    assert result.itl_p95_s >= result.itl_mean_s * 0.5
    assert (result.prompt_tokens, result.completion_tokens, result.tokens_from) == (12, 5, "usage")
    assert result.output_tokens_per_s == pytest.approx(5 / (result.total_s - result.ttft_s))
    assert (result.finish_reason, result.first_token_kind, result.text) == (
        "length",
        "content",
        "ok ok ok ok!",
    )
    assert seen["body"]["stream_options"] == {"include_usage": True}
    assert seen["body"]["max_tokens"] == FAST.stream_max_tokens


async def test_a_reasoning_delta_counts_as_the_first_token(http_client):
    parts = sse((0.2, chunk(reasoning="Let me think")), (0.4, chunk("ok", finish="stop")), (0, "[DONE]"))
    async with serve(_stream(parts)) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.OK
    assert result.first_token_kind == "reasoning"
    assert 0.2 <= result.ttft_s < 0.55  # the reasoning delta, not the content 0.4 s later
    assert (result.completion_tokens, result.tokens_from) == (2, "counted")


async def test_the_newer_reasoning_field_counts_too(http_client):
    parts = sse(
        (0, {"choices": [{"delta": {"reasoning": "hm"}, "finish_reason": None}]}),
        (0, chunk("ok", finish="stop")),
        (0, "[DONE]"),
    )
    async with serve(_stream(parts)) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.first_token_kind, result.token_events) == (Outcome.OK, "reasoning", 2)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            {"error": {"message": "EngineCore died", "type": "InternalServerError", "code": 500}},
            "InternalServerError: EngineCore died",
        ),
        (
            {"object": "error", "message": "out of blocks", "type": "BadRequestError", "code": 400},
            "BadRequestError: out of blocks",
        ),
    ],
    ids=["nested", "flat"],
)
async def test_an_error_event_mid_stream_is_an_error_with_its_message(http_client, event, message):
    parts = sse((0, chunk("ok")), (0, event))
    async with serve(_stream(parts)) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.ERROR
    assert result.error == f"error in the stream: {message}"
    assert result.token_events == 1


async def test_an_error_status_carries_the_parsed_message(http_client):
    async def limited(request, writer):
        body = "<html><head><title>429 Too Many Requests</title></head><body>nginx</body></html>"
        await respond(writer, 429, body, content_type="text/html", headers={"Server": "nginx"})

    async with serve(app({"POST /v1/chat/completions": limited})) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.status, result.server) == (Outcome.BAD_STATUS, 429, "nginx")
    assert result.error == "HTTP 429: 429 Too Many Requests nginx"


async def test_a_stream_that_stops_sending_ends_at_the_read_timeout(http_client):
    async with serve(_stream(sse((0, chunk("ok"))), end=False)) as url:
        started = time.perf_counter()
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.READ_TIMEOUT
    assert result.token_events == 1 and result.ttft_s is not None
    assert time.perf_counter() - started < FAST.stream_deadline_s + SLACK_S


async def test_a_chunk_that_is_not_json_is_garbage(http_client):
    async with serve(_stream([(0, b"data: {not json\n\n")])) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.GARBAGE


async def test_a_stream_ending_without_a_finish_reason_is_an_error(http_client):
    async with serve(_stream(sse((0, chunk("ok"))))) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.error) == (Outcome.ERROR, "the stream ended without a finish reason")


async def test_an_endless_stream_is_too_large(http_client):
    endless = [(0, b"data: " + json.dumps(chunk("x" * 4000)).encode() + b"\n\n")] * 200
    async with serve(_stream(endless)) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.TOO_LARGE


async def test_tgi_streams_from_generate_stream_with_details_at_the_end(http_client):
    events = [
        (0.1, {"token": {"id": 1, "text": "ok", "logprob": -0.1, "special": False}, "generated_text": None}),
        (0.05, {"token": {"id": 2, "text": "!", "logprob": -0.1, "special": False}, "generated_text": None}),
        (
            0.05,
            {
                "token": {"id": 3, "text": "</s>", "special": True},
                "generated_text": "ok!",
                "details": {"finish_reason": "eos_token", "generated_tokens": 3, "input_length": 9},
            },
        ),
    ]
    parts = [(d, b"data:" + json.dumps(e).encode() + b"\n\n") for d, e in events]
    async with serve(_stream(parts, path="POST /generate_stream")) as url:
        result = await probe_stream(client=http_client, target=make_target(url, "tgi"), limits=FAST)
    assert result.outcome == Outcome.OK
    assert (result.token_events, result.completion_tokens, result.prompt_tokens) == (2, 3, 9)
    assert result.finish_reason == "eos_token"


async def test_ollama_streams_ndjson_with_thinking_as_the_first_token(http_client):
    lines = [
        {"model": "qwen3", "message": {"role": "assistant", "content": "", "thinking": "hmm"}, "done": False},
        {"model": "qwen3", "message": {"role": "assistant", "content": "ok"}, "done": False},
        {
            "model": "qwen3",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 11,
            "eval_count": 2,
        },
    ]
    parts = [(0.05, json.dumps(line).encode() + b"\n") for line in lines]
    async with serve(_stream(parts, path="POST /api/chat", content_type="application/x-ndjson")) as url:
        result = await probe_stream(client=http_client, target=make_target(url, "ollama"), limits=FAST)
    assert result.outcome == Outcome.OK
    assert (result.first_token_kind, result.prompt_tokens, result.completion_tokens) == ("reasoning", 11, 2)


async def test_a_connection_closed_mid_stream_is_a_reset(http_client):
    async def cut(request, writer):
        await respond_chunked(writer, sse((0, chunk("ok"))), end=False)

    async with serve(app({"POST /v1/chat/completions": cut})) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.token_events) == (Outcome.RESET, 1)


async def test_a_refused_stream_is_refused(http_client):
    result = await probe_stream(client=http_client, target=make_target(closed_port_url()), limits=FAST)
    assert (result.outcome, result.ttft_s) == (Outcome.REFUSED, None)


async def test_the_fake_vllm_streams_usage_too(http_client):
    async with serve(app(vllm_routes())) as url:
        result = await probe_stream(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.tokens_from) == (Outcome.OK, "usage")
    assert usage_chunk(12, 4)["usage"]["completion_tokens"] == result.completion_tokens
