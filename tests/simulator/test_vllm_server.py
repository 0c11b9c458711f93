"""vLLM's HTTP surface on a real socket: routes, completions, SSE, errors by version."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from fleet.simulator.spec import InstanceSpec
from tests.simulator.conftest import wait_for

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
HELLO = [{"role": "user", "content": "Say hello"}]


def _sse_events(response: httpx.Response) -> list[str]:
    return [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]


@pytest.fixture
def vllm(simulate):
    sim = simulate(InstanceSpec(name="vllm-a", version="0.11.2", served_model_name=MODEL, max_model_len=4096))
    return sim, sim.url("vllm-a")


def test_health_is_200_with_an_empty_body(vllm):
    _, url = vllm
    for path in ("/health", "/ping"):
        response = httpx.get(url + path)
        assert (response.status_code, response.content) == (200, b"")


@pytest.mark.parametrize(
    ("version", "status"), [("0.8.5", 500), ("0.10.2", 500), ("0.11.0", 503), ("0.13.1", 503)]
)
def test_health_answers_500_up_to_0_10_and_503_from_0_11_when_the_engine_is_dead(simulate, version, status):
    sim = simulate(InstanceSpec(name="dead", version=version))
    sim.inject("dead", {"kind": "engine_dead"})
    response = httpx.get(sim.url("dead") + "/health")
    assert (response.status_code, response.content) == (status, b"")
    assert httpx.get(sim.url("dead") + "/version").status_code == 200  # /version keeps answering
    chat = httpx.post(sim.url("dead") + "/v1/chat/completions", json={"messages": HELLO})
    assert (chat.status_code, chat.content) == (500, b"")


def test_version_models_and_load_describe_the_instance(vllm):
    _, url = vllm
    assert httpx.get(url + "/version").json() == {"version": "0.11.2"}
    models = httpx.get(url + "/v1/models").json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert (card["id"], card["owned_by"], card["max_model_len"], card["object"]) == (
        MODEL,
        "vllm",
        4096,
        "model",
    )
    assert httpx.get(url + "/load").json() == {"server_load": 0}


def test_a_chat_completion_reports_usage_and_finish_reason(vllm):
    _, url = vllm
    body = httpx.post(
        url + "/v1/chat/completions", json={"model": MODEL, "messages": HELLO, "max_tokens": 7}
    ).json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["role"] == "assistant"
    assert len(choice["message"]["content"].split()) == 7
    assert body["usage"]["completion_tokens"] == 7
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 7


def test_without_max_tokens_the_answer_ends_with_stop(vllm):
    _, url = vllm
    body = httpx.post(url + "/v1/chat/completions", json={"messages": HELLO}).json()
    assert body["choices"][0]["finish_reason"] == "stop"


def test_the_sse_stream_ends_with_a_usage_chunk_and_done(vllm):
    _, url = vllm
    request = {"messages": HELLO, "max_tokens": 5, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", url + "/v1/chat/completions", json=request) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _sse_events(response)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    tokens = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(tokens) == 5 and tokens[-1]["choices"][0]["finish_reason"] == "length"
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 5
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_the_openai_sdk_streams_a_chat_completion(vllm):
    _, url = vllm
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model=MODEL, messages=HELLO, max_tokens=6, stream=True, stream_options={"include_usage": True}
    )
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    assert len(text.split()) == 6
    assert usage.completion_tokens == 6


def test_completions_stream_text_chunks(vllm):
    _, url = vllm
    plain = httpx.post(url + "/v1/completions", json={"prompt": "Once upon", "max_tokens": 3}).json()
    assert plain["object"] == "text_completion" and len(plain["choices"][0]["text"].split()) == 3
    with httpx.stream("POST", url + "/v1/completions", json={"prompt": "Once", "stream": True}) as response:
        events = _sse_events(response)
    chunks = [json.loads(e) for e in events[:-1]]
    assert events[-1] == "[DONE]" and len(chunks) == 16  # max_tokens defaults to 16 for completions
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("version", ["0.7.3", "0.10.0"])
def test_error_bodies_are_flat_before_0_10_1(simulate, version):
    sim = simulate(InstanceSpec(name="old", version=version, max_model_len=2048))
    response = httpx.post(
        sim.url("old") + "/v1/chat/completions", json={"messages": HELLO, "max_tokens": 5000}
    )
    body = response.json()
    assert response.status_code == 400
    assert body["object"] == "error" and body["type"] == "BadRequestError" and body["code"] == 400
    assert body["message"].startswith(
        "This model's maximum context length is 2048 tokens. However, you requested"
    )
    assert "in the completion). Please reduce the length of the messages or completion." in body["message"]


@pytest.mark.parametrize("version", ["0.10.1", "0.11.2"])
def test_error_bodies_are_nested_from_0_10_1(simulate, version):
    sim = simulate(InstanceSpec(name="new", version=version, max_model_len=2048))
    response = httpx.post(sim.url("new") + "/v1/completions", json={"prompt": "x" * 12000, "max_tokens": 1})
    error = response.json()["error"]
    assert response.status_code == 400
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == 400
    assert "maximum context length is 2048 tokens" in error["message"]


def test_newest_versions_word_the_context_error_as_validation_errors(simulate):
    sim = simulate(InstanceSpec(name="newest", version="0.12.0", max_model_len=2048))
    error = httpx.post(
        sim.url("newest") + "/v1/chat/completions", json={"messages": HELLO, "max_tokens": 4000}
    ).json()["error"]
    assert error["message"].startswith("'max_tokens' or 'max_completion_tokens' is too large: 4000.")
    assert error["param"] == "max_tokens"


def test_an_unknown_model_is_404_and_a_missing_field_is_400(vllm):
    _, url = vllm
    missing = httpx.post(url + "/v1/chat/completions", json={"model": "gpt-4", "messages": HELLO})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "The model `gpt-4` does not exist."
    assert missing.json()["error"]["type"] == "NotFoundError"
    no_messages = httpx.post(url + "/v1/chat/completions", json={"model": MODEL})
    assert no_messages.status_code == 400 and "Field required" in no_messages.json()["error"]["message"]
    assert httpx.get(url + "/nope").json() == {"detail": "Not Found"}


def test_an_api_key_guards_v1_but_not_health_or_metrics(simulate):
    sim = simulate(InstanceSpec(name="keyed", api_key="s3cret"))
    url = sim.url("keyed")
    assert httpx.get(url + "/v1/models").status_code == 401
    assert httpx.get(url + "/v1/models").json() == {"error": "Unauthorized"}
    assert httpx.get(url + "/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert httpx.get(url + "/health").status_code == 200
    assert httpx.get(url + "/metrics").status_code == 200


def test_a_reasoning_model_streams_reasoning_content_before_content(simulate):
    sim = simulate(InstanceSpec(name="thinker", reasoning=True))
    request = {"messages": HELLO, "max_tokens": 10, "stream": True}
    with httpx.stream("POST", sim.url("thinker") + "/v1/chat/completions", json=request) as response:
        deltas = [json.loads(e)["choices"][0]["delta"] for e in _sse_events(response)[1:-1]]
    kinds = ["reasoning" if "reasoning_content" in d else "content" for d in deltas]
    assert kinds == ["reasoning"] * 4 + ["content"] * 6
    plain = httpx.post(
        sim.url("thinker") + "/v1/chat/completions", json={"messages": HELLO, "max_tokens": 10}
    ).json()
    message = plain["choices"][0]["message"]
    assert message["reasoning_content"] and message["content"]


def test_a_client_that_disconnects_mid_stream_aborts_its_request(vllm):
    sim, url = vllm
    request = {"messages": HELLO, "max_tokens": 2000, "stream": True}
    with httpx.stream("POST", url + "/v1/chat/completions", json=request) as response:
        next(response.iter_lines())
    wait_for(lambda: sim.state("vllm-a")["counters"]["finished"].get("abort"), what="the abort")
    state = sim.state("vllm-a")
    assert state["counters"]["finished"] == {"abort": 1}
    assert state["scheduler"]["running"] == 0 and state["scheduler"]["blocks_used"] == 0
