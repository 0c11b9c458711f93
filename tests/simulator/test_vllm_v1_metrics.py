"""The newer vLLM metrics on the simulated /metrics page, by version: which names a release
shows, their types, labels and HELP texts, vLLM's deprecation policy (DEPRECATED, then
hidden, then gone), the cache_config_info fields, speculative decoding and LoRA families,
and the multiprocess page of --api-server-count > 1. Every page is scraped over HTTP from a
running simulated instance and read back with prometheus_client's parser.
(docs/vllm-metrics.md has the table these tests state.)"""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fleet.simulator.engine import EngineFeatures
from fleet.simulator.instance import new_engine
from fleet.simulator.metrics import MetricsSource, api_server_pids, render_vllm_metrics, vllm_metric_families
from fleet.simulator.spec import InstanceSpec, LoadProfile, SpecError
from fleet.simulator.traffic import Traffic
from tests.simulator.conftest import wait_for

# Each metric's first release and the release it is gone from (None: still there), as the
# deprecation policy and the pull requests in docs/vllm-metrics.md §1 put them.
LIFETIMES = {
    "vllm:gpu_cache_usage_perc": ("0.7.0", "0.11.0"),  # deprecated 0.10, hidden 0.11, removed 0.12
    "vllm:gpu_prefix_cache_queries": ("0.8.0", "0.11.0"),
    "vllm:kv_cache_usage_perc": ("0.9.2", None),
    "vllm:prefix_cache_queries": ("0.9.2", None),
    "vllm:prefix_cache_hits": ("0.9.2", None),
    "vllm:inter_token_latency_seconds": ("0.10.2", None),
    "vllm:request_time_per_output_token_seconds": ("0.10.2", None),
    "vllm:time_per_output_token_seconds": ("0.7.0", "0.12.0"),  # deprecated 0.11, hidden 0.12, removed 0.13
    "vllm:engine_sleep_state": ("0.11.1", None),
    "vllm:prompt_tokens_by_source": ("0.16.0", None),
    "vllm:prompt_tokens_cached": ("0.16.0", None),
    "vllm:num_requests_waiting_by_reason": ("0.20.0", None),
}
ALWAYS = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:iteration_tokens_total": "histogram",
    "vllm:request_success": "counter",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:cache_config_info": "gauge",
}
VERSIONS = ["0.9.1", "0.9.2", "0.10.1", "0.10.2", "0.11.0", "0.11.2", "0.12.0", "0.13.0", "0.15.1", "0.16.0"]
VERSIONS += ["0.19.1", "0.20.0", "0.22.0"]


def _v(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split("."))


def _scrape(sim, name: str = "m") -> dict:
    response = httpx.get(sim.url(name) + "/metrics")
    assert response.status_code == 200
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def _page(simulate, **fields) -> dict:
    return _scrape(simulate(InstanceSpec(name="m", served_model_name="org/model", **fields)))


def _values(family, *, label: str, suffix: str = "") -> dict[str, float]:
    return {s.labels[label]: s.value for s in family.samples if s.name == family.name + suffix}


@pytest.mark.parametrize("version", VERSIONS)
def test_each_metric_is_on_the_page_from_the_release_that_added_it_until_the_one_that_dropped_it(
    simulate, version
):
    families = _page(simulate, version=version)
    for name, (first, gone) in LIFETIMES.items():
        expected = _v(version) >= _v(first) and (gone is None or _v(version) < _v(gone))
        assert (name in families) == expected, f"{name} on {version}"
    for name, kind in ALWAYS.items():
        assert families[name].type == kind


def test_a_deprecated_metric_says_so_in_its_help_a_release_before_it_is_hidden(simulate):
    old = _page(simulate, version="0.9.1")["vllm:gpu_cache_usage_perc"]
    assert old.documentation == "GPU KV-cache usage. 1 means 100 percent usage."
    deprecated = _page(simulate, version="0.10.1")
    assert deprecated["vllm:gpu_cache_usage_perc"].documentation == (
        "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead."
    )
    assert deprecated["vllm:gpu_prefix_cache_queries"].documentation == (
        "GPU prefix cache queries, in terms of number of queriedtokens. "
        "DEPRECATED: Use vllm:prefix_cache_queries instead."
    )
    tpot = _page(simulate, version="0.11.2")["vllm:time_per_output_token_seconds"]
    assert tpot.documentation == (
        "Histogram of time per output token in seconds."
        "DEPRECATED: Use vllm:inter_token_latency_seconds instead."
    )


@pytest.mark.parametrize(
    ("version", "show_hidden", "name"),
    [
        ("0.11.2", "0.10", "vllm:gpu_cache_usage_perc"),
        ("0.11.2", "0.10", "vllm:gpu_prefix_cache_hits"),
        ("0.12.0", "0.11", "vllm:time_per_output_token_seconds"),
    ],
)
def test_a_hidden_metric_comes_back_deprecated_with_show_hidden_metrics_for_version(
    simulate, version, show_hidden, name
):
    assert name not in _page(simulate, version=version)
    families = _page(simulate, version=version, show_hidden_metrics_for_version=show_hidden)
    assert families[name].documentation.endswith("instead.")
    assert "DEPRECATED: Use" in families[name].documentation


def test_a_removed_metric_stays_gone_whatever_the_escape_hatch_says(simulate):
    assert "vllm:gpu_cache_usage_perc" not in _page(
        simulate, version="0.12.0", show_hidden_metrics_for_version="0.11"
    )
    assert "vllm:time_per_output_token_seconds" not in _page(
        simulate, version="0.13.0", show_hidden_metrics_for_version="0.12"
    )


def test_show_hidden_metrics_for_version_must_name_the_release_before_the_running_one():
    with pytest.raises(
        SpecError, match="show_hidden_metrics_for_version: vLLM accepts only the release before"
    ):
        InstanceSpec(name="m", version="0.11.2", show_hidden_metrics_for_version="0.9")


def test_the_newest_gauges_and_counters_have_vllms_types_labels_and_help(simulate):
    families = _page(simulate, version="0.20.0")
    waiting = families["vllm:num_requests_waiting_by_reason"]
    assert waiting.type == "gauge"
    assert waiting.documentation.startswith("Number of waiting requests by reason.")
    assert {s.labels["reason"] for s in waiting.samples} == {"capacity", "deferred"}
    assert all(
        set(s.labels) == {"engine", "model_name", "reason"} and s.labels["model_name"] == "org/model"
        for s in waiting.samples
    )
    sleep = families["vllm:engine_sleep_state"]
    assert sleep.type == "gauge"
    assert _values(sleep, label="sleep_state") == {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0}
    kv = families["vllm:kv_cache_usage_perc"]
    assert (kv.type, kv.documentation) == ("gauge", "KV-cache usage. 1 means 100 percent usage.")
    assert [set(s.labels) for s in kv.samples] == [{"engine", "model_name"}]
    for name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:prompt_tokens_cached"):
        assert families[name].type == "counter"
        assert {s.name for s in families[name].samples} == {f"{name}_total"}
        assert f"{name}_created" in families  # written as a gauge family of its own
    by_source = families["vllm:prompt_tokens_by_source"]
    assert (by_source.type, by_source.documentation) == ("counter", "Number of prompt tokens by source.")
    assert set(_values(by_source, label="source", suffix="_total")) == {
        "local_compute",
        "local_cache_hit",
        "external_kv_transfer",
    }
    reasons = _values(families["vllm:request_success"], label="finished_reason", suffix="_total")
    assert set(reasons) == {"stop", "length", "abort", "error", "repetition"}


def test_the_request_phase_histograms_use_vllms_buckets(simulate):
    families = _page(simulate, version="0.20.0")
    for name in (
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds",
    ):
        bounds = [s.labels["le"] for s in families[name].samples if s.name.endswith("_bucket")]
        assert (bounds[0], bounds[-2], bounds[-1]) == ("0.3", "7680.0", "+Inf"), name
    for name in ("vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"):
        bounds = [s.labels["le"] for s in families[name].samples if s.name.endswith("_bucket")]
        assert (bounds[0], bounds[-2]) == ("0.01", "80.0"), name
    iteration = [
        s.labels["le"] for s in families["vllm:iteration_tokens_total"].samples if s.name.endswith("_bucket")
    ]
    assert iteration[:3] == ["1.0", "8.0", "16.0"] and iteration[-2] == "16384.0"


def test_cache_config_info_carries_the_sizing_the_engine_started_with(simulate):
    spec = InstanceSpec(
        name="m", version="0.22.0", gpu_memory_utilization=0.85, block_size=32, max_model_len=8192
    )
    labels = _scrape(simulate(spec))["vllm:cache_config_info"].samples[0].labels
    assert labels["num_gpu_blocks"] == str(spec.num_gpu_blocks)
    assert (labels["block_size"], labels["gpu_memory_utilization"], labels["engine"]) == ("32", "0.85", "0")
    assert labels["kv_cache_size_tokens"] == str(spec.num_gpu_blocks * 32)
    assert float(labels["kv_cache_max_concurrency"]) == pytest.approx(
        spec.num_gpu_blocks * 32 / 8192, abs=0.01
    )
    assert "model_name" not in labels and "swap_space" not in labels  # --swap-space left in 0.18.0


def test_cache_config_info_fields_follow_the_version(simulate):
    older = _page(simulate, version="0.11.2")["vllm:cache_config_info"].samples[0].labels
    assert {"swap_space", "kv_cache_memory_bytes", "prefix_caching_hash_algo"} <= set(older)
    assert "kv_cache_size_tokens" not in older
    assert (
        "kv_cache_memory_bytes"
        not in _page(simulate, version="0.10.1")["vllm:cache_config_info"].samples[0].labels
    )


def test_speculative_decoding_counters_appear_only_when_the_instance_runs_it(simulate):
    plain = _page(simulate, version="0.11.2")
    assert not [name for name in plain if name.startswith("vllm:spec_decode")]
    families = _page(simulate, version="0.11.2", num_speculative_tokens=3)
    expected = {
        "vllm:spec_decode_num_drafts": "Number of spec decoding drafts.",
        "vllm:spec_decode_num_draft_tokens": "Number of draft tokens.",
        "vllm:spec_decode_num_accepted_tokens": "Number of accepted tokens.",
        "vllm:spec_decode_num_accepted_tokens_per_pos": "Accepted tokens per draft position.",
    }
    for name, help_text in expected.items():
        assert (families[name].type, families[name].documentation) == ("counter", help_text)
    per_pos = families["vllm:spec_decode_num_accepted_tokens_per_pos"]
    assert set(_values(per_pos, label="position", suffix="_total")) == {"0", "1", "2"}
    early = _page(simulate, version="0.8.5", num_speculative_tokens=3)
    assert {n for n in early if n.startswith("vllm:spec_decode") and not n.endswith("_created")} == {
        "vllm:spec_decode_num_draft_tokens",
        "vllm:spec_decode_num_accepted_tokens",
    }


def test_lora_requests_info_appears_only_with_lora_adapters(simulate):
    assert "vllm:lora_requests_info" not in _page(simulate, version="0.11.2")
    family = _page(simulate, version="0.11.2", lora_adapters=("sql", "chat"))["vllm:lora_requests_info"]
    assert (family.type, family.documentation) == ("gauge", "Running stats on lora requests.")


def test_with_several_api_servers_kv_usage_is_one_series_per_process_up_to_0_11(simulate):
    load = LoadProfile(requests_per_s=40, mean_prompt_tokens=2000, mean_output_tokens=400)
    spec = InstanceSpec(name="m", version="0.11.2", api_server_count=4, load=load, max_num_seqs=8)
    sim = simulate(spec)

    def kv_series() -> list:
        return _scrape(sim)["vllm:kv_cache_usage_perc"].samples

    wait_for(lambda: max(s.value for s in kv_series()) > 0, timeout_s=10, what="KV usage above 0")
    series = kv_series()
    assert sorted(s.labels["pid"] for s in series) == sorted(str(pid) for pid in api_server_pids(spec))
    assert sum(s.value > 0 for s in series) == 1  # the process that got the engine's stats; the others 0
    families = _scrape(sim)
    running = families["vllm:num_requests_running"].samples
    assert [set(s.labels) for s in running] == [{"engine", "model_name"}]  # multiprocess_mode="mostrecent"
    assert not [s for family in families.values() for s in family.samples if s.name.endswith("_created")]
    assert "process_start_time_seconds" not in families


def test_from_0_12_kv_usage_is_one_series_whatever_the_api_server_count(simulate):
    kv = _page(simulate, version="0.12.0", api_server_count=4)["vllm:kv_cache_usage_perc"]
    assert [set(s.labels) for s in kv.samples] == [{"engine", "model_name"}]


def test_the_newer_families_are_byte_for_byte_what_prometheus_client_writes():
    for api_servers in (1, 3):
        spec = InstanceSpec(
            name="m",
            version="0.22.0",
            num_speculative_tokens=2,
            lora_adapters=("sql", "chat"),
            api_server_count=api_servers,
        )
        engine = new_engine(spec, now=0.0)
        engine.features = EngineFeatures(spec_tokens=2, lora_adapters=("sql", "chat"), hold_deferred=2)
        traffic = Traffic(engine=engine, max_model_len=spec.max_model_len, seed=1, now=0.0)
        traffic.set_stream(LoadProfile(requests_per_s=50, prefix_hit_rate=0.3), now=0.0)
        for step in range(1, 200):
            traffic.generate(step * 0.02)
            engine.advance(step * 0.02)
        source = MetricsSource(
            spec=spec,
            engine=engine,
            http_requests=Counter({("/v1/x", "POST", "2xx"): 3}),
            process_start=1.5e9,
        )

        assert render_vllm_metrics(source) == generate_latest(_Collector(source))


class _Collector:
    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def collect(self):
        return vllm_metric_families(self.source)
