"""Every fault kind, as a client sees it, and the validation of fault requests."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.nvml.base import GpuState, ThrottleReason
from fleet.simulator.faults import FaultError
from fleet.simulator.spec import GpuSlot, InstanceSpec
from tests.simulator.conftest import wait_for

HELLO = [{"role": "user", "content": "Say hello"}]
NAME = "target"


@pytest.fixture
def sim(simulate):
    return simulate(InstanceSpec(name=NAME, version="0.11.2", max_model_len=8192))


def _post_fault(sim, fault: dict) -> httpx.Response:
    return httpx.post(sim.url(NAME) + "/_sim/faults", json=fault)


def _chat(sim, **options) -> httpx.Response:
    timeout = options.pop("timeout", 5.0)
    return httpx.post(
        sim.url(NAME) + "/v1/chat/completions", json={"messages": HELLO, **options}, timeout=timeout
    )


def test_refuse_connections_closes_the_port_until_cleared(sim):
    assert _post_fault(sim, {"kind": "refuse_connections"}).status_code == 201
    sim.wait_listening(NAME, False)
    with pytest.raises(httpx.ConnectError):
        httpx.get(sim.url(NAME) + "/health")
    sim.clear(NAME)
    sim.wait_listening(NAME, True)
    assert httpx.get(sim.url(NAME) + "/health").status_code == 200


def test_a_timed_fault_clears_itself(sim):
    sim.inject(NAME, {"kind": "refuse_connections", "duration_s": 0.2})
    sim.wait_listening(NAME, False)
    sim.wait_listening(NAME, True, timeout_s=3)
    assert sim.state(NAME)["faults"] == []


def test_hang_accepts_the_connection_and_never_answers(sim):
    _post_fault(sim, {"kind": "hang"})
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(sim.url(NAME) + "/health", timeout=httpx.Timeout(5.0, read=0.3))
    assert time.monotonic() - started < 2
    assert (
        httpx.get(sim.url(NAME) + "/_sim/state").json()["faults"][0]["kind"] == "hang"
    )  # control still answers


def test_slow_headers_delays_the_start_of_every_response(sim):
    _post_fault(sim, {"kind": "slow_headers", "delay_s": 0.3})
    started = time.monotonic()
    assert httpx.get(sim.url(NAME) + "/health").status_code == 200
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize("status", [500, 503])
def test_http_errors_fail_the_chosen_paths(sim, status):
    _post_fault(sim, {"kind": f"http_{status}", "paths": ["/v1/"]})
    failed = _chat(sim, max_tokens=2)
    assert (failed.status_code, failed.content) == (status, b"")  # vLLM's engine-error bodies are empty
    assert httpx.get(sim.url(NAME) + "/health").status_code == 200


def test_rate_limited_answers_429_as_a_gateway_would_with_an_openai_body_and_retry_after(sim):
    _post_fault(sim, {"kind": "rate_limited", "paths": ["/v1/"], "retry_after_s": 2})
    limited = _chat(sim, max_tokens=2)
    assert (limited.status_code, limited.headers["Retry-After"]) == (429, "2")
    assert limited.json() == {
        "error": {
            "message": "Rate limit exceeded. Please retry after a short wait.",
            "type": "rate_limit_error",
            "code": "rate_limit_exceeded",
        }
    }
    assert httpx.get(sim.url(NAME) + "/health").status_code == 200  # outside the limited paths
    sim.clear(NAME, "rate_limited")
    assert _chat(sim, max_tokens=2).status_code == 200


def test_a_fraction_of_requests_fail_intermittently(sim):
    _post_fault(sim, {"kind": "http_500", "fraction": 0.5})
    with httpx.Client() as client:
        statuses = [client.get(sim.url(NAME) + "/version").status_code for _ in range(60)]
    assert 10 < statuses.count(500) < 50 and statuses.count(200) > 10


def test_a_crash_closes_the_port_records_exit_137_and_a_restart_resets_the_counters(sim):
    _chat(sim, max_tokens=3)
    _post_fault(sim, {"kind": "crash", "oom_killed": True})
    sim.wait_listening(NAME, False)
    with pytest.raises(httpx.ConnectError):
        httpx.get(sim.url(NAME) + "/health")
    state = sim.state(NAME)
    assert (state["exit_code"], state["oom_killed"], state["listening"]) == (137, True, False)
    gpu = sim.call(lambda: sim.runner.instance(NAME).nvml())["gpus"][0]
    assert (gpu["memory_used_mib"], list(gpu["processes"])) == (0, [])  # the process is gone
    sim.clear(NAME)
    sim.wait_listening(NAME, True)
    state = sim.state(NAME)
    assert (state["exit_code"], state["restarts"], state["counters"]["requests_received"]) == (None, 1, 0)


def test_malformed_metrics_do_not_parse(sim):
    _post_fault(sim, {"kind": "malformed_metrics"})
    text = httpx.get(sim.url(NAME) + "/metrics").text
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(text))


def test_huge_metrics_serve_a_body_of_the_requested_size(sim):
    _post_fault(sim, {"kind": "huge_metrics"})
    body = httpx.get(sim.url(NAME) + "/metrics").content
    assert 19.5 * 1024**2 < len(body) <= 20 * 1024**2
    assert body.startswith(b"# HELP vllm:num_requests_running")


def test_engine_stall_keeps_health_green_while_nothing_moves(sim):
    _post_fault(sim, {"kind": "engine_stall"})
    with pytest.raises(httpx.ReadTimeout):
        _chat(sim, max_tokens=2, timeout=httpx.Timeout(5.0, read=0.3))
    assert httpx.get(sim.url(NAME) + "/health").status_code == 200
    assert sim.state(NAME)["scheduler"]["stalled"] is True


def test_slow_prefill_raises_time_to_first_token(sim):
    def ttft() -> float:
        started = time.monotonic()
        with httpx.stream(
            "POST", sim.url(NAME) + "/v1/completions", json={"prompt": "x" * 6000, "stream": True}
        ) as r:
            next(r.iter_lines())
            return time.monotonic() - started

    normal = ttft()
    _post_fault(sim, {"kind": "slow_prefill", "factor": 10})
    assert ttft() > 3 * normal


def test_tps_drop_slows_decoding_and_shows_a_hot_throttled_gpu(sim):
    def decode_s() -> float:
        started = time.monotonic()
        _chat(sim, max_tokens=20)
        return time.monotonic() - started

    normal = decode_s()
    _post_fault(sim, {"kind": "tps_drop", "factor": 4})
    assert decode_s() > 2 * normal
    gpu = GpuState.from_dict(httpx.get(sim.url(NAME) + "/_sim/nvml").json()["gpus"][0])
    assert gpu.temperature_c >= 85
    assert ThrottleReason.SW_THERMAL in gpu.slowdown_reasons
    assert gpu.sm_clock_mhz < gpu.max_sm_clock_mhz


def test_kv_near_full_takes_that_share_of_the_blocks(sim):
    _post_fault(sim, {"kind": "kv_near_full", "fraction": 0.97})
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(sim.url(NAME) + "/metrics").text)}
    assert families["vllm:kv_cache_usage_perc"].samples[0].value >= 0.97


def test_queue_backlog_keeps_requests_waiting(simulate):
    sim = simulate(InstanceSpec(name=NAME, max_num_seqs=8))
    sim.inject(NAME, {"kind": "queue_backlog", "n": 30, "output_tokens": 500})

    def saturated() -> bool:
        scheduler = sim.state(NAME)["scheduler"]
        return scheduler["waiting"] >= 25 and scheduler["running"] == 8

    wait_for(saturated, what="a full batch with the backlog waiting behind it")


def test_gpu_xid_shows_in_nvml(sim):
    _post_fault(sim, {"kind": "gpu_xid", "xid": 48})
    gpu = httpx.get(sim.url(NAME) + "/_sim/nvml").json()["gpus"][0]
    assert gpu["xid_errors"] == [48] and gpu["ecc_uncorrected_volatile"] == 1


def test_gpu_xid_without_a_gpu_shows_on_the_instances_own_gpus(simulate):
    slots = (GpuSlot(index=2), GpuSlot(index=3))
    sim = simulate(InstanceSpec(name=NAME, gpu_count=2, params_b=32, gpus=slots))
    assert _post_fault(sim, {"kind": "gpu_xid"}).json()["fault"]["gpu"] is None
    gpus = httpx.get(sim.url(NAME) + "/_sim/nvml").json()["gpus"]
    assert [(g["index"], g["xid_errors"]) for g in gpus] == [(2, [79]), (3, [79])]
    _post_fault(sim, {"kind": "gpu_xid", "gpu": 3})
    gpus = httpx.get(sim.url(NAME) + "/_sim/nvml").json()["gpus"]
    assert [(g["index"], g["xid_errors"]) for g in gpus] == [(2, []), (3, [79])]


def test_gpu_xid_on_a_gpu_the_instance_lacks_is_refused_listing_its_gpus(simulate):
    slots = (GpuSlot(index=2), GpuSlot(index=3))
    sim = simulate(InstanceSpec(name=NAME, gpu_count=2, params_b=32, gpus=slots))
    response = _post_fault(sim, {"kind": "gpu_xid", "gpu": 0})
    assert response.status_code == 400
    assert response.json() == {
        "error": f"gpu 0 is not one of {NAME}'s GPUs; its GPU indices: 2, 3 "
        "(leave gpu out for every one of them)",
        "field": "gpu",
    }
    assert sim.state(NAME)["faults"] == []
    with pytest.raises(FaultError, match="its GPU indices: 2, 3"):
        sim.inject(NAME, {"kind": "gpu_xid", "gpu": 1})


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"factor": 2}, "kind is required; known kinds: slow_prefill, tps_drop"),
        ({"kind": "oom"}, "unknown fault kind 'oom'; known kinds:"),
        ({"kind": "tps_drop", "factor": "fast"}, "factor must be a number, got 'fast'"),
        (
            {"kind": "tps_drop", "factor": 0.5},
            "factor must be between 1 and 1000 (how many times slower), got 0.5",
        ),
        ({"kind": "kv_near_full", "fraction": 1}, "fraction must be between 0 and 1 (exclusive), got 1"),
        ({"kind": "hang", "delay_s": 3}, "unknown parameter 'delay_s' for hang; it takes: duration_s"),
        ({"kind": "hang", "duration_s": -1}, "duration_s must be between 0 and 1e+07 (exclusive)"),
        ({"kind": "crash", "oom_killed": "yes"}, "oom_killed must be true or false, got 'yes'"),
        ([1, 2], "a fault must be a JSON object"),
    ],
)
def test_bad_fault_requests_are_refused_with_a_clear_message(sim, fault, message):
    response = _post_fault(sim, fault)
    assert response.status_code == 400
    assert message in response.json()["error"]
    with pytest.raises(FaultError):
        sim.inject(NAME, fault)


def test_clearing_one_kind_keeps_the_others(sim):
    _post_fault(sim, {"kind": "slow_headers", "delay_s": 0.01})
    _post_fault(sim, {"kind": "gpu_xid"})
    response = httpx.delete(sim.url(NAME) + "/_sim/faults", params={"kind": "gpu_xid"})
    assert [f["kind"] for f in response.json()["faults"]] == ["slow_headers"]
    assert httpx.delete(sim.url(NAME) + "/_sim/faults", params={"kind": "nope"}).status_code == 400
    assert httpx.delete(sim.url(NAME) + "/_sim/faults").json() == {"faults": []}


def test_the_load_can_be_changed_and_the_access_log_names_the_clients(sim):
    response = httpx.post(
        sim.url(NAME) + "/_sim/load",
        json={"stream": "batch", "requests_per_s": 20, "mean_output_tokens": 10, "clients": ["10.0.2.55"]},
    )
    assert response.status_code == 200
    wait_for(
        lambda: "10.0.2.55 - - [" in httpx.get(sim.url(NAME) + "/_sim/access_log").text,
        what="a logged request",
    )
    assert sim.state(NAME)["clients"]["10.0.2.55"] > 0
    log = httpx.get(sim.url(NAME) + "/_sim/access_log").text
    assert '"POST /v1/chat/completions HTTP/1.1" 200' in log
    assert httpx.post(sim.url(NAME) + "/_sim/load", json={"requests_per_s": -1}).status_code == 400
