"""SGLang's server on real sockets: its routes, chat completions, /metrics and its faults."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.simulator import sglang_server
from fleet.simulator.instance import new_engine
from fleet.simulator.sglang_metrics import (
    E2E_0_4,
    E2E_0_5,
    INTER_TOKEN_LATENCY,
    TIME_TO_FIRST_TOKEN,
    SchedulerLog,
    version_tuple,
)
from fleet.simulator.spec import InstanceSpec, LoadProfile
from tests.simulator.conftest import wait_for

MODEL = "Qwen/Qwen3-8B"
HELLO = [{"role": "user", "content": "Say hello"}]
SCHEDULER_LABELS = {"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"}
SCHEDULER_GAUGES = {
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:num_used_tokens",
    "sglang:token_usage",
    "sglang:gen_throughput",
    "sglang:cache_hit_rate",
    "sglang:max_total_num_tokens",
}


def sglang_spec(name: str = "sg", **fields) -> InstanceSpec:
    values = {"engine": "sglang", "served_model_name": MODEL, "max_model_len": 4096} | fields
    return InstanceSpec(name=name, **values)


@pytest.fixture
def quick_health(monkeypatch):
    """The health check polls every 50 ms and gives up after 0.6 s instead of 1 s and 20 s."""
    monkeypatch.setattr(sglang_server, "HEALTH_POLL_S", 0.05)
    monkeypatch.setattr(sglang_server, "HEALTH_CHECK_TIMEOUT_S", 0.6)


@pytest.fixture
def sglang(simulate, quick_health):
    sim = simulate(sglang_spec())
    return sim, sim.url("sg")


def families(url: str) -> dict[str, object]:
    response = httpx.get(url + "/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def chat(url: str, **body) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", json={"messages": HELLO} | body, timeout=10)


# -- health ------------------------------------------------------------------------------


def test_health_runs_a_generation_check_and_answers_200_empty_after_a_poll(simulate, monkeypatch):
    monkeypatch.setattr(sglang_server, "HEALTH_POLL_S", 0.3)
    sim = simulate(sglang_spec())
    for path in ("/health", "/health_generate"):
        started = time.monotonic()
        response = httpx.get(sim.url("sg") + path)
        assert (response.status_code, response.content) == (200, b"")
        assert time.monotonic() - started >= 0.3  # it waits for the scheduler's answer


def test_a_stuck_scheduler_fails_the_health_check_after_its_timeout(sglang):
    sim, url = sglang
    sim.inject("sg", {"kind": "engine_stall"})
    started = time.monotonic()
    response = httpx.get(url + "/health")
    assert (response.status_code, response.content) == (503, b"")
    assert time.monotonic() - started >= 0.6
    sim.clear("sg")
    assert httpx.get(url + "/health").status_code == 200


def test_up_to_0_4_10_health_is_the_http_server_alone(simulate, quick_health):
    sim = simulate(sglang_spec(version="0.4.10"), sglang_spec("newer", version="0.4.10.post2"))
    for name in ("sg", "newer"):
        sim.inject(name, {"kind": "engine_stall"})
    assert httpx.get(sim.url("sg") + "/health").status_code == 200
    assert httpx.get(sim.url("sg") + "/health_generate").status_code == 503
    assert httpx.get(sim.url("newer") + "/health").status_code == 503


def test_a_dead_scheduler_leaves_requests_unanswered_while_the_model_list_answers(sglang):
    sim, url = sglang
    sim.inject("sg", {"kind": "engine_dead"})
    assert httpx.get(url + "/health").status_code == 503
    assert httpx.get(url + "/v1/models").status_code == 200
    assert httpx.get(url + "/get_model_info").status_code == 200
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/v1/chat/completions", json={"messages": HELLO, "max_tokens": 2}, timeout=0.5)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(url + "/get_server_info", timeout=0.5)  # it asks the scheduler


# -- information -------------------------------------------------------------------------


def test_get_server_info_reports_the_server_args_and_the_kv_pool(simulate):
    spec = sglang_spec(gpu_count=2, gpu_memory_utilization=0.85, max_num_seqs=64, max_num_batched_tokens=4096)
    sim = simulate(spec)
    info = httpx.get(sim.url("sg") + "/get_server_info").json()
    assert info["version"] == "0.5.10" and info["status"] == "ready"
    assert (info["model_path"], info["served_model_name"], info["tp_size"]) == (MODEL, MODEL, 2)
    assert (info["mem_fraction_static"], info["max_running_requests"]) == (0.85, 64)
    assert (info["context_length"], info["chunked_prefill_size"], info["page_size"]) == (4096, 4096, 1)
    assert info["max_total_num_tokens"] == spec.num_gpu_blocks * spec.block_size
    assert info["max_req_input_len"] == 4096 - 1 - 5
    (state,) = info["internal_states"]
    assert state["memory_usage"]["token_capacity"] == info["max_total_num_tokens"]
    assert state["effective_max_running_requests_per_dp"] == 64
    assert httpx.get(sim.url("sg") + "/server_info").json()["version"] == "0.5.10"


def test_the_info_aliases_are_absent_before_0_5_10(simulate):
    sim = simulate(sglang_spec(version="0.5.5"))
    assert httpx.get(sim.url("sg") + "/get_server_info").json()["version"] == "0.5.5"
    missing = httpx.get(sim.url("sg") + "/server_info")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})


def test_the_model_list_and_model_info_name_the_served_model(sglang):
    _, url = sglang
    (card,) = httpx.get(url + "/v1/models").json()["data"]
    assert (card["id"], card["owned_by"], card["root"], card["max_model_len"]) == (
        MODEL,
        "sglang",
        MODEL,
        4096,
    )
    assert httpx.get(url + f"/v1/models/{MODEL}").json()["id"] == MODEL
    unknown = httpx.get(url + "/v1/models/other")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    info = httpx.get(url + "/get_model_info").json()
    assert (info["model_path"], info["is_generation"], info["weight_version"]) == (MODEL, True, "default")


def test_the_api_key_guards_every_route_but_health_and_metrics(simulate, quick_health):
    sim = simulate(sglang_spec(api_key="s3cret"))
    url = sim.url("sg")
    for path in ("/v1/models", "/get_server_info", "/get_model_info"):
        denied = httpx.get(url + path)
        assert (denied.status_code, denied.json()) == (401, {"error": "Unauthorized"})
    assert chat(url).status_code == 401
    assert httpx.get(url + "/health").status_code == 200
    assert httpx.get(url + "/metrics").status_code == 200
    granted = httpx.get(url + "/get_server_info", headers={"Authorization": "Bearer s3cret"})
    assert granted.status_code == 200 and granted.json()["api_key"] == "s3cret"  # SGLang shows it


# -- chat completions ----------------------------------------------------------------------


def test_a_chat_completion_reports_usage_and_echoes_the_model(sglang):
    _, url = sglang
    body = chat(url, model="whatever", max_tokens=7).json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["model"] == "whatever"  # SGLang does not check it
    (choice,) = body["choices"]
    assert (choice["finish_reason"], choice["matched_stop"]) == ("length", None)
    assert len(choice["message"]["content"].split()) == 7
    usage = body["usage"]
    assert (usage["completion_tokens"], usage["total_tokens"]) == (7, usage["prompt_tokens"] + 7)
    assert body["metadata"] == {"weight_version": "default"}
    natural = chat(url).json()["choices"][0]
    assert (natural["finish_reason"], natural["matched_stop"]) == ("stop", sglang_server.EOS_TOKEN_ID)


def test_a_stream_sends_the_role_then_a_chunk_per_token_the_finish_and_the_usage(sglang):
    _, url = sglang
    request = {"messages": HELLO, "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", url + "/v1/chat/completions", json=request) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    deltas = [c["choices"][0]["delta"] if c["choices"] else None for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": "", "reasoning_content": None, "tool_calls": None}
    assert all(d["content"] and d["role"] is None for d in deltas[1:4])
    assert len(deltas) == 6  # role, three tokens, finish, usage
    finish = chunks[4]["choices"][0]
    assert finish["finish_reason"] == "length" and set(finish["delta"].values()) == {None}
    assert chunks[5]["choices"] == [] and chunks[5]["usage"]["completion_tokens"] == 3


def test_a_reasoning_model_streams_reasoning_content_first(simulate):
    sim = simulate(sglang_spec(reasoning=True))
    request = {"messages": HELLO, "max_tokens": 5, "stream": True}
    with httpx.stream("POST", sim.url("sg") + "/v1/chat/completions", json=request) as response:
        chunks = [json.loads(line[6:]) for line in response.iter_lines() if line and line != "data: [DONE]"]
    deltas = [c["choices"][0]["delta"] for c in chunks[1:6]]
    assert [d["reasoning_content"] is not None for d in deltas] == [True, True, False, False, False]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"messages": [{"role": "user", "content": "x" * 17000}]},
            "is longer than the model's context length",
        ),
        ({"max_tokens": 4090}, "Requested token count exceeds the model's maximum context length of 4096"),
        ({"messages": []}, "Messages cannot be empty."),
    ],
)
def test_requests_sglang_refuses_are_400_with_a_flat_error(sglang, body, words):
    _, url = sglang
    response = httpx.post(url + "/v1/chat/completions", json={"messages": HELLO} | body)
    assert response.status_code == 400
    error = response.json()
    assert (error["object"], error["code"]) == ("error", 400) and words in error["message"]


def test_http_faults_answer_in_sglang_s_error_shape(sglang):
    sim, url = sglang
    sim.inject("sg", {"kind": "http_503", "paths": ["/v1/chat"]})
    busy = chat(url)
    assert busy.status_code == 503
    assert busy.json() == {
        "object": "error",
        "message": "The request queue is full.",
        "type": "503",
        "param": None,
        "code": 503,
    }


# -- /metrics ------------------------------------------------------------------------------


def test_the_metrics_page_holds_sglang_names_labels_and_buckets_once_requests_ran(sglang):
    _, url = sglang
    assert not any(name in families(url) for name in SCHEDULER_GAUGES)  # nothing logged yet
    for _ in range(3):
        assert chat(url, max_tokens=4).status_code == 200
    found = families(url)
    for name in SCHEDULER_GAUGES:
        (sample,) = found[name].samples
        assert found[name].type == "gauge" and set(sample.labels) == SCHEDULER_LABELS
        assert sample.labels["model_name"] == MODEL and sample.labels["engine_type"] == "unified"
    for name in ("sglang:prompt_tokens", "sglang:generation_tokens", "sglang:num_requests"):
        (sample,) = found[name].samples
        assert found[name].type == "counter" and sample.name == name + "_total"
        assert sample.labels == {"model_name": MODEL}
    assert found["sglang:generation_tokens"].samples[0].value == 12
    assert found["sglang:num_requests"].samples[0].value == 3
    for name, bounds in (
        ("sglang:time_to_first_token_seconds", TIME_TO_FIRST_TOKEN),
        ("sglang:inter_token_latency_seconds", INTER_TOKEN_LATENCY),
        ("sglang:e2e_request_latency_seconds", E2E_0_5),
    ):
        buckets = [s for s in found[name].samples if s.name.endswith("_bucket")]
        assert [float(s.labels["le"]) for s in buckets] == [*bounds, float("inf")]
        assert not [s for s in found[name].samples if s.name.endswith("_created")]
    e2e_count = next(
        s for s in found["sglang:e2e_request_latency_seconds"].samples if s.name.endswith("_count")
    )
    assert e2e_count.value == 3
    (total,) = found["sglang:max_total_num_tokens"].samples
    assert total.value == sglang_spec().num_gpu_blocks * sglang_spec().block_size


def test_a_0_5_5_page_has_the_short_label_set_and_no_pool_size(simulate):
    sim = simulate(sglang_spec(version="0.5.5"))
    url = sim.url("sg")
    assert chat(url, max_tokens=2).status_code == 200
    found = families(url)
    assert "sglang:max_total_num_tokens" not in found
    assert set(found["sglang:num_running_reqs"].samples[0].labels) == SCHEDULER_LABELS - {"moe_ep_rank"}


def test_kv_held_by_something_else_shows_in_token_usage_after_the_next_batch(sglang):
    sim, url = sglang
    sim.inject("sg", {"kind": "kv_near_full", "fraction": 0.6})
    assert chat(url, max_tokens=2).status_code == 200
    (usage,) = families(url)["sglang:token_usage"].samples
    assert usage.value >= 0.6


def test_a_backlog_shows_in_num_queue_reqs(simulate):
    spec = sglang_spec(max_num_seqs=2, load=LoadProfile(requests_per_s=0.0))
    sim = simulate(spec)
    url = sim.url("sg")
    sim.inject("sg", {"kind": "queue_backlog", "n": 20, "prompt_tokens": 64, "output_tokens": 400})

    def queued() -> float:
        found = families(url)
        return found["sglang:num_queue_reqs"].samples[0].value if "sglang:num_queue_reqs" in found else 0

    wait_for(lambda: queued() >= 10, timeout_s=5, what="a queue of at least 10 on the page")


def test_malformed_metrics_apply_to_sglang_too(sglang):
    sim, url = sglang
    sim.inject("sg", {"kind": "malformed_metrics"})
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(httpx.get(url + "/metrics").text))


# -- the scheduler's logging, in simulated time -------------------------------------------


def test_the_scheduler_logs_once_idle_for_30_s_without_the_pool_size(clock):
    engine = new_engine(sglang_spec(), now=0.0)
    log = SchedulerLog(engine=engine, started=0.0)
    log.refresh(29.0)
    assert not log.logged
    log.refresh(30.0)
    assert log.logged and (log.running, log.gen_throughput, log.max_total_num_tokens) == (0, 0.0, 0)


def test_a_prefill_logs_the_batch_s_hit_rate_and_a_decode_log_resets_it(clock):
    engine = new_engine(sglang_spec(enable_prefix_caching=True), now=0.0)
    log = SchedulerLog(engine=engine, started=0.0)
    engine.submit(prompt_tokens=1000, max_tokens=200, cached_tokens=600)
    clock.run_until(engine, lambda: engine.stats.prefill_steps > 0)
    log.refresh(clock.now)
    assert log.running == 1 and log.cache_hit_rate == pytest.approx(0.6, abs=0.01)
    assert log.max_total_num_tokens == engine.pool.total
    clock.run_until(engine, lambda: engine.stats.decode_steps >= 40)
    log.refresh(clock.now)
    assert log.cache_hit_rate == 0.0 and log.gen_throughput > 0


def test_a_stalled_scheduler_leaves_its_last_values(clock):
    engine = new_engine(sglang_spec(), now=0.0)
    log = SchedulerLog(engine=engine, started=0.0)
    engine.submit(prompt_tokens=100, max_tokens=500)
    clock.run_until(engine, lambda: engine.stats.prefill_steps > 0)
    log.refresh(clock.now)
    engine.knobs.stalled = True
    engine.submit(prompt_tokens=100, max_tokens=5)
    clock.run(engine, seconds=60)
    log.refresh(clock.now)
    assert (log.running, log.queued) == (1, 0)


@pytest.mark.parametrize(
    ("version", "parsed"),
    [
        ("0.5.10", (0, 5, 10, 0)),
        ("0.4.10.post2", (0, 4, 10, 2)),
        ("0.5.3rc0", (0, 5, 3, 0)),
        ("x", (0, 5, 10, 0)),
    ],
)
def test_versions_are_read_with_their_post_release(version, parsed):
    assert version_tuple(version) == parsed


def test_e2e_buckets_follow_the_version():
    from fleet.simulator.sglang_metrics import sglang_buckets

    assert sglang_buckets(sglang_spec(version="0.4.10.post2")).latency == E2E_0_4
    assert sglang_buckets(sglang_spec(version="0.5.5")).latency == E2E_0_5
