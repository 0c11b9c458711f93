"""vLLM's newer metrics (0.11 and later) and SGLang's, read into canonical names: waiting by
reason, the sleep state, CacheConfig's labels, the prefix cache per instance, prompt tokens
by source, the request-phase histograms, iteration tokens, finish reasons, speculative
decoding and LoRA adapters; one value per engine where several API-server processes each
export a copy of a gauge (docs/vllm-metrics-judgements.md)."""

import json

import pytest

from fleet.probes.exposition import relevant_lines
from fleet.probes.outcomes import Outcome
from fleet.probes.parts import ProbeKind, ProbeParts
from fleet.probes.scrape import Scrape, ScrapeResult, derive, parse_exposition

M = 'model_name="Qwen/Qwen3-8B"'
SLEEP_HELP = (
    "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
    "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
)
# CacheConfig's fields as labels, every one a string ("None" where unset), plus the engine.
CACHE_CONFIG = ",".join(
    [
        'block_size="16"', 'cache_dtype="auto"', 'calculate_kv_scales="False"', 'cpu_offload_gb="0"',
        'enable_prefix_caching="True"', 'engine="0"', 'gpu_memory_utilization="0.9"',
        'is_attention_free="False"', 'kv_cache_memory_bytes="None"', 'num_cpu_blocks="None"',
        'num_gpu_blocks="27865"', 'num_gpu_blocks_override="None"', 'prefix_caching_hash_algo="sha256"',
        'sliding_window="None"', 'swap_space="4"',
    ]
)  # fmt: skip
LORA_NOW = (
    'max_lora="2",running_lora_adapters="sql-lora,chat-lora",waiting_lora_adapters="chat-lora,law-lora"'
)

# Newest vLLM, one engine: the families of vllm/v1/metrics/loggers.py with their HELP texts,
# label names and buckets (REQUEST_LATENCY, INTER_TOKEN_LATENCY, ITERATION_TOKENS).
NEWEST = f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",{M}}} 6.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",{M}}} 9.0
# HELP vllm:num_requests_waiting_by_reason Number of requests waiting, by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{{engine="0",{M},reason="capacity"}} 2.0
vllm:num_requests_waiting_by_reason{{engine="0",{M},reason="deferred"}} 7.0
# HELP vllm:engine_sleep_state {SLEEP_HELP}
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{{engine="0",{M},sleep_state="awake"}} 1.0
vllm:engine_sleep_state{{engine="0",{M},sleep_state="weights_offloaded"}} 0.0
vllm:engine_sleep_state{{engine="0",{M},sleep_state="discard_all"}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",{M}}} 0.42
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",{M}}} 40000.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",{M}}} 24000.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",{M}}} 40000.0
vllm:prompt_tokens_created{{engine="0",{M}}} 1.7561e+09
# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{{engine="0",{M},source="local_compute"}} 16000.0
vllm:prompt_tokens_by_source_total{{engine="0",{M},source="local_cache_hit"}} 24000.0
vllm:prompt_tokens_by_source_total{{engine="0",{M},source="external_kv_transfer"}} 0.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",{M}}} 9000.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",{M}}} 40.0
vllm:request_success_total{{engine="0",finished_reason="length",{M}}} 8.0
vllm:request_success_total{{engine="0",finished_reason="abort",{M}}} 1.0
vllm:request_success_total{{engine="0",finished_reason="error",{M}}} 0.0
vllm:request_success_total{{engine="0",finished_reason="repetition",{M}}} 1.0
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{{engine="0",le="1.0",{M}}} 0.0
vllm:iteration_tokens_total_bucket{{engine="0",le="8.0",{M}}} 700.0
vllm:iteration_tokens_total_bucket{{engine="0",le="512.0",{M}}} 900.0
vllm:iteration_tokens_total_bucket{{engine="0",le="+Inf",{M}}} 1000.0
vllm:iteration_tokens_total_count{{engine="0",{M}}} 1000.0
vllm:iteration_tokens_total_sum{{engine="0",{M}}} 49000.0
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.01",{M}}} 0.0
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.025",{M}}} 8000.0
vllm:inter_token_latency_seconds_bucket{{engine="0",le="+Inf",{M}}} 8950.0
vllm:inter_token_latency_seconds_count{{engine="0",{M}}} 8950.0
vllm:inter_token_latency_seconds_sum{{engine="0",{M}}} 179.0
# HELP vllm:request_time_per_output_token_seconds Histogram of time_per_output_token_seconds per request.
# TYPE vllm:request_time_per_output_token_seconds histogram
vllm:request_time_per_output_token_seconds_bucket{{engine="0",le="0.025",{M}}} 45.0
vllm:request_time_per_output_token_seconds_bucket{{engine="0",le="+Inf",{M}}} 50.0
vllm:request_time_per_output_token_seconds_count{{engine="0",{M}}} 50.0
vllm:request_time_per_output_token_seconds_sum{{engine="0",{M}}} 1.0
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{{engine="0",le="0.3",{M}}} 30.0
vllm:request_queue_time_seconds_bucket{{engine="0",le="5.0",{M}}} 50.0
vllm:request_queue_time_seconds_bucket{{engine="0",le="+Inf",{M}}} 50.0
vllm:request_queue_time_seconds_count{{engine="0",{M}}} 50.0
vllm:request_queue_time_seconds_sum{{engine="0",{M}}} 20.0
# HELP vllm:request_inference_time_seconds Histogram of time spent in RUNNING phase for request.
# TYPE vllm:request_inference_time_seconds histogram
vllm:request_inference_time_seconds_bucket{{engine="0",le="5.0",{M}}} 50.0
vllm:request_inference_time_seconds_bucket{{engine="0",le="+Inf",{M}}} 50.0
vllm:request_inference_time_seconds_count{{engine="0",{M}}} 50.0
vllm:request_inference_time_seconds_sum{{engine="0",{M}}} 100.0
# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_bucket{{engine="0",le="0.3",{M}}} 40.0
vllm:request_prefill_time_seconds_bucket{{engine="0",le="+Inf",{M}}} 50.0
vllm:request_prefill_time_seconds_count{{engine="0",{M}}} 50.0
vllm:request_prefill_time_seconds_sum{{engine="0",{M}}} 10.0
# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.
# TYPE vllm:request_decode_time_seconds histogram
vllm:request_decode_time_seconds_bucket{{engine="0",le="5.0",{M}}} 50.0
vllm:request_decode_time_seconds_bucket{{engine="0",le="+Inf",{M}}} 50.0
vllm:request_decode_time_seconds_count{{engine="0",{M}}} 50.0
vllm:request_decode_time_seconds_sum{{engine="0",{M}}} 90.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{{CACHE_CONFIG}}} 1.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",{M}}} 1000.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",{M}}} 3000.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",{M}}} 1800.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{M},position="0"}} 800.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{M},position="1"}} 600.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",{M},position="2"}} 400.0
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{{max_lora="2",running_lora_adapters="sql-lora",waiting_lora_adapters=""}} 1.7561e+09
vllm:lora_requests_info{{{LORA_NOW}}} 1.7561001e+09
# HELP http_requests_total Total number of requests by method, status and handler.
# TYPE http_requests_total counter
http_requests_total{{handler="/v1/chat/completions",method="POST",status="2xx"}} 50.0
"""

# --api-server-count 8 before vllm#28792: every API-server process exports its own copy of
# kv_cache_usage_perc (multiprocess "all" mode, a pid label); one holds the value.
PER_PROCESS = """# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="277"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="275"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="273"} 0.6530455880475035
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="271"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="272"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="276"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="274"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-VL-8B-Instruct",pid="278"} 0.0
"""

# Two data-parallel engines seen by two API-server processes each: the copies of one
# engine are one value (the largest), the engines add up.
DP_PER_PROCESS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m",pid="11"} 5.0
vllm:num_requests_running{engine="0",model_name="m",pid="12"} 4.0
vllm:num_requests_running{engine="1",model_name="m",pid="11"} 0.0
vllm:num_requests_running{engine="1",model_name="m",pid="12"} 7.0
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",pid="11",reason="capacity"} 3.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",pid="12",reason="capacity"} 3.0
vllm:num_requests_waiting_by_reason{engine="1",model_name="m",pid="12",reason="capacity"} 1.0
"""

# SGLang (python/sglang/srt/metrics/collector.py): scheduler gauges and tokenizer counters
# and histograms, labelled by model and rank.
S = 'engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"'
SGLANG = f"""# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{{S}}} 12.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{{S}}} 3.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{{S}}} 0.71
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{{{S}}} 1450.5
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{{{S}}} 0.38
# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{{{S}}} 412000.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{{S}}} 250000.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{{S}}} 81000.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{{S},le="0.1"}} 10.0
sglang:time_to_first_token_seconds_bucket{{{S},le="0.2"}} 90.0
sglang:time_to_first_token_seconds_bucket{{{S},le="+Inf"}} 100.0
sglang:time_to_first_token_seconds_count{{{S}}} 100.0
sglang:time_to_first_token_seconds_sum{{{S}}} 16.0
# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE sglang:inter_token_latency_seconds histogram
sglang:inter_token_latency_seconds_bucket{{{S},le="0.01"}} 700.0
sglang:inter_token_latency_seconds_bucket{{{S},le="0.015"}} 1000.0
sglang:inter_token_latency_seconds_bucket{{{S},le="+Inf"}} 1000.0
sglang:inter_token_latency_seconds_count{{{S}}} 1000.0
sglang:inter_token_latency_seconds_sum{{{S}}} 9.0
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{{S},le="1.0"}} 20.0
sglang:e2e_request_latency_seconds_bucket{{{S},le="+Inf"}} 100.0
sglang:e2e_request_latency_seconds_count{{{S}}} 100.0
sglang:e2e_request_latency_seconds_sum{{{S}}} 310.0
"""


def sleeping(level: int, engines: int = 1) -> str:
    states = {"awake": int(level == 0), "weights_offloaded": int(level == 1), "discard_all": int(level == 2)}
    lines = ["# TYPE vllm:engine_sleep_state gauge"]
    for engine in range(engines):
        for state, value in states.items():
            lines.append(f'vllm:engine_sleep_state{{engine="{engine}",{M},sleep_state="{state}"}} {value}.0')
    return "\n".join(lines) + "\n"


def scrape(text: str, at: float = 1000.0, engine: str = "vllm") -> Scrape:
    return parse_exposition(text, engine=engine, timestamp=at)


def grown(text: str, **values: tuple[str, str]) -> str:
    """The page with some samples' values replaced: name=(old line tail, new line tail)."""
    for old, new in values.values():
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_waiting_by_reason_is_read_per_reason():
    gauges = scrape(NEWEST).gauges
    assert gauges["num_requests_waiting"] == 9.0
    assert gauges["num_requests_waiting_capacity"] == 2.0
    assert gauges["num_requests_waiting_deferred"] == 7.0


def test_both_reasons_have_a_value_once_the_family_is_on_the_page():
    page = "# TYPE vllm:num_requests_waiting_by_reason gauge\n" + (
        f'vllm:num_requests_waiting_by_reason{{engine="0",{M},reason="capacity"}} 4.0\n'
    )
    gauges = scrape(page).gauges
    assert (gauges["num_requests_waiting_capacity"], gauges["num_requests_waiting_deferred"]) == (4.0, 0.0)
    assert "num_requests_waiting_capacity" not in scrape("vllm:num_requests_waiting 4\n").gauges


def test_the_sleep_state_is_a_level():
    assert scrape(NEWEST).gauges["engine_sleep_level"] == 0.0
    assert scrape(sleeping(1)).gauges["engine_sleep_level"] == 1.0
    assert scrape(sleeping(2, engines=2)).gauges["engine_sleep_level"] == 2.0
    assert scrape(sleeping(1)).sources["engine_sleep_level"] == "vllm:engine_sleep_state"
    assert "engine_sleep_level" not in scrape(PER_PROCESS).gauges  # versions without the gauge


def test_an_engine_not_awake_without_a_level_is_asleep_at_level_one():
    page = "# TYPE vllm:engine_sleep_state gauge\n" + (
        f'vllm:engine_sleep_state{{engine="0",{M},sleep_state="awake"}} 0.0\n'
    )
    assert scrape(page).gauges["engine_sleep_level"] == 1.0


def test_cache_config_info_labels_become_values_the_sizing_check_reads():
    gauges = scrape(NEWEST).gauges
    assert gauges["num_gpu_blocks"] == 27865.0
    assert gauges["block_size"] == 16.0
    assert gauges["gpu_memory_utilization"] == 0.9
    assert gauges["prefix_caching_enabled"] == 1.0
    assert gauges["kv_capacity_tokens"] == 27865.0 * 16
    assert "kv_cache_memory_bytes" not in gauges  # "None": not set


def test_a_cache_config_with_odd_label_values_reads_what_it_can():
    page = (
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="16",engine="0",gpu_memory_utilization="nan",'
        'num_gpu_blocks="None",kv_cache_memory_bytes="8589934592"} 1.0\n'
    )
    gauges = scrape(page).gauges
    assert gauges == {"block_size": 16.0, "kv_cache_memory_bytes": 8589934592.0}


def test_the_latest_lora_series_says_which_adapters_run_and_wait():
    result = scrape(NEWEST)
    gauges = result.gauges
    assert gauges["lora_max_adapters"] == 2.0
    assert gauges["lora_running_adapters"] == 2.0
    assert gauges["lora_waiting_adapters"] == 2.0
    assert gauges["lora_starved_adapters"] == 1.0  # law-lora waits and does not run
    assert result.info == {
        "lora_running": "sql-lora,chat-lora",
        "lora_waiting": "chat-lora,law-lora",
        "lora_starved": "law-lora",
    }


def test_the_request_phase_histograms_and_the_per_request_tpot_are_read():
    histograms = scrape(NEWEST).histograms
    for name in ("queue_time", "prefill_time", "decode_time", "inference_time", "request_tpot", "itl"):
        assert name in histograms, name
    assert histograms["prefill_time"].count == 50.0 and histograms["prefill_time"].buckets
    # the decode and inference times and the per-request TPOT are read for their mean alone
    assert (histograms["decode_time"].buckets, histograms["decode_time"].sum) == ((), 90.0)
    assert histograms["request_tpot"].count == 50.0
    assert scrape(NEWEST).sources["itl"] == "vllm:inter_token_latency_seconds"


def test_inter_token_latency_falls_back_to_time_per_output_token():
    old = NEWEST.replace("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
    assert scrape(old).sources["itl"] == "vllm:time_per_output_token_seconds"
    assert scrape(old).histograms["itl"].count == 8950.0


def test_finish_reasons_and_iteration_tokens_are_counters():
    counters = scrape(NEWEST).counters
    assert counters["request_success:repetition"] == 1.0
    assert counters["request_success:error"] == 0.0
    assert (counters["engine_steps"], counters["scheduled_tokens"]) == (1000.0, 49000.0)
    assert counters["prompt_tokens_by_source:local_cache_hit"] == 24000.0
    assert counters["spec_decode_accepted_at:2"] == 400.0


def test_a_gauge_every_api_server_process_exports_is_its_largest_copy():
    assert scrape(PER_PROCESS).gauges["kv_cache_usage"] == pytest.approx(0.6530455880475035)


def test_copies_of_one_engine_are_maxed_and_engines_are_summed():
    gauges = scrape(DP_PER_PROCESS).gauges
    assert gauges["num_requests_running"] == 12.0  # max(5, 4) + max(0, 7)
    assert gauges["num_requests_waiting_capacity"] == 4.0  # max(3, 3) + 1


def test_process_labels_reach_the_parser_only_with_a_pid():
    assert relevant_lines(DP_PER_PROCESS).splitlines()[1] == (
        'vllm:num_requests_running{engine="0",pid="11"} 5.0'
    )
    single = "# TYPE vllm:num_requests_running gauge\n" + f'vllm:num_requests_running{{engine="0",{M}}} 3.0\n'
    assert relevant_lines(single).splitlines()[1] == "vllm:num_requests_running 3.0"


def test_the_window_derives_hit_rate_sources_spec_decode_and_phases():
    later_page = grown(
        NEWEST,
        queries=(
            f'vllm:prefix_cache_queries_total{{engine="0",{M}}} 40000.0',
            "vllm:prefix_cache_queries_total 50000.0",
        ),
        hits=(
            f'vllm:prefix_cache_hits_total{{engine="0",{M}}} 24000.0',
            "vllm:prefix_cache_hits_total 26000.0",
        ),
        computed=('source="local_compute"} 16000.0', 'source="local_compute"} 24000.0'),
        cached=('source="local_cache_hit"} 24000.0', 'source="local_cache_hit"} 26000.0'),
        drafts=(
            f'vllm:spec_decode_num_drafts_total{{engine="0",{M}}} 1000.0',
            "vllm:spec_decode_num_drafts_total 1500.0",
        ),
        drafted=(
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0",{M}}} 3000.0',
            "vllm:spec_decode_num_draft_tokens_total 4500.0",
        ),
        accepted=(
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",{M}}} 1800.0',
            "vllm:spec_decode_num_accepted_tokens_total 2100.0",
        ),
        first=('position="0"} 800.0', 'position="0"} 1000.0'),
        steps_count=(
            f'vllm:iteration_tokens_total_count{{engine="0",{M}}} 1000.0',
            "vllm:iteration_tokens_total_count 1100.0",
        ),
        steps_sum=(
            f'vllm:iteration_tokens_total_sum{{engine="0",{M}}} 49000.0',
            "vllm:iteration_tokens_total_sum 59000.0",
        ),
        prefill_count=(
            f'vllm:request_prefill_time_seconds_count{{engine="0",{M}}} 50.0',
            "vllm:request_prefill_time_seconds_count 60.0",
        ),
        prefill_sum=(
            f'vllm:request_prefill_time_seconds_sum{{engine="0",{M}}} 10.0',
            "vllm:request_prefill_time_seconds_sum 15.0",
        ),
        prefill_inf=(
            f'vllm:request_prefill_time_seconds_bucket{{engine="0",le="+Inf",{M}}} 50.0',
            'vllm:request_prefill_time_seconds_bucket{le="+Inf"} 60.0',
        ),
        decode_count=(
            f'vllm:request_decode_time_seconds_count{{engine="0",{M}}} 50.0',
            "vllm:request_decode_time_seconds_count 60.0",
        ),
        decode_sum=(
            f'vllm:request_decode_time_seconds_sum{{engine="0",{M}}} 90.0',
            "vllm:request_decode_time_seconds_sum 110.0",
        ),
    )
    d = derive(previous=scrape(NEWEST, at=1000.0), current=scrape(later_page, at=1010.0))
    assert d["prefix_cache_hit_rate"] == pytest.approx(0.2)  # 2,000 of 10,000 tokens
    assert d["prompt_tokens_local_compute_per_s"] == pytest.approx(800.0)
    assert d["prompt_tokens_local_cache_hit_per_s"] == pytest.approx(200.0)
    assert d["prompt_tokens_external_kv_transfer_per_s"] == 0.0
    assert d["spec_decode_acceptance_rate"] == pytest.approx(300 / 1500)
    assert d["spec_decode_mean_accepted_tokens"] == pytest.approx(300 / 500)
    assert d["spec_decode_mean_acceptance_length"] == pytest.approx(1.6)
    assert d["spec_decode_draft_length"] == pytest.approx(3.0)
    assert d["spec_decode_accepted_at_0"] == pytest.approx(200 / 500)
    assert d["spec_decode_accepted_at_1"] == 0.0
    assert d["iteration_tokens_mean"] == pytest.approx(100.0)
    assert d["prefill_time_mean_s"] == pytest.approx(0.5)
    assert d["prefill_time_p50_s"] > 0
    assert d["num_gpu_blocks"] == 27865.0  # gauges come through
    assert d["decode_time_mean_s"] == pytest.approx(2.0)
    assert "decode_time_p50_s" not in d  # no buckets read
    assert "lora_running" not in d  # names are not figures


def test_sglang_names_map_to_the_canonical_keys():
    result = scrape(SGLANG, engine="sglang")
    assert result.gauges == {
        "num_requests_running": 12.0,
        "num_requests_waiting": 3.0,
        "kv_cache_usage": 0.71,
        "gen_throughput": 1450.5,
        "prefix_cache_hit_rate": 0.38,
        "kv_capacity_tokens": 412000.0,
    }
    assert result.counters == {"prompt_tokens": 250000.0, "generation_tokens": 81000.0}
    assert set(result.histograms) == {"ttft", "itl", "e2e"}
    assert result.sources["itl"] == "sglang:inter_token_latency_seconds"
    later_page = SGLANG.replace("} 81000.0", "} 82000.0").replace("sum{" + S + "} 9.0", "sum{" + S + "} 10.0")
    later_page = later_page.replace('le="0.015"} 1000.0', 'le="0.015"} 1100.0')
    later_page = later_page.replace('le="+Inf"} 1000.0', 'le="+Inf"} 1100.0')
    later_page = later_page.replace("count{" + S + "} 1000.0", "count{" + S + "} 1100.0")
    d = derive(previous=result, current=scrape(later_page, at=1010.0, engine="sglang"))
    assert d["generation_tokens_per_s"] == pytest.approx(100.0)
    assert d["itl_mean_s"] == pytest.approx(0.01)
    assert d["prefix_cache_hit_rate"] == 0.38  # the gauge: SGLang has no query counters


def test_sglang_ranks_add_up_and_usage_takes_the_fullest():
    two = SGLANG + SGLANG.replace('tp_rank="0"', 'tp_rank="0",dp_rank="1"').replace("} 0.71", "} 0.9")
    gauges = scrape(two, engine="sglang").gauges
    assert gauges["num_requests_running"] == 24.0
    assert gauges["kv_cache_usage"] == 0.9
    assert gauges["kv_capacity_tokens"] == 412000.0


def test_the_info_survives_the_stored_scrape_and_the_stored_result():
    result = scrape(NEWEST)
    assert Scrape.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    stored = ScrapeResult(outcome=Outcome.OK, info=dict(result.info), scrape=result)
    parts = ProbeParts(scrape_result=stored, derived={"lora_starved_adapters": 1.0})
    back = ProbeParts.from_kind_dicts(json.loads(json.dumps(parts.to_kind_dicts([ProbeKind.METRICS]))))
    assert back.scrape_result.info["lora_starved"] == "law-lora"
    assert back.scrape_result.scrape is None


def test_an_older_stored_scrape_without_info_still_reads():
    data = scrape(NEWEST).to_dict()
    del data["info"]
    assert Scrape.from_dict(data).info == {}
