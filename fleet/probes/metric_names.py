"""Canonical metric names, and the wire names each one is read from.

vLLM renamed metrics between versions (corrections #5, A.1 in docs/guide-corrections.md), so a scrape
is keyed by canonical names and both generations land on the same key. Where a server
emits both names (0.9–0.10 emit the deprecated one beside the new one), the first wire
name listed wins. TGI's `tgi_*` and SGLang's `sglang:*` equivalents are mapped where they
exist; Ollama has no /metrics. The names stay one table (a page is read the same way whoever
wrote it); each engine's dialect (fleet/probes/engines/) says whether it has /metrics at
all and the prefix of the names it exports, and scrape.py asks it before scraping.
docs/vllm-metrics-judgements.md gives the sources of the newer names and of the rules below.

Series of one gauge that differ only by a `pid` label are one value seen by several
processes (prometheus_client's multiprocess "all" mode, used by vLLM with
--api-server-count > 1 for a gauge registered without multiprocess_mode, such as
kv_cache_usage_perc before vllm#28792): the largest is taken. What remains is summed over
engines (data-parallel ranks are distinct engines), except the gauges marked max, where
the fullest engine is the one that matters or every engine reports the same figure.

Gauges:
  num_requests_running   vllm:num_requests_running | tgi_batch_current_size | sglang:num_running_reqs
  num_requests_waiting   vllm:num_requests_waiting | tgi_queue_size | sglang:num_queue_reqs
  num_requests_swapped   vllm:num_requests_swapped                (0.7 / V0 only)
  kv_cache_usage         vllm:kv_cache_usage_perc | vllm:gpu_cache_usage_perc
                         | sglang:token_usage                                (0..1, max)
  cpu_cache_usage        vllm:cpu_cache_usage_perc                (0.7 / V0 only, max)
  prefix_cache_hit_rate  vllm:gpu_prefix_cache_hit_rate (0.7) | sglang:cache_hit_rate
                         (max; from vLLM 0.8 derived from the counters instead)
  batch_max_tokens       tgi_batch_current_max_tokens
  gen_throughput         sglang:gen_throughput                    (tokens/s, summed over DP ranks)
  kv_capacity_tokens     sglang:max_total_num_tokens (max); for vLLM num_gpu_blocks × block_size
  num_requests_waiting_<reason>   vllm:num_requests_waiting_by_reason{reason}: _capacity
                         (waiting for KV cache or batch room) and _deferred (held back by the
                         LoRA budget or a pending KV transfer); both keys are set once the
                         family is on the page
  engine_sleep_level     vllm:engine_sleep_state{sleep_state}: 0 awake, 1 weights_offloaded,
                         2 discard_all (max over engines)
  num_gpu_blocks, block_size, gpu_memory_utilization, prefix_caching_enabled (0/1),
  kv_cache_memory_bytes  labels of vllm:cache_config_info (its value is always 1; max over
                         engines: every engine of one server has the same CacheConfig)
  lora_max_adapters, lora_running_adapters, lora_waiting_adapters, lora_starved_adapters
                         labels of vllm:lora_requests_info (max_lora and the comma-joined
                         adapter names of its latest series: the one whose value, a
                         timestamp, is largest); starved = waiting and not running. The
                         names themselves go to Scrape.info (lora_running, lora_waiting).

Counters (cumulative; `derive` turns them into per-second rates):
  prompt_tokens          vllm:prompt_tokens_total | tgi_request_input_length_sum | sglang:prompt_tokens_total
  generation_tokens      vllm:generation_tokens_total | tgi_request_generated_tokens_sum
                         | sglang:generation_tokens_total
  preemptions            vllm:num_preemptions_total
  prefix_cache_queries   vllm:prefix_cache_queries_total | vllm:gpu_prefix_cache_queries_total
  prefix_cache_hits      vllm:prefix_cache_hits_total | vllm:gpu_prefix_cache_hits_total
  engine_steps, scheduled_tokens   vllm:iteration_tokens_total's _count and _sum
  spec_decode_drafts     vllm:spec_decode_num_drafts_total
  spec_decode_draft_tokens   vllm:spec_decode_num_draft_tokens_total
  spec_decode_accepted_tokens   vllm:spec_decode_num_accepted_tokens_total
  request_success:<reason>  vllm:request_success_total{finished_reason}; TGI:
                         tgi_request_success → request_success:ok,
                         tgi_request_failure → request_success:error
  (There is no vllm:request_failure_total; failures are finished_reason abort | error.)
  prompt_tokens_by_source:<source>   vllm:prompt_tokens_by_source_total{source}
                         (local_compute, local_cache_hit, external_kv_transfer)
  spec_decode_accepted_at:<position>   vllm:spec_decode_num_accepted_tokens_per_pos_total{position}

Histograms (buckets summed by le over series, like `sum by (le)`):
  ttft             vllm:time_to_first_token_seconds | sglang:time_to_first_token_seconds
  itl              vllm:inter_token_latency_seconds | vllm:time_per_output_token_seconds
                   | tgi_request_mean_time_per_token_duration | sglang:inter_token_latency_seconds
  request_tpot     vllm:request_time_per_output_token_seconds  (per-request mean)
  e2e              vllm:e2e_request_latency_seconds | tgi_request_duration
                   | sglang:e2e_request_latency_seconds
  queue_time       vllm:request_queue_time_seconds | tgi_request_queue_duration
  prefill_time     vllm:request_prefill_time_seconds
  decode_time      vllm:request_decode_time_seconds
  inference_time   vllm:request_inference_time_seconds | tgi_request_inference_duration
  prompt_length    vllm:request_prompt_tokens | tgi_request_input_length       (tokens)
  generation_length  vllm:request_generation_tokens | tgi_request_generated_tokens (tokens)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricName:
    canonical: str
    wire: tuple[str, ...]
    aggregate: str = "sum"  # or "max"


GAUGES = (
    MetricName(
        "num_requests_running",
        ("vllm:num_requests_running", "tgi_batch_current_size", "sglang:num_running_reqs"),
    ),
    MetricName(
        "num_requests_waiting", ("vllm:num_requests_waiting", "tgi_queue_size", "sglang:num_queue_reqs")
    ),
    MetricName("num_requests_swapped", ("vllm:num_requests_swapped",)),
    MetricName(
        "kv_cache_usage",
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
        "max",
    ),
    MetricName("cpu_cache_usage", ("vllm:cpu_cache_usage_perc",), "max"),
    MetricName("prefix_cache_hit_rate", ("vllm:gpu_prefix_cache_hit_rate", "sglang:cache_hit_rate"), "max"),
    MetricName("batch_max_tokens", ("tgi_batch_current_max_tokens",)),
    MetricName("gen_throughput", ("sglang:gen_throughput",)),
    MetricName("kv_capacity_tokens", ("sglang:max_total_num_tokens",), "max"),
)

# Gauges split by a label into <prefix><value>: vLLM's waiting requests by reason.
WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"
LABELLED_GAUGES = ((WAITING_BY_REASON, "reason", "num_requests_waiting_"),)
WAITING_CAPACITY = "num_requests_waiting_capacity"
WAITING_DEFERRED = "num_requests_waiting_deferred"
KNOWN_WAITING = (WAITING_CAPACITY, WAITING_DEFERRED)

# vllm:engine_sleep_state{sleep_state}: 1 on the engine's state, 0 on the others.
SLEEP_STATE = "vllm:engine_sleep_state"
SLEEP_LEVELS = {"awake": 0, "weights_offloaded": 1, "discard_all": 2}

# vllm:cache_config_info: a gauge set to 1 whose labels are CacheConfig's fields.
CACHE_CONFIG = "vllm:cache_config_info"
CACHE_CONFIG_FIELDS = {
    "num_gpu_blocks": "num_gpu_blocks",
    "block_size": "block_size",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "enable_prefix_caching": "prefix_caching_enabled",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
}

# vllm:lora_requests_info: a new series per (max_lora, waiting, running) combination, set
# to the time it was last seen; the latest is the current state.
LORA_INFO = "vllm:lora_requests_info"
LORA_LABELS = ("max_lora", "waiting_lora_adapters", "running_lora_adapters")

COUNTERS = (
    MetricName(
        "prompt_tokens",
        ("vllm:prompt_tokens_total", "tgi_request_input_length_sum", "sglang:prompt_tokens_total"),
    ),
    MetricName(
        "generation_tokens",
        (
            "vllm:generation_tokens_total",
            "tgi_request_generated_tokens_sum",
            "sglang:generation_tokens_total",
        ),
    ),
    MetricName("preemptions", ("vllm:num_preemptions_total",)),
    MetricName(
        "prefix_cache_queries", ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
    ),
    MetricName("prefix_cache_hits", ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")),
    # The histogram of tokens scheduled per engine step, read as two counters: its count is
    # the engine's steps, its sum the tokens they processed (prefill and decode). A stalled
    # engine shows zero of both; a slow prefill still steps.
    MetricName("engine_steps", ("vllm:iteration_tokens_total_count",)),
    MetricName("scheduled_tokens", ("vllm:iteration_tokens_total_sum",)),
    # Speculative decoding (only with --speculative-config).
    MetricName("spec_decode_drafts", ("vllm:spec_decode_num_drafts_total",)),
    MetricName("spec_decode_draft_tokens", ("vllm:spec_decode_num_draft_tokens_total",)),
    MetricName("spec_decode_accepted_tokens", ("vllm:spec_decode_num_accepted_tokens_total",)),
)

# Request counters split by a label into request_success:<value>.
REQUEST_COUNTERS = (
    ("vllm:request_success_total", "finished_reason", None),
    ("tgi_request_success", None, "ok"),
    ("tgi_request_failure", None, "error"),
)
REQUEST_PREFIX = "request_success:"
ERROR_REASONS = frozenset({"abort", "error"})

# Other counters split by a label into <prefix><value> (summed over engines).
PROMPT_SOURCE_PREFIX = "prompt_tokens_by_source:"
ACCEPTED_AT_PREFIX = "spec_decode_accepted_at:"
LABELLED_COUNTERS = (
    ("vllm:prompt_tokens_by_source_total", "source", PROMPT_SOURCE_PREFIX),
    ("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position", ACCEPTED_AT_PREFIX),
)

HISTOGRAMS = (
    MetricName("ttft", ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds")),
    MetricName(
        "itl",
        (
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
            "tgi_request_mean_time_per_token_duration",
            "sglang:inter_token_latency_seconds",
        ),
    ),
    MetricName("request_tpot", ("vllm:request_time_per_output_token_seconds",)),
    MetricName(
        "e2e",
        ("vllm:e2e_request_latency_seconds", "tgi_request_duration", "sglang:e2e_request_latency_seconds"),
    ),
    MetricName("queue_time", ("vllm:request_queue_time_seconds", "tgi_request_queue_duration")),
    MetricName("prefill_time", ("vllm:request_prefill_time_seconds",)),
    MetricName("decode_time", ("vllm:request_decode_time_seconds",)),
    MetricName("inference_time", ("vllm:request_inference_time_seconds", "tgi_request_inference_duration")),
    MetricName("prompt_length", ("vllm:request_prompt_tokens", "tgi_request_input_length")),
    MetricName("generation_length", ("vllm:request_generation_tokens", "tgi_request_generated_tokens")),
)

# Histograms measured in tokens: their derived quantiles carry no "_s" suffix.
TOKEN_HISTOGRAMS = frozenset({"prompt_length", "generation_length"})

QUANTILES = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"))


def label_key(value: str) -> str:
    """A label value as part of a canonical key: lower case, [a-z0-9_] only, at most 40
    characters ("capacity" stays "capacity"; "waiting for KV" becomes "waiting_for_kv")."""
    kept = "".join(c if c.isascii() and c.isalnum() else "_" for c in value.strip().lower())
    return "_".join(part for part in kept.split("_") if part)[:40] or "unknown"
