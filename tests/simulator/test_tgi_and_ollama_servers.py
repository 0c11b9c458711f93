"""TGI's router and Ollama's API on real sockets."""

from __future__ import annotations

import json

import httpx
import pytest

from fleet.simulator.spec import InstanceSpec

TGI = InstanceSpec(
    name="tgi", engine="tgi", served_model_name="mistralai/Mistral-7B-Instruct-v0.3", max_model_len=4096
)
OLLAMA = InstanceSpec(
    name="ollama", engine="ollama", served_model_name="llama3.1:8b", max_model_len=8192, max_num_seqs=4
)


@pytest.fixture
def servers(simulate):
    sim = simulate(TGI, OLLAMA)
    return sim.url("tgi"), sim.url("ollama"), sim


def test_tgi_health_and_info_describe_the_router(servers):
    tgi, _, _ = servers
    assert (httpx.get(tgi + "/health").status_code, httpx.get(tgi + "/health").content) == (200, b"")
    info = httpx.get(tgi + "/info").json()
    assert info["model_id"] == "mistralai/Mistral-7B-Instruct-v0.3" and info["version"] == "3.3.4"
    assert (info["max_total_tokens"], info["max_input_tokens"], info["router"]) == (
        4096,
        4095,
        "text-generation-router",
    )


def test_tgi_generate_returns_text_and_details(servers):
    tgi, _, _ = servers
    body = httpx.post(
        tgi + "/generate", json={"inputs": "Hello", "parameters": {"max_new_tokens": 5, "details": True}}
    ).json()
    assert len(body["generated_text"].split()) == 5
    details = body["details"]
    assert (details["finish_reason"], details["generated_tokens"], len(details["tokens"])) == ("length", 5, 5)
    listed = httpx.post(tgi + "/", json={"inputs": "Hello", "parameters": {"max_new_tokens": 2}}).json()
    assert isinstance(listed, list) and len(listed[0]["generated_text"].split()) == 2


def test_tgi_streams_tokens_and_the_full_text_last(servers):
    tgi, _, _ = servers
    request = {"inputs": "Hello", "parameters": {"max_new_tokens": 4, "details": True}}
    with httpx.stream("POST", tgi + "/generate_stream", json=request) as response:
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data:{") for line in lines)  # axum writes no space after the colon
    events = [json.loads(line.removeprefix("data:")) for line in lines]
    assert [e["index"] for e in events] == [1, 2, 3, 4]
    assert events[0]["generated_text"] is None and events[-1]["generated_text"]
    assert events[-1]["details"]["finish_reason"] == "length"


def test_tgi_validation_errors_are_422_with_an_error_type(servers):
    tgi, _, _ = servers
    response = httpx.post(
        tgi + "/generate", json={"inputs": "x" * 16000, "parameters": {"max_new_tokens": 200}}
    )
    assert response.status_code == 422
    assert response.json()["error_type"] == "validation"
    assert "`inputs` tokens + `max_new_tokens` must be <= 4096" in response.json()["error"]


def test_tgi_health_is_503_unhealthy_when_the_engine_is_dead(servers):
    tgi, _, sim = servers
    sim.inject("tgi", {"kind": "engine_dead"})
    response = httpx.get(tgi + "/health")
    assert response.status_code == 503
    assert response.json() == {"error": "unhealthy", "error_type": "healthcheck"}


def test_ollama_root_version_tags_and_ps(servers):
    _, ollama, _ = servers
    root = httpx.get(ollama + "/")
    assert (root.status_code, root.text) == (200, "Ollama is running")
    assert httpx.get(ollama + "/api/version").json() == {"version": "0.12.3"}
    tags = httpx.get(ollama + "/api/tags").json()["models"]
    assert tags[0]["name"] == "llama3.1:8b" and tags[0]["details"]["parameter_size"] == "8B"
    loaded = httpx.get(ollama + "/api/ps").json()["models"]
    assert (
        loaded[0]["name"] == "llama3.1:8b"
        and loaded[0]["size_vram"] > 0
        and loaded[0]["expires_at"].endswith("Z")
    )


def test_ollama_chat_answers_with_nanosecond_timings(servers):
    _, ollama, _ = servers
    request = {
        "model": "llama3.1:8b",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
        "options": {"num_predict": 6},
    }
    body = httpx.post(ollama + "/api/chat", json=request).json()
    assert body["done"] is True and body["done_reason"] == "length"
    assert len(body["message"]["content"].split()) == 6 and body["eval_count"] == 6
    assert body["eval_duration"] > 1_000_000 and body["total_duration"] >= body["eval_duration"]


def test_ollama_streams_ndjson_and_ends_with_done(servers):
    _, ollama, _ = servers
    request = {
        "model": "llama3.1:8b",
        "messages": [{"role": "user", "content": "hi"}],
        "options": {"num_predict": 3},
    }
    with httpx.stream("POST", ollama + "/api/chat", json=request) as response:
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert [line["done"] for line in lines] == [False, False, False, True]
    assert lines[-1]["eval_count"] == 3


def test_ollama_refuses_an_unknown_model(servers):
    _, ollama, _ = servers
    response = httpx.post(ollama + "/api/chat", json={"model": "qwen3:32b", "messages": []})
    assert response.status_code == 404
    assert response.json() == {"error": 'model "qwen3:32b" not found, try pulling it first'}


def test_an_ollama_reasoning_model_streams_thinking_first(simulate):
    sim = simulate(
        InstanceSpec(name="thinker", engine="ollama", served_model_name="qwen3:8b", reasoning=True)
    )
    request = {"model": "qwen3:8b", "prompt": "why?", "options": {"num_predict": 5}}
    with httpx.stream("POST", sim.url("thinker") + "/api/generate", json=request) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line][:-1]
    assert [("thinking" in line) for line in lines] == [True, True, False, False, False]
