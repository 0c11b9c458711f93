"""/metrics: vLLM's names, types and labels by version generation, and counts that add up."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fleet.simulator.instance import new_engine
from fleet.simulator.metrics import MetricsSource, render_vllm_metrics, vllm_metric_families
from fleet.simulator.spec import InstanceSpec, LoadProfile
from fleet.simulator.traffic import Traffic

HELLO = [{"role": "user", "content": "Say hello"}]
COMMON = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_preemptions",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:iteration_tokens_total",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:cache_config_info",
}
GENERATIONS = {
    "0.7.3": {
        "present": {
            "vllm:gpu_cache_usage_perc",
            "vllm:cpu_cache_usage_perc",
            "vllm:num_requests_swapped",
            "vllm:gpu_prefix_cache_hit_rate",
            "vllm:time_per_output_token_seconds",
        },
        "absent": {
            "vllm:kv_cache_usage_perc",
            "vllm:prefix_cache_queries",
            "vllm:inter_token_latency_seconds",
        },
    },
    "0.8.5": {
        "present": {
            "vllm:gpu_cache_usage_perc",
            "vllm:gpu_prefix_cache_queries",
            "vllm:gpu_prefix_cache_hits",
            "vllm:time_per_output_token_seconds",
        },
        "absent": {"vllm:kv_cache_usage_perc", "vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc"},
    },
    "0.10.1": {
        "present": {
            "vllm:kv_cache_usage_perc",
            "vllm:gpu_cache_usage_perc",
            "vllm:prefix_cache_queries",
            "vllm:gpu_prefix_cache_queries",
            "vllm:time_per_output_token_seconds",
        },
        "absent": {"vllm:inter_token_latency_seconds", "vllm:num_requests_swapped"},
    },
    "0.11.2": {
        "present": {
            "vllm:kv_cache_usage_perc",
            "vllm:inter_token_latency_seconds",
            "vllm:request_time_per_output_token_seconds",
            "vllm:time_per_output_token_seconds",
        },
        # Deprecated in 0.10 (HELP since 0.9.2), hidden in 0.11 (docs/vllm-metrics.md §2).
        "absent": {"vllm:num_requests_swapped", "vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries"},
    },
    "0.12.0": {
        "present": {
            "vllm:kv_cache_usage_perc",
            "vllm:prefix_cache_queries",
            "vllm:prefix_cache_hits",
            "vllm:inter_token_latency_seconds",
            "vllm:request_time_per_output_token_seconds",
        },
        "absent": {
            "vllm:gpu_cache_usage_perc",
            "vllm:gpu_prefix_cache_queries",
            "vllm:time_per_output_token_seconds",
            "vllm:cpu_cache_usage_perc",
        },
    },
}


def _families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _value(families: dict, name: str, suffix: str = "", **labels) -> float:
    total = 0.0
    for sample in families[name].samples:
        if sample.name == name + suffix and all(sample.labels.get(k) == v for k, v in labels.items()):
            total += sample.value
    return total


@pytest.mark.parametrize("version", sorted(GENERATIONS))
def test_the_metric_names_follow_the_version_generation(simulate, version):
    sim = simulate(InstanceSpec(name="m", version=version, served_model_name="org/model"))
    response = httpx.get(sim.url("m") + "/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = _families(response.text)
    expected = GENERATIONS[version]
    assert COMMON | expected["present"] <= set(families)
    assert not expected["absent"] & set(families)
    labels = families["vllm:num_requests_running"].samples[0].labels
    assert labels == (
        {"model_name": "org/model"} if version == "0.7.3" else {"model_name": "org/model", "engine": "0"}
    )


def test_counters_histograms_and_gauges_have_vllms_types_and_buckets(simulate):
    sim = simulate(InstanceSpec(name="m", version="0.11.2", max_model_len=4096))
    families = _families(httpx.get(sim.url("m") + "/metrics").text)
    assert families["vllm:prompt_tokens"].type == "counter"
    assert families["vllm:num_requests_waiting"].type == "gauge"
    assert families["vllm:time_to_first_token_seconds"].type == "histogram"
    ttft_bounds = [
        s.labels["le"]
        for s in families["vllm:time_to_first_token_seconds"].samples
        if s.name.endswith("_bucket")
    ]
    assert ttft_bounds[:3] == ["0.001", "0.005", "0.01"] and ttft_bounds[-2:] == ["2560.0", "+Inf"]
    e2e_bounds = [
        s.labels["le"]
        for s in families["vllm:e2e_request_latency_seconds"].samples
        if s.name.endswith("_bucket")
    ]
    assert e2e_bounds[0] == "0.3" and e2e_bounds[-2] == "7680.0"
    prompt_bounds = [
        s.labels["le"] for s in families["vllm:request_prompt_tokens"].samples if s.name.endswith("_bucket")
    ]
    assert prompt_bounds == [
        "1.0",
        "2.0",
        "5.0",
        "10.0",
        "20.0",
        "50.0",
        "100.0",
        "200.0",
        "500.0",
        "1000.0",
        "2000.0",
        "+Inf",
    ]
    reasons = {s.labels["finished_reason"] for s in families["vllm:request_success"].samples}
    assert reasons == {"stop", "length", "abort"}
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["block_size"] == "16" and info["engine"] == "0" and int(info["num_gpu_blocks"]) > 1000


def test_the_newest_versions_precreate_error_and_repetition_finish_reasons(simulate):
    sim = simulate(InstanceSpec(name="m", version="0.12.0"))
    families = _families(httpx.get(sim.url("m") + "/metrics").text)
    assert {s.labels["finished_reason"] for s in families["vllm:request_success"].samples} == {
        "stop",
        "length",
        "abort",
        "error",
        "repetition",
    }


def test_counters_agree_with_the_requests_served(simulate):
    sim = simulate(InstanceSpec(name="m", version="0.11.2"))
    url = sim.url("m")
    usages = []
    for max_tokens in (3, 5, 8, 13):
        body = httpx.post(
            url + "/v1/chat/completions", json={"messages": HELLO, "max_tokens": max_tokens}
        ).json()
        usages.append(body["usage"])
    families = _families(httpx.get(url + "/metrics").text)
    assert _value(families, "vllm:request_success", "_total") == 4
    assert _value(families, "vllm:request_success", "_total", finished_reason="length") == 4
    assert _value(families, "vllm:e2e_request_latency_seconds", "_count") == 4
    assert (
        _value(families, "vllm:generation_tokens", "_total")
        == sum(u["completion_tokens"] for u in usages)
        == 29
    )
    assert _value(families, "vllm:prompt_tokens", "_total") == sum(u["prompt_tokens"] for u in usages)
    assert _value(families, "vllm:inter_token_latency_seconds", "_count") == 29 - 4
    assert _value(families, "vllm:request_generation_tokens", "_sum") == 29
    handlers = {
        (s.labels["handler"], s.labels["status"]): s.value
        for s in families["http_requests"].samples
        if s.name.endswith("_total")
    }
    assert handlers == {("/v1/chat/completions", "2xx"): 4.0}  # /metrics and /health are not counted


def test_the_exposition_is_byte_for_byte_what_prometheus_client_writes():
    spec = InstanceSpec(name="m", version="0.11.2")
    engine = new_engine(spec, now=0.0)
    traffic = Traffic(engine=engine, max_model_len=spec.max_model_len, seed=1, now=0.0)
    traffic.set_stream(LoadProfile(requests_per_s=50, prefix_hit_rate=0.3), now=0.0)
    for step in range(1, 200):
        traffic.generate(step * 0.02)
        engine.advance(step * 0.02)
    source = MetricsSource(
        spec=spec, engine=engine, http_requests=Counter({("/v1/x", "POST", "2xx"): 3}), process_start=1.5e9
    )

    class Collector:
        def collect(self):
            return vllm_metric_families(source)

    assert render_vllm_metrics(source) == generate_latest(Collector())


def test_tgi_metrics_use_tgi_names_without_a_total_suffix(simulate):
    sim = simulate(InstanceSpec(name="t", engine="tgi", max_model_len=4096))
    httpx.post(sim.url("t") + "/generate", json={"inputs": "hello", "parameters": {"max_new_tokens": 4}})
    text = httpx.get(sim.url("t") + "/metrics").text
    families = _families(text)
    assert {"tgi_queue_size", "tgi_batch_current_size", "tgi_request_count", "tgi_request_duration"} <= set(
        families
    )
    assert "tgi_request_count 1\n" in text and "tgi_request_success 1\n" in text
    assert "tgi_request_generated_tokens_sum 4\n" in text
    assert 'tgi_batch_inference_count{method="prefill"} 1\n' in text


def test_ollama_has_no_metrics_page(simulate):
    sim = simulate(InstanceSpec(name="o", engine="ollama", served_model_name="llama3.1:8b"))
    response = httpx.get(sim.url("o") + "/metrics")
    assert (response.status_code, response.text) == (404, "404 page not found")
