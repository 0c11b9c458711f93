import asyncio
import json
import time

import pytest

from fleet.probes.outcomes import Outcome
from fleet.probes.scrape import Scrape, derive, parse_exposition, scrape_metrics
from tests.hang import HANG_S, ends
from tests.probes.engines import FAST, SLACK_S, make_target
from tests.probes.servers import app, huge, respond, serve

M = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'

# vLLM 0.7 (V0): vLLM's metrics design-doc sample plus the V0-only series (docs/guide-corrections.md A.1).
V0_7 = f"""# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{M}}} 8.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{{{M}}} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{M}}} 12.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{{{M}}} 0.87
# TYPE vllm:cpu_cache_usage_perc gauge
vllm:cpu_cache_usage_perc{{{M}}} 0.1
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{{{M}}} 0.5
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{{M}}} 4.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{{M}}} 27453.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{finished_reason="stop",{M}}} 1.0
vllm:request_success_total{{finished_reason="length",{M}}} 131.0
vllm:request_success_total{{finished_reason="abort",{M}}} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.001",{M}}} 0.0
vllm:time_to_first_token_seconds_bucket{{le="0.005",{M}}} 0.0
vllm:time_to_first_token_seconds_bucket{{le="0.01",{M}}} 0.0
vllm:time_to_first_token_seconds_bucket{{le="0.02",{M}}} 13.0
vllm:time_to_first_token_seconds_bucket{{le="0.04",{M}}} 97.0
vllm:time_to_first_token_seconds_bucket{{le="0.06",{M}}} 123.0
vllm:time_to_first_token_seconds_bucket{{le="0.08",{M}}} 138.0
vllm:time_to_first_token_seconds_bucket{{le="0.1",{M}}} 140.0
vllm:time_to_first_token_seconds_bucket{{le="+Inf",{M}}} 140.0
vllm:time_to_first_token_seconds_count{{{M}}} 140.0
vllm:time_to_first_token_seconds_sum{{{M}}} 5.6
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{{le="0.01",{M}}} 0.0
vllm:time_per_output_token_seconds_bucket{{le="0.025",{M}}} 900.0
vllm:time_per_output_token_seconds_bucket{{le="+Inf",{M}}} 1000.0
vllm:time_per_output_token_seconds_count{{{M}}} 1000.0
vllm:time_per_output_token_seconds_sum{{{M}}} 20.0
"""

Q = 'model_name="Qwen/Qwen2.5-Coder-32B-Instruct"'
# vLLM 0.8 (early V1), from production-stack#318: the gpu_* names, prefix cache in blocks.
V0_8 = f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{Q}}} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{Q}}} 1.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{{{Q}}} 0.42
# HELP vllm:gpu_prefix_cache_queries_total GPU prefix cache queries, in terms of number of queried blocks.
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{{{Q}}} 200.0
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{{{Q}}} 50.0
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{{le="0.025",{Q}}} 10.0
vllm:time_per_output_token_seconds_bucket{{le="+Inf",{Q}}} 10.0
vllm:time_per_output_token_seconds_count{{{Q}}} 10.0
vllm:time_per_output_token_seconds_sum{{{Q}}} 0.2
"""

E = 'engine="0",model_name="Qwen/Qwen3-8B"'
# vLLM 0.11: new names beside the deprecated ones (both emitted; the new ones must win).
V0_11 = f"""# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{{E}}} 0.61
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{{{E}}} 0.99
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{{E}}} 4000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{{E}}} 1000.0
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{{E},le="0.025"}} 30.0
vllm:inter_token_latency_seconds_bucket{{{E},le="+Inf"}} 30.0
vllm:inter_token_latency_seconds_count{{{E}}} 30.0
vllm:inter_token_latency_seconds_sum{{{E}}} 0.3
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{{{E},le="1.0"}} 30.0
vllm:time_per_output_token_seconds_bucket{{{E},le="+Inf"}} 30.0
vllm:time_per_output_token_seconds_count{{{E}}} 30.0
vllm:time_per_output_token_seconds_sum{{{E}}} 9.0
"""

# Newest: two data-parallel engines (engine label), finished_reason error and repetition.
NEWEST = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4.0
vllm:num_requests_running{engine="1",model_name="m"} 6.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.3
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.8
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 10.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 5.0
vllm:request_success_total{engine="0",finished_reason="error",model_name="m"} 1.0
vllm:request_success_total{engine="0",finished_reason="repetition",model_name="m"} 2.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e9
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_bucket{engine="1",le="1.0",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_count{engine="1",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 7.0
vllm:e2e_request_latency_seconds_sum{engine="1",model_name="m"} 1.0
"""

TGI = """tgi_queue_size 7
tgi_batch_current_size 3
tgi_request_success 40
tgi_request_failure{err="validation"} 2
tgi_request_input_length_sum 5000
tgi_request_generated_tokens_sum 800
tgi_request_duration_bucket{le="1"} 30
tgi_request_duration_bucket{le="+Inf"} 42
tgi_request_duration_sum 40
tgi_request_duration_count 42
"""


def _scrape(text: str, engine: str = "vllm", at: float = 1000.0) -> Scrape:
    return parse_exposition(text, engine=engine, timestamp=at)


def test_vllm_0_7_names_map_to_the_canonical_keys():
    scrape = _scrape(V0_7)
    assert scrape.gauges == {
        "num_requests_running": 8.0,
        "num_requests_swapped": 2.0,
        "num_requests_waiting": 12.0,
        "kv_cache_usage": 0.87,
        "cpu_cache_usage": 0.1,
        "prefix_cache_hit_rate": 0.5,
    }
    assert scrape.counters["preemptions"] == 4.0
    assert scrape.counters["request_success:length"] == 131.0
    assert scrape.sources["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert scrape.sources["itl"] == "vllm:time_per_output_token_seconds"
    assert scrape.histograms["ttft"].count == 140.0
    assert scrape.histograms["ttft"].buckets[-1] == (float("inf"), 140.0)


def test_vllm_0_8_names_map_to_the_same_keys():
    scrape = _scrape(V0_8)
    assert scrape.gauges["kv_cache_usage"] == 0.42
    assert scrape.counters["prefix_cache_queries"] == 200.0
    assert scrape.sources["prefix_cache_hits"] == "vllm:gpu_prefix_cache_hits_total"
    assert "itl" in scrape.histograms


def test_where_0_11_emits_both_generations_the_new_name_wins():
    scrape = _scrape(V0_11)
    assert scrape.gauges["kv_cache_usage"] == 0.61
    assert scrape.sources["itl"] == "vllm:inter_token_latency_seconds"
    assert scrape.histograms["itl"].sum == 0.3
    assert scrape.counters["prefix_cache_hits"] == 1000.0


def test_the_newest_exposition_sums_engines_and_takes_the_fullest_kv_cache():
    scrape = _scrape(NEWEST)
    assert scrape.gauges["num_requests_running"] == 10.0
    assert scrape.gauges["kv_cache_usage"] == 0.8
    assert scrape.counters["request_success:stop"] == 15.0
    assert scrape.counters["request_success:repetition"] == 2.0
    assert dict(scrape.histograms["e2e"].buckets) == {1.0: 4.0, float("inf"): 6.0}


def test_tgi_metrics_map_to_the_canonical_keys_where_they_exist():
    scrape = _scrape(TGI, engine="tgi")
    assert scrape.gauges == {"num_requests_waiting": 7, "num_requests_running": 3}
    assert scrape.counters["prompt_tokens"] == 5000
    assert scrape.counters["request_success:ok"] == 40
    assert scrape.counters["request_success:error"] == 2
    assert scrape.histograms["e2e"].count == 42


def test_derive_turns_counters_into_rates_over_the_window():
    before = _scrape(NEWEST, at=1000.0)
    after_text = NEWEST.replace(
        'finished_reason="stop",model_name="m"} 10.0', 'finished_reason="stop",model_name="m"} 30.0'
    )
    after_text = after_text.replace(
        'finished_reason="error",model_name="m"} 1.0', 'finished_reason="error",model_name="m"} 6.0'
    )
    derived = derive(previous=before, current=_scrape(after_text, at=1010.0))
    assert derived["window_s"] == 10.0
    assert derived["requests_per_s"] == pytest.approx(2.5)  # 20 stop + 5 error in 10 s
    assert derived["request_errors_per_s"] == pytest.approx(0.5)
    assert derived["requests_stop_per_s"] == pytest.approx(2.0)
    assert derived["kv_cache_usage"] == 0.8


def test_a_counter_reset_rates_the_current_value_over_the_window():
    before = _scrape(V0_7, at=1000.0)
    restarted = V0_7.replace(
        "vllm:generation_tokens_total{" + M + "} 27453.0", "vllm:generation_tokens_total{" + M + "} 50.0"
    )
    derived = derive(previous=before, current=_scrape(restarted, at=1005.0))
    assert derived["generation_tokens_per_s"] == pytest.approx(10.0)


def _itl(fast: float, total: float, seconds: float) -> str:
    return f"""# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{{E},le="0.025"}} {fast}
vllm:inter_token_latency_seconds_bucket{{{E},le="0.05"}} {total}
vllm:inter_token_latency_seconds_bucket{{{E},le="+Inf"}} {total}
vllm:inter_token_latency_seconds_count{{{E}}} {total}
vllm:inter_token_latency_seconds_sum{{{E}}} {seconds}
"""


def test_histogram_quantiles_come_from_the_buckets_added_in_the_window():
    before = _scrape(_itl(30, 30, 0.3), at=1000.0)
    # 10 new observations, all in (0.025, 0.05]: p50 is halfway through that bucket.
    derived = derive(previous=before, current=_scrape(_itl(30, 40, 0.7), at=1010.0))
    assert derived["itl_p50_s"] == pytest.approx(0.0375)
    assert derived["itl_p99_s"] == pytest.approx(0.04975)
    assert derived["itl_mean_s"] == pytest.approx(0.04)


def test_a_histogram_reset_uses_the_current_buckets_alone():
    before = _scrape(_itl(300, 400, 12.0), at=1000.0)
    derived = derive(previous=before, current=_scrape(_itl(10, 10, 0.1), at=1010.0))
    assert derived["itl_p50_s"] == pytest.approx(0.0125)
    assert derived["itl_mean_s"] == pytest.approx(0.01)


def test_prefix_cache_hit_rate_is_hits_over_queries_in_the_window():
    before = _scrape(V0_8, at=0.0)
    after = V0_8.replace("} 200.0", "} 300.0").replace("} 50.0", "} 100.0")
    assert derive(previous=before, current=_scrape(after, at=10.0))["prefix_cache_hit_rate"] == pytest.approx(
        0.5
    )


def test_without_a_previous_scrape_only_gauges_are_derived():
    assert derive(previous=None, current=_scrape(V0_8)) == {
        "num_requests_running": 5.0,
        "num_requests_waiting": 1.0,
        "kv_cache_usage": 0.42,
    }


def test_a_scrape_survives_a_json_round_trip():
    scrape = _scrape(V0_7)
    stored = json.loads(json.dumps(scrape.to_dict(), allow_nan=False))
    assert Scrape.from_dict(stored) == scrape


def test_from_dict_refuses_what_is_not_a_scrape():
    with pytest.raises(ValueError, match="not a stored scrape"):
        Scrape.from_dict({"gauges": {}})


def _metrics(body: str | bytes, status: int = 200):
    async def handler(request, writer):
        await respond(writer, status, body, content_type="text/plain")

    return app({"GET /metrics": handler})


@pytest.mark.anyio
async def test_scrape_metrics_reads_and_parses_the_endpoint(http_client):
    async with serve(_metrics(V0_11)) as url:
        result = await scrape_metrics(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.OK
    assert result.scrape.gauges["kv_cache_usage"] == 0.61
    assert result.scrape.timestamp == pytest.approx(time.time(), abs=5)


@pytest.mark.anyio
async def test_malformed_metrics_are_garbage_not_an_exception(http_client):
    async with serve(_metrics("<html><body>502 Bad Gateway</body></html>")) as url:
        result = await scrape_metrics(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.GARBAGE
    assert "not Prometheus text" in result.error


@pytest.mark.anyio
async def test_a_metrics_body_over_the_limit_is_too_large(http_client):
    async with serve(huge(4 * FAST.max_body_bytes, declared=False)) as url:
        started = time.perf_counter()
        result = await scrape_metrics(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.TOO_LARGE
    assert time.perf_counter() - started < FAST.total_deadline_s + SLACK_S


@pytest.mark.anyio
async def test_a_missing_metrics_route_is_a_bad_status(http_client):
    async with serve(app({})) as url:
        result = await scrape_metrics(client=http_client, target=make_target(url), limits=FAST)
    assert (result.outcome, result.status) == (Outcome.BAD_STATUS, 404)


@pytest.mark.anyio
async def test_ollama_has_no_metrics_to_scrape(http_client):
    result = await scrape_metrics(
        client=http_client, target=make_target("http://127.0.0.1:9", "ollama"), limits=FAST
    )
    assert (result.outcome, result.supported, result.scrape) == (Outcome.OK, False, None)


def test_lines_the_console_does_not_read_are_dropped_before_parsing():
    from fleet.probes.exposition import relevant_lines

    text = (
        "# HELP python_gc_objects_collected_total Objects collected during gc\n"
        "# TYPE python_gc_objects_collected_total counter\n"
        'python_gc_objects_collected_total{generation="0"} 1.0\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
    )
    assert relevant_lines(text) == "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3.0\n"


def test_only_the_labels_the_console_reads_reach_the_parser():
    from fleet.probes.exposition import relevant_lines

    text = (
        "# HELP vllm:request_success_total Count of successfully processed requests.\n"
        "# TYPE vllm:request_success_total counter\n"
        'vllm:request_success_total{model_name="a \\"quoted\\", {odd} name",finished_reason="stop"} 4.0\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 2.0 1700000000000\n'
    )
    assert relevant_lines(text) == (
        "# TYPE vllm:request_success_total counter\n"
        'vllm:request_success_total{finished_reason="stop"} 4.0\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="0.5"} 2.0 1700000000000\n'
    )


def test_a_malformed_label_block_makes_the_page_garbage():
    """Both readings: the prober's own (read_samples) and prometheus_client's comparison path."""
    from fleet.probes.exposition import read_samples, relevant_lines

    for read in (read_samples, relevant_lines):
        with pytest.raises(ValueError):
            read('vllm:num_requests_running{engine="0",model_name=m} 3.0\n')
        with pytest.raises(ValueError, match="malformed labels"):
            read('vllm:num_requests_running{engine="0" 3.0\n')


# A bucket line whose value carries a stray quote and brace: cut at its last "}", the label
# block handed to prometheus_client's parse_labels made it loop forever.
STRAY_BRACE = 'vllm:e2e_request_latency_seconds_bucket{le="0.332526"} 0.498789"}\n'


def test_a_label_block_is_cut_at_its_own_closing_brace_not_the_last_one_on_the_line():
    from fleet.probes.exposition import read_samples, relevant_lines

    assert ends(relevant_lines, 'vllm:e2e_request_latency_seconds_bucket{le="0.3"} 0.4 "}"\n') == (
        'vllm:e2e_request_latency_seconds_bucket{le="0.3"} 0.4 "}"\n'
    )  # the parser then refuses the value: see the next test
    assert ends(relevant_lines, 'vllm:num_requests_running{model_name="a}b",le="1"} 2\n') == (
        'vllm:num_requests_running{le="1"} 2\n'
    )
    # the prober's own reader cuts the block at the same brace
    assert ends(read_samples, 'vllm:num_requests_running{model_name="a}b",le="1"} 2\n') == {
        "vllm:num_requests_running": [({"le": "1"}, 2.0)]
    }


@pytest.mark.anyio
async def test_a_bucket_line_with_a_stray_brace_is_garbage_not_a_hang(http_client):
    async with serve(_metrics(V0_11 + STRAY_BRACE)) as url:
        result = await asyncio.wait_for(
            scrape_metrics(client=http_client, target=make_target(url), limits=FAST), HANG_S
        )
    assert result.outcome == Outcome.GARBAGE
    assert "0.498789" in result.error


def test_a_parse_that_outlives_its_deadline_stops_with_parse_deadline():
    from fleet.probes.exposition import ParseDeadline

    with pytest.raises(ParseDeadline):
        parse_exposition(V0_11, engine="vllm", timestamp=0.0, deadline=time.monotonic() - 1)


@pytest.mark.anyio
async def test_a_page_of_more_lines_than_any_engine_writes_is_too_large(http_client):
    from fleet.probes.exposition import MAX_LINES

    async with serve(_metrics("\n" * (MAX_LINES + 1))) as url:  # 200 KB: under the byte limit
        result = await scrape_metrics(client=http_client, target=make_target(url), limits=FAST)
    assert result.outcome == Outcome.TOO_LARGE
    assert str(MAX_LINES) in result.error


def test_a_line_that_is_not_prometheus_text_still_makes_the_page_garbage():
    from fleet.probes.exposition import read_samples, relevant_lines

    for read in (read_samples, relevant_lines):
        with pytest.raises(ValueError, match="not a Prometheus sample line"):
            read("<html><body>502 Bad Gateway</body></html>\n")


def test_the_prober_reads_the_same_samples_as_prometheus_clients_parser():
    """fleet.probes.exposition reads the page itself; prometheus_client's parser (on the
    relevant lines, as before) reads the same samples from every engine's page."""
    from fleet.probes.exposition import read_samples, samples_by_prometheus_client
    from tests.probes.engines import VLLM_METRICS

    for page in [V0_7, V0_11, VLLM_METRICS, *_simulated_pages()]:
        assert read_samples(page) == _total_renamed_back(samples_by_prometheus_client(page))


def _total_renamed_back(samples: dict) -> dict:
    """prometheus_client names a counter's sample `x_total` where the page says `x` (TGI's
    counters); the console's names are the page's own (see the next test)."""
    return {
        name.removesuffix("_total") if name.startswith("tgi_") else name: v for name, v in samples.items()
    }


def test_tgis_request_counters_are_read_by_the_names_on_its_page():
    page = (
        "# TYPE tgi_request_success counter\ntgi_request_success 10\n"
        "# TYPE tgi_request_failure counter\ntgi_request_failure 2\n"
    )
    before = parse_exposition(page, engine="tgi", timestamp=0.0)
    after = parse_exposition(page.replace(" 10", " 40").replace(" 2\n", " 5\n"), engine="tgi", timestamp=10.0)
    derived = derive(previous=before, current=after)
    assert (derived["requests_per_s"], derived["request_errors_per_s"]) == (3.3, 0.3)


def _simulated_pages() -> list[str]:
    """The /metrics page of each of the simulator's engines that has one, as served."""
    from dataclasses import replace

    import httpx

    from fleet.simulator.fleet_runner import SimulatorThread
    from fleet.simulator.spec import specs_for
    from tests.fleet.probing import free_ports

    engines = [s for s in specs_for(10, 1) if s.engine != "ollama"]
    specs = [replace(s, port=port) for s, port in zip(engines, free_ports(len(engines)), strict=True)]
    with SimulatorThread(specs) as sim, httpx.Client(trust_env=False) as client:
        return [client.get(f"http://127.0.0.1:{spec.port}/metrics").text for spec in sim.specs]


def test_a_sample_line_that_is_not_text_format_makes_the_page_garbage():
    from fleet.probes.exposition import read_samples

    for line in [
        "vllm:num_requests_running 1_0",
        "vllm:num_requests_running 1 2 3",
        "vllm:num_requests_running",
    ]:
        with pytest.raises(ValueError):
            read_samples(line + "\n")
    assert read_samples("vllm:num_requests_running NaN\n   \n") == {}
