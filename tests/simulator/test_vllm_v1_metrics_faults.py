"""The faults behind the judgements of vLLM's newer metrics, posted through the control port
and read back from the instance's /metrics page over HTTP: an engine asleep (not down), requests
deferred for a KV transfer (not overload), a prefix cache whose hits collapse, speculative
decoding that accepts almost nothing, and LoRA adapters that starve. Also speculative decoding
and LoRA as a healthy instance reports them. (faults.py and docs/vllm-metrics.md §6.)"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.simulator.spec import InstanceSpec, LoadProfile
from tests.simulator.conftest import wait_for

NAME = "vllm-a"
HELLO = [{"role": "user", "content": "Say hello"}]


def _control(sim, path: str = "") -> str:
    return f"{sim.control_url}/_sim/instances/{NAME}{path}"


def _post_fault(sim, fault: dict) -> httpx.Response:
    return httpx.post(_control(sim, "/faults"), json=fault)


def _clear_fault(sim, kind: str) -> None:
    assert httpx.delete(_control(sim, "/faults"), params={"kind": kind}).json() == {"faults": []}


def _scrape(sim) -> dict:
    text = httpx.get(sim.url(NAME) + "/metrics").text
    return {family.name: family for family in text_string_to_metric_families(text)}


def _value(families: dict, name: str, suffix: str = "", **labels: str) -> float:
    return sum(
        s.value
        for s in families[name].samples
        if s.name == name + suffix and all(s.labels.get(k) == v for k, v in labels.items())
    )


def _window(sim, seconds: float) -> tuple[dict, dict]:
    before = _scrape(sim)
    time.sleep(seconds)
    return before, _scrape(sim)


def _increase(window: tuple[dict, dict], name: str, **labels: str) -> float:
    before, after = window
    return _value(after, name, "_total", **labels) - _value(before, name, "_total", **labels)


def _chat(sim, timeout: float = 10.0) -> httpx.Response:
    return httpx.post(
        sim.url(NAME) + "/v1/chat/completions", json={"messages": HELLO, "max_tokens": 4}, timeout=timeout
    )


@pytest.mark.parametrize(("level", "state"), [(1, "weights_offloaded"), (2, "discard_all")])
def test_an_engine_asleep_says_so_answers_health_and_holds_requests_until_it_wakes(simulate, level, state):
    sim = simulate(InstanceSpec(name=NAME, version="0.20.0", dev_mode=True), control_port=0)
    assert _post_fault(sim, {"kind": "engine_asleep", "level": level}).status_code == 201

    families = _scrape(sim)
    sleep = {s.labels["sleep_state"]: s.value for s in families["vllm:engine_sleep_state"].samples}
    assert sleep == {"awake": 0.0, "weights_offloaded": float(level == 1), "discard_all": float(level == 2)}
    assert _value(families, "vllm:kv_cache_usage_perc") == 0.0
    assert httpx.get(sim.url(NAME) + "/health").status_code == 200  # asleep is not down
    assert httpx.get(sim.url(NAME) + "/is_sleeping").json() == {"is_sleeping": True}

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(_chat, sim)
        wait_for(
            lambda: _value(_scrape(sim), "vllm:num_requests_waiting_by_reason", reason="capacity") == 1,
            what="the request to wait",
        )
        time.sleep(0.2)
        assert not pending.done()  # no answer while asleep, no error either
        _clear_fault(sim, "engine_asleep")
        assert pending.result(timeout=5).status_code == 200

    assert _value(_scrape(sim), "vllm:engine_sleep_state", sleep_state="awake") == 1.0
    assert httpx.get(sim.url(NAME) + "/is_sleeping").json() == {"is_sleeping": False}


def test_sleep_and_wake_up_are_dev_mode_routes(simulate):
    sim = simulate(InstanceSpec(name=NAME, dev_mode=True), InstanceSpec(name="prod"))
    assert httpx.post(sim.url(NAME) + "/sleep", params={"level": "2"}).status_code == 200
    assert httpx.get(sim.url(NAME) + "/is_sleeping").json() == {"is_sleeping": True}
    assert _value(_scrape(sim), "vllm:engine_sleep_state", sleep_state="discard_all") == 1.0
    assert httpx.post(sim.url(NAME) + "/wake_up").status_code == 200
    assert httpx.get(sim.url(NAME) + "/is_sleeping").json() == {"is_sleeping": False}
    assert _chat(sim).status_code == 200

    missing = httpx.get(sim.url("prod") + "/is_sleeping")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})


def test_requests_waiting_for_a_kv_transfer_count_as_deferred_not_capacity(simulate):
    sim = simulate(InstanceSpec(name=NAME, version="0.20.0"), control_port=0)
    fault = {"kind": "waiting_deferred", "n": 5, "prompt_tokens": 400, "output_tokens": 8}
    assert _post_fault(sim, fault).status_code == 201

    def waiting() -> tuple[float, float, float]:
        families = _scrape(sim)
        return (
            _value(families, "vllm:num_requests_waiting"),
            _value(families, "vllm:num_requests_waiting_by_reason", reason="capacity"),
            _value(families, "vllm:num_requests_waiting_by_reason", reason="deferred"),
        )

    wait_for(lambda: waiting() == (5, 0, 5), what="five deferred requests")
    assert _chat(sim, timeout=3).status_code == 200  # the queue is not blocked behind them

    _clear_fault(sim, "waiting_deferred")
    wait_for(lambda: waiting() == (0, 0, 0), what="the transferred requests to run")
    wait_for(lambda: _value(_scrape(sim), "vllm:request_success", "_total") == 6, what="all six to finish")
    transferred = _value(
        _scrape(sim), "vllm:prompt_tokens_by_source", "_total", source="external_kv_transfer"
    )
    assert transferred == 5 * 399  # all but the last prompt token, which is computed here


def test_a_prefix_cache_collapse_keeps_the_queries_and_loses_the_hits(simulate):
    load = LoadProfile(requests_per_s=40, mean_prompt_tokens=800, mean_output_tokens=10, prefix_hit_rate=0.6)
    sim = simulate(InstanceSpec(name=NAME, version="0.20.0", load=load), control_port=0)
    wait_for(lambda: _value(_scrape(sim), "vllm:prefix_cache_queries", "_total") > 0, what="traffic")
    healthy = _window(sim, 1.0)
    hit_rate = _increase(healthy, "vllm:prefix_cache_hits") / _increase(healthy, "vllm:prefix_cache_queries")
    assert hit_rate > 0.4

    assert _post_fault(sim, {"kind": "prefix_cache_collapse"}).status_code == 201
    collapsed = _window(sim, 1.0)
    queried = _increase(collapsed, "vllm:prefix_cache_queries")
    assert queried > 5000
    assert _increase(collapsed, "vllm:prefix_cache_hits") / queried < 0.05
    computed = _increase(collapsed, "vllm:prompt_tokens_by_source", source="local_compute")
    assert computed > 0.9 * _increase(collapsed, "vllm:prompt_tokens")


def test_speculative_decoding_with_almost_no_accepted_drafts_shows_in_its_counters(simulate):
    load = LoadProfile(requests_per_s=15, mean_prompt_tokens=200, mean_output_tokens=120)
    spec = InstanceSpec(name=NAME, num_speculative_tokens=3, spec_acceptance=0.8, load=load)
    sim = simulate(spec, control_port=0)
    wait_for(lambda: _value(_scrape(sim), "vllm:spec_decode_num_drafts", "_total") > 0, what="drafts")
    healthy = _window(sim, 1.0)
    drafts = _increase(healthy, "vllm:spec_decode_num_drafts")
    accepted = _increase(healthy, "vllm:spec_decode_num_accepted_tokens")
    assert accepted / _increase(healthy, "vllm:spec_decode_num_draft_tokens") > 0.5
    assert 1 + accepted / drafts > 2  # mean acceptance length
    first = _increase(healthy, "vllm:spec_decode_num_accepted_tokens_per_pos", position="0")
    third = _increase(healthy, "vllm:spec_decode_num_accepted_tokens_per_pos", position="2")
    assert first > third > 0

    assert _post_fault(sim, {"kind": "spec_decode_low_acceptance", "acceptance": 0.05}).status_code == 201
    time.sleep(0.1)
    poor = _window(sim, 1.0)
    assert _increase(poor, "vllm:spec_decode_num_drafts") > 0
    rate = _increase(poor, "vllm:spec_decode_num_accepted_tokens") / _increase(
        poor, "vllm:spec_decode_num_draft_tokens"
    )
    assert rate < 0.15


def test_starving_lora_adapters_wait_deferred_while_none_runs(simulate):
    load = LoadProfile(requests_per_s=20, mean_prompt_tokens=200, mean_output_tokens=30)
    spec = InstanceSpec(name=NAME, version="0.20.0", lora_adapters=("sql", "chat"), max_loras=2, load=load)
    sim = simulate(spec, control_port=0)
    wait_for(lambda: _scrape(sim)["vllm:lora_requests_info"].samples, what="a step to report its adapters")

    def newest_lora_labels() -> dict[str, str]:
        family = _scrape(sim)["vllm:lora_requests_info"]
        return max(family.samples, key=lambda s: s.value).labels

    wait_for(lambda: newest_lora_labels()["running_lora_adapters"] != "", what="adapters running")
    assert _post_fault(sim, {"kind": "lora_starving"}).status_code == 201
    wait_for(
        lambda: _value(_scrape(sim), "vllm:num_requests_running") == 0, what="the running batch to drain"
    )
    wait_for(lambda: newest_lora_labels()["running_lora_adapters"] == "", what="no adapter running")
    labels = newest_lora_labels()
    assert set(labels["waiting_lora_adapters"].split(",")) == {"sql", "chat"}
    assert labels["max_lora"] == "2"
    families = _scrape(sim)
    deferred = _value(families, "vllm:num_requests_waiting_by_reason", reason="deferred")
    assert deferred == _value(families, "vllm:num_requests_waiting") > 0

    _clear_fault(sim, "lora_starving")
    wait_for(lambda: newest_lora_labels()["running_lora_adapters"] != "", what="adapters running again")


@pytest.mark.parametrize(
    ("fault", "field"),
    [
        ({"kind": "engine_asleep", "level": 3}, "level"),
        ({"kind": "waiting_deferred", "n": 0}, "n"),
        ({"kind": "prefix_cache_collapse", "keep": 1.5}, "keep"),
        ({"kind": "spec_decode_low_acceptance", "acceptance": "low"}, "acceptance"),
        ({"kind": "lora_starving", "adapters": ["sql"]}, "adapters"),
    ],
)
def test_a_malformed_v1_fault_is_a_400_naming_the_field(simulate, fault, field):
    sim = simulate(InstanceSpec(name=NAME), control_port=0)
    response = _post_fault(sim, fault)
    assert (response.status_code, response.json()["field"]) == (400, field)
