"""vLLM's /metrics page, by version: names, types, labels, HELP texts and buckets.

Built at scrape time from the engine's own counters as prometheus_client metric families
and written in prometheus_client's text format (exposition.py), which is what vLLM uses:
`vllm:prompt_tokens` registered as a counter appears as `vllm:prompt_tokens_total`; V1
also exposes `_created` series (V0 had turned those off). Which names appear follows the vLLM reference §0/§1:

  0.7.x      model_name label only; gpu/cpu_cache_usage_perc, num_requests_swapped,
             gpu/cpu_prefix_cache_hit_rate, time_per_output_token_seconds
  0.8.x      + engine label; gpu_cache_usage_perc, gpu_prefix_cache_* (blocks)
  0.9-0.11   kv_cache_usage_perc, prefix_cache_* (tokens), and the deprecated names
             (HELP "...DEPRECATED: Use ... instead."); 0.11 adds inter_token_latency_seconds
             and request_time_per_output_token_seconds
  0.12+      the old names are gone
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from fleet.simulator import exposition, vllm_versions
from fleet.simulator.engine import Engine
from fleet.simulator.histograms import Histogram
from fleet.simulator.spec import InstanceSpec
from fleet.simulator.vllm_versions import MetricGeneration as Gen

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what vLLM's /metrics response forces
_DEPRECATED = "DEPRECATED: Use {} instead."  # appended with no space, as vLLM does
V1 = (Gen.V1_EARLY, Gen.V1_RENAMED, Gen.V1_CURRENT)


@dataclass(frozen=True, kw_only=True)
class MetricsSource:
    """What one instance's /metrics page is made of."""

    spec: InstanceSpec
    engine: Engine
    http_requests: Counter[tuple[str, str, str]]  # (handler, method, "2xx") -> count
    process_start: float


def render_vllm_metrics(source: MetricsSource) -> bytes:
    return exposition.render(vllm_metric_families(source))


def vllm_metric_families(source: MetricsSource) -> Iterator[Metric]:
    """The families in vLLM's registration order (prometheus_client objects)."""
    return _VllmCollector(source).collect()


class _VllmCollector:
    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        self.gen = vllm_versions.metric_generation(source.spec.version)
        self.names = ["model_name"] if self.gen is Gen.V0 else ["model_name", "engine"]
        self.values = [source.spec.served_model_name] + ([] if self.gen is Gen.V0 else ["0"])
        self.created = None if self.gen is Gen.V0 else source.engine.stats.created_wall

    def collect(self) -> Iterator[Metric]:
        yield from self._scheduler_gauges()
        yield from self._cache_families()
        yield from self._token_counters()
        yield from self._histograms()
        yield self._cache_config_info()
        yield from _http_families(self.source)

    def _gauge(self, name: str, help_text: str, value: float) -> Metric:
        family = GaugeMetricFamily(name, help_text, labels=self.names)
        family.add_metric(self.values, value)
        return family

    def _counter(self, name: str, help_text: str, value: float) -> Metric:
        family = CounterMetricFamily(name, help_text, labels=self.names)
        family.add_metric(self.values, value, created=self.created)
        return family

    def _histogram(self, name: str, help_text: str, hist: Histogram) -> Metric:
        family = HistogramMetricFamily(name, help_text, labels=self.names)
        family.add_metric(self.values, hist.cumulative(), hist.sum)
        if self.created is not None:
            family.add_sample(
                f"{name}_created", dict(zip(self.names, self.values, strict=True)), self.created
            )
        return family

    def _scheduler_gauges(self) -> Iterator[Metric]:
        engine = self.source.engine
        running_help = (
            "Number of requests currently running on GPU."
            if self.gen is Gen.V0
            else "Number of requests in model execution batches."
        )
        yield self._gauge("vllm:num_requests_running", running_help, engine.num_running)
        if self.gen is Gen.V0:
            yield self._gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", 0)
        yield self._gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", engine.num_waiting
        )

    def _cache_families(self) -> Iterator[Metric]:
        usage = self.source.engine.kv_usage
        if self.gen in (Gen.V1_RENAMED, Gen.V1_CURRENT):
            yield self._gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage)
        if self.gen is not Gen.V1_CURRENT:
            deprecated = _DEPRECATED.format("vllm:kv_cache_usage_perc") if self.gen is Gen.V1_RENAMED else ""
            gpu_help = "GPU KV-cache usage. 1 means 100 percent usage." + deprecated
            yield self._gauge("vllm:gpu_cache_usage_perc", gpu_help, usage)
        if self.gen is Gen.V0:
            yield from self._v0_prefix_gauges()
        else:
            yield from self._prefix_counters()

    def _v0_prefix_gauges(self) -> Iterator[Metric]:
        stats = self.source.engine.stats
        hit_rate = (
            stats.prefix_hits_tokens / stats.prefix_queries_tokens if stats.prefix_queries_tokens else 0.0
        )
        yield self._gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", 0.0)
        yield self._gauge("vllm:cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", 0.0)
        yield self._gauge("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", hit_rate)

    def _prefix_counters(self) -> Iterator[Metric]:
        stats = self.source.engine.stats
        queries, hits = stats.prefix_queries_tokens, stats.prefix_hits_tokens
        if self.gen is Gen.V1_EARLY:
            block = self.source.spec.block_size
            yield self._counter(
                "vllm:gpu_prefix_cache_queries",
                "GPU prefix cache queries, in terms of number of queried blocks.",
                -(-queries // block),
            )
            yield self._counter(
                "vllm:gpu_prefix_cache_hits",
                "GPU prefix cache hits, in terms of number of cached blocks.",
                hits // block,
            )
            return
        if self.gen is Gen.V1_RENAMED:
            yield self._counter(
                "vllm:gpu_prefix_cache_queries",
                "GPU prefix cache queries, in terms of number of queried tokens."
                + _DEPRECATED.format("vllm:prefix_cache_queries"),
                queries,
            )
            yield self._counter(
                "vllm:gpu_prefix_cache_hits",
                "GPU prefix cache hits, in terms of number of cached tokens."
                + _DEPRECATED.format("vllm:prefix_cache_hits"),
                hits,
            )
        yield self._counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            queries,
        )
        yield self._counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", hits
        )

    def _token_counters(self) -> Iterator[Metric]:
        stats = self.source.engine.stats
        yield self._counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", stats.num_preemptions
        )
        yield self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", stats.prompt_tokens)
        yield self._counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", stats.generation_tokens
        )
        family = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*self.names, "finished_reason"],
        )
        for reason in vllm_versions.finish_reasons(self.source.spec.version):
            family.add_metric([*self.values, reason], stats.finished[reason], created=self.created)
        yield family

    def _histograms(self) -> Iterator[Metric]:
        stats = self.source.engine.stats
        version = self.source.spec.version
        itl = vllm_versions.has_inter_token_latency(version)
        h = self._histogram
        yield h("vllm:request_prompt_tokens", "Number of prefill tokens processed.", stats.prompt_len)
        yield h(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", stats.generation_len
        )
        yield h(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            stats.iteration_tokens,
        )
        yield h(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            stats.max_generation_tokens,
        )
        yield h("vllm:request_params_n", "Histogram of the n request parameter.", stats.params_n)
        yield h(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            stats.params_max_tokens,
        )
        yield h(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            stats.time_to_first_token,
        )
        if self.gen is not Gen.V1_CURRENT:
            tpot_help = "Histogram of time per output token in seconds."
            if itl:
                tpot_help += _DEPRECATED.format("vllm:inter_token_latency_seconds")
            yield h("vllm:time_per_output_token_seconds", tpot_help, stats.inter_token_latency)
        if itl:
            yield h(
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                stats.inter_token_latency,
            )
            yield h(
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
                stats.request_time_per_output_token,
            )
        yield h(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            stats.e2e_latency,
        )
        yield h(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            stats.queue_time,
        )
        yield h(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            stats.inference_time,
        )
        yield h(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            stats.prefill_time,
        )
        yield h(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            stats.decode_time,
        )
        if self.gen is Gen.V0:
            yield h(
                "vllm:time_in_queue_requests",
                "Histogram of time the request spent in the queue in seconds.",
                stats.queue_time,
            )

    def _cache_config_info(self) -> Metric:
        labels = cache_config_labels(self.source.spec, self.gen)
        if self.gen is not Gen.V0:
            labels["engine"] = "0"
        family = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(labels)
        )
        family.add_metric(list(labels.values()), 1.0)
        return family


def cache_config_labels(spec: InstanceSpec, gen: Gen) -> dict[str, str]:
    """CacheConfig's fields as vLLM logs them into vllm:cache_config_info."""
    labels = {
        "block_size": str(spec.block_size),
        "cache_dtype": spec.kv_cache_dtype,
        "calculate_kv_scales": "False",
        "cpu_offload_gb": "0",
        "enable_prefix_caching": str(bool(spec.enable_prefix_caching)),
        "gpu_memory_utilization": str(spec.gpu_memory_utilization),
        "is_attention_free": "False",
        "num_cpu_blocks": "2048" if gen is Gen.V0 else "0",
        "num_gpu_blocks": str(spec.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "sliding_window": "None",
        "swap_space": "4",
        "swap_space_bytes": str(4 * 1024**3),
    }
    if gen in (Gen.V1_RENAMED, Gen.V1_CURRENT):
        labels["prefix_caching_hash_algo"] = "sha256" if gen is Gen.V1_CURRENT else "builtin"
    return labels


def _http_families(source: MetricsSource) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "http_requests",
        "Total number of requests by method, status and handler.",
        labels=["handler", "method", "status"],
    )
    for (handler, method, status), count in sorted(source.http_requests.items()):
        requests.add_metric([handler, method, status], count, created=source.process_start)
    yield requests
    start = GaugeMetricFamily(
        "process_start_time_seconds", "Start time of the process since unix epoch in seconds."
    )
    start.add_metric([], source.process_start)
    yield start
