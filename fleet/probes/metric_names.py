"""Canonical metric names, and the wire names each one is read from.

vLLM renamed metrics between versions (corrections #5, A.1 in docs/guide-corrections.md), so a scrape
is keyed by canonical names and both generations land on the same key. Where a server
emits both names (0.9–0.10 emit the deprecated one beside the new one), the first wire
name listed wins. TGI's `tgi_*` equivalents are mapped where they exist; Ollama has no
/metrics. The names stay one table (a page is read the same way whoever wrote it); each
engine's dialect (fleet/probes/engines/) says whether it has /metrics at all and the
prefix of the names it exports, and scrape.py asks it before scraping.

Gauges (summed over series, except usage ratios, which take the maximum engine):
  num_requests_running   vllm:num_requests_running | tgi_batch_current_size
  num_requests_waiting   vllm:num_requests_waiting | tgi_queue_size
  num_requests_swapped   vllm:num_requests_swapped                (0.7 / V0 only)
  kv_cache_usage         vllm:kv_cache_usage_perc | vllm:gpu_cache_usage_perc   (0..1)
  cpu_cache_usage        vllm:cpu_cache_usage_perc                (0.7 / V0 only)
  prefix_cache_hit_rate  vllm:gpu_prefix_cache_hit_rate           (0.7 gauge; later derived)
  batch_max_tokens       tgi_batch_current_max_tokens

Counters (cumulative; `derive` turns them into per-second rates):
  prompt_tokens          vllm:prompt_tokens_total | tgi_request_input_length_sum
  generation_tokens      vllm:generation_tokens_total | tgi_request_generated_tokens_sum
  preemptions            vllm:num_preemptions_total
  prefix_cache_queries   vllm:prefix_cache_queries_total | vllm:gpu_prefix_cache_queries_total
  prefix_cache_hits      vllm:prefix_cache_hits_total | vllm:gpu_prefix_cache_hits_total
  request_success:<reason>  vllm:request_success_total{finished_reason}; TGI:
                         tgi_request_success → request_success:ok,
                         tgi_request_failure → request_success:error
  (There is no vllm:request_failure_total; failures are finished_reason abort | error.)

Histograms (buckets summed by le over series, like `sum by (le)`):
  ttft             vllm:time_to_first_token_seconds
  itl              vllm:inter_token_latency_seconds | vllm:time_per_output_token_seconds
                   | tgi_request_mean_time_per_token_duration
  request_tpot     vllm:request_time_per_output_token_seconds  (per-request mean)
  e2e              vllm:e2e_request_latency_seconds | tgi_request_duration
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
    MetricName("num_requests_running", ("vllm:num_requests_running", "tgi_batch_current_size")),
    MetricName("num_requests_waiting", ("vllm:num_requests_waiting", "tgi_queue_size")),
    MetricName("num_requests_swapped", ("vllm:num_requests_swapped",)),
    MetricName("kv_cache_usage", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "max"),
    MetricName("cpu_cache_usage", ("vllm:cpu_cache_usage_perc",), "max"),
    MetricName("prefix_cache_hit_rate", ("vllm:gpu_prefix_cache_hit_rate",), "max"),
    MetricName("batch_max_tokens", ("tgi_batch_current_max_tokens",)),
)

COUNTERS = (
    MetricName("prompt_tokens", ("vllm:prompt_tokens_total", "tgi_request_input_length_sum")),
    MetricName("generation_tokens", ("vllm:generation_tokens_total", "tgi_request_generated_tokens_sum")),
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
)

# Request counters split by a label into request_success:<value>.
REQUEST_COUNTERS = (
    ("vllm:request_success_total", "finished_reason", None),
    ("tgi_request_success", None, "ok"),
    ("tgi_request_failure", None, "error"),
)
REQUEST_PREFIX = "request_success:"
ERROR_REASONS = frozenset({"abort", "error"})

HISTOGRAMS = (
    MetricName("ttft", ("vllm:time_to_first_token_seconds",)),
    MetricName(
        "itl",
        (
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
            "tgi_request_mean_time_per_token_duration",
        ),
    ),
    MetricName("request_tpot", ("vllm:request_time_per_output_token_seconds",)),
    MetricName("e2e", ("vllm:e2e_request_latency_seconds", "tgi_request_duration")),
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
