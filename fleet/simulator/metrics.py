"""vLLM's /metrics page, by version: names, types, labels, HELP texts and buckets.

Built at scrape time from the engine's own counters as prometheus_client metric families
and written in prometheus_client's text format (exposition.py), which is what vLLM uses:
`vllm:prompt_tokens` registered as a counter appears as `vllm:prompt_tokens_total`; V1
also exposes `_created` series (V0 had turned those off). Which names appear, and with
which HELP, is vllm_versions.METRICS (docs/vllm-metrics.md §1-2 has the table by version):

  0.7.x      model_name label only; gpu/cpu_cache_usage_perc, num_requests_swapped,
             gpu/cpu_prefix_cache_hit_rate, time_per_output_token_seconds
  0.8.x      + engine label; gpu_cache_usage_perc, gpu_prefix_cache_* (blocks)
  0.9.2      kv_cache_usage_perc, prefix_cache_* (tokens); the old names DEPRECATED
  0.10.2     inter_token_latency_seconds, request_time_per_output_token_seconds; the old
             TPOT histogram DEPRECATED
  0.11       gpu_* hidden; 0.11.1 engine_sleep_state
  0.12       gpu_* removed, TPOT hidden; 0.13 TPOT removed
  0.16       prompt_tokens_by_source, prompt_tokens_cached
  0.20       num_requests_waiting_by_reason
A hidden metric comes back, still DEPRECATED, with show_hidden_metrics_for_version.

Speculative decoding adds the spec_decode_* counters, LoRA adds vllm:lora_requests_info.
With api_server_count > 1 the page is what prometheus_client's multiprocess collector
writes (docs/vllm-metrics.md §3): no `_created` samples, no process_* metrics, and a gauge
registered without multiprocess_mode (kv_cache_usage_perc up to 0.11.x, vllm#28792) once
per API-server process with a `pid` label: the process that received the engine's stats
holds the value, the others 0.
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
from fleet.simulator.engine_stats import PROMPT_TOKEN_SOURCES
from fleet.simulator.histograms import Histogram
from fleet.simulator.spec import InstanceSpec
from fleet.simulator.vllm_versions import MetricGeneration as Gen
from fleet.simulator.vllm_versions import Presence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what vLLM's /metrics response forces
V1 = (Gen.V1_EARLY, Gen.V1_RENAMED, Gen.V1_CURRENT)
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
WAITING_REASONS = ("capacity", "deferred")


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


def api_server_pids(spec: InstanceSpec) -> list[int]:
    """The process ids of the instance's API servers (the `pid` label in multiprocess mode)."""
    base = 2000 + spec.seed % 60000
    return [base + i for i in range(spec.api_server_count)]


class _VllmCollector:
    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        spec = source.spec
        self.version = spec.version
        self.gen = vllm_versions.metric_generation(spec.version)
        self.multiprocess = spec.api_server_count > 1
        self.names = ["model_name"] if self.gen is Gen.V0 else ["model_name", "engine"]
        self.values = [spec.served_model_name] + ([] if self.gen is Gen.V0 else ["0"])
        v1_single = self.gen is not Gen.V0 and not self.multiprocess
        self.created = source.engine.stats.created_wall if v1_single else None

    def collect(self) -> Iterator[Metric]:
        yield from self._spec_decode_counters()
        yield from self._scheduler_gauges()
        yield from self._cache_families()
        yield from self._token_counters()
        yield from self._histograms()
        yield from self._lora_info()
        yield self._cache_config_info()
        yield from _http_families(self.source, created=not self.multiprocess)

    # -- helpers ---------------------------------------------------------------------------

    def _presence(self, name: str) -> Presence:
        hidden_for = self.source.spec.show_hidden_metrics_for_version
        return vllm_versions.presence(name, self.version, show_hidden_for=hidden_for)

    def _shown(self, name: str) -> bool:
        return self._presence(name) in (Presence.SHOWN, Presence.DEPRECATED)

    def _help(self, name: str, text: str, deprecated_text: str | None = None) -> str:
        """The HELP text; a deprecated metric's has vLLM's note appended, no space before it."""
        if self._presence(name) is not Presence.DEPRECATED:
            return text
        return deprecated_text or text + vllm_versions.deprecation_note(name)

    def _gauge(self, name: str, help_text: str, value: float) -> Metric:
        family = GaugeMetricFamily(name, help_text, labels=self.names)
        family.add_metric(self.values, value)
        return family

    def _per_process_gauge(self, name: str, help_text: str, value: float) -> Metric:
        """A gauge in prometheus_client's multiprocess "all" mode: one series per process."""
        family = GaugeMetricFamily(name, help_text, labels=[*self.names, "pid"])
        for i, pid in enumerate(api_server_pids(self.source.spec)):
            family.add_metric([*self.values, str(pid)], value if i == 0 else 0.0)
        return family

    def _labelled_gauge(self, name: str, help_text: str, label: str, values: dict[str, float]) -> Metric:
        family = GaugeMetricFamily(name, help_text, labels=[*self.names, label])
        for key, value in values.items():
            family.add_metric([*self.values, key], value)
        return family

    def _counter(self, name: str, help_text: str, value: float) -> Metric:
        family = CounterMetricFamily(name, help_text, labels=self.names)
        family.add_metric(self.values, value, created=self.created)
        return family

    def _labelled_counter(self, name: str, help_text: str, label: str, values: dict[str, float]) -> Metric:
        family = CounterMetricFamily(name, help_text, labels=[*self.names, label])
        for key, value in values.items():
            family.add_metric([*self.values, key], value, created=self.created)
        return family

    def _histogram(self, name: str, help_text: str, hist: Histogram) -> Metric:
        family = HistogramMetricFamily(name, help_text, labels=self.names)
        family.add_metric(self.values, hist.cumulative(), hist.sum)
        if self.created is not None:
            family.add_sample(
                f"{name}_created", dict(zip(self.names, self.values, strict=True)), self.created
            )
        return family

    # -- families --------------------------------------------------------------------------

    def _spec_decode_counters(self) -> Iterator[Metric]:
        """vllm/v1/spec_decode/metrics.py's counters, only with speculative decoding."""
        k = self.source.spec.num_speculative_tokens
        if not k or self.gen is Gen.V0:
            return
        stats = self.source.engine.stats
        if self._shown("vllm:spec_decode_num_drafts"):
            yield self._counter(
                "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", stats.spec_drafts
            )
        if self._shown("vllm:spec_decode_num_draft_tokens"):
            yield self._counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", stats.spec_draft_tokens
            )
            yield self._counter(
                "vllm:spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                stats.spec_accepted_tokens,
            )
        if self._shown("vllm:spec_decode_num_accepted_tokens_per_pos"):
            per_pos = stats.spec_accepted_per_pos + [0] * k
            yield self._labelled_counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                "position",
                {str(pos): per_pos[pos] for pos in range(k)},
            )

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
        if self._shown("vllm:num_requests_waiting_by_reason"):
            capacity, deferred = engine.waiting_by_reason()
            yield self._labelled_gauge(
                "vllm:num_requests_waiting_by_reason",
                "Number of waiting requests by reason. "
                "Reason labels: 'capacity' = waiting for scheduling capacity; "
                "'deferred' = deferred by transient constraints "
                "(LoRA budget, KV transfer, blocked status). "
                "Sum of all reasons equals vllm:num_requests_waiting.",
                "reason",
                {"capacity": capacity, "deferred": deferred},
            )
        if self._shown("vllm:engine_sleep_state"):
            level = engine.sleep_level
            yield self._labelled_gauge(
                "vllm:engine_sleep_state",
                "Engine sleep state; awake = 0 means engine is sleeping; "
                "awake = 1 means engine is awake; "
                "weights_offloaded = 1 means sleep level 1; "
                "discard_all = 1 means sleep level 2.",
                "sleep_state",
                {
                    "awake": float(level == 0),
                    "weights_offloaded": float(level == 1),
                    "discard_all": float(level == 2),
                },
            )

    def _cache_families(self) -> Iterator[Metric]:
        usage = self.source.engine.kv_usage
        if self._shown("vllm:gpu_cache_usage_perc"):
            gpu_help = self._help(
                "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage."
            )
            yield self._gauge("vllm:gpu_cache_usage_perc", gpu_help, usage)
        if self._shown("vllm:kv_cache_usage_perc"):
            kv_help = "KV-cache usage. 1 means 100 percent usage."
            if self.multiprocess and vllm_versions.kv_usage_per_process(self.version):
                yield self._per_process_gauge("vllm:kv_cache_usage_perc", kv_help, usage)
            else:
                yield self._gauge("vllm:kv_cache_usage_perc", kv_help, usage)
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
        renamed = self._shown("vllm:prefix_cache_queries")
        if self._shown("vllm:gpu_prefix_cache_queries"):
            if not renamed:  # 0.8 - 0.9.1: counted in blocks
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
            else:  # HELP texts as vLLM wrote them, the missing space included
                yield self._counter(
                    "vllm:gpu_prefix_cache_queries",
                    self._help(
                        "vllm:gpu_prefix_cache_queries",
                        "GPU prefix cache queries, in terms of number of queried tokens.",
                        "GPU prefix cache queries, in terms of number of queriedtokens. "
                        + vllm_versions.deprecation_note("vllm:gpu_prefix_cache_queries"),
                    ),
                    queries,
                )
                yield self._counter(
                    "vllm:gpu_prefix_cache_hits",
                    self._help(
                        "vllm:gpu_prefix_cache_hits",
                        "GPU prefix cache hits, in terms of number of cached tokens.",
                        "GPU prefix cache hits, in terms of number of cached tokens. "
                        + vllm_versions.deprecation_note("vllm:gpu_prefix_cache_hits"),
                    ),
                    hits,
                )
        if renamed:
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
        if self._shown("vllm:prompt_tokens_by_source"):
            by_source = stats.prompt_tokens_by_source
            yield self._labelled_counter(
                "vllm:prompt_tokens_by_source",
                "Number of prompt tokens by source.",
                "source",
                {source: by_source[source] for source in PROMPT_TOKEN_SOURCES},
            )
        if self._shown("vllm:prompt_tokens_cached"):
            cached = stats.prompt_tokens_by_source["local_cache_hit"]
            cached += stats.prompt_tokens_by_source["external_kv_transfer"]
            yield self._counter(
                "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", cached
            )
        yield self._counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", stats.generation_tokens
        )
        family = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*self.names, "finished_reason"],
        )
        for reason in vllm_versions.finish_reasons(self.version):
            family.add_metric([*self.values, reason], stats.finished[reason], created=self.created)
        yield family

    def _histograms(self) -> Iterator[Metric]:
        stats = self.source.engine.stats
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
        if self._shown("vllm:inter_token_latency_seconds"):
            yield h(
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                stats.inter_token_latency,
            )
        if self._shown("vllm:request_time_per_output_token_seconds"):
            yield h(
                "vllm:request_time_per_output_token_seconds",
                "Histogram of time_per_output_token_seconds per request.",
                stats.request_time_per_output_token,
            )
        if self._shown("vllm:time_per_output_token_seconds"):
            tpot_help = self._help(
                "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds."
            )
            yield h("vllm:time_per_output_token_seconds", tpot_help, stats.inter_token_latency)
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
                "Histogram of the time the request spent in the queue in seconds.",
                stats.queue_time,
            )

    def _lora_info(self) -> Iterator[Metric]:
        """vllm:lora_requests_info: set to the current time under the running and waiting
        adapters each step, so every label set the engine has been in stays on the page;
        the newest (largest value) is the current one. Only with LoRA enabled."""
        spec = self.source.spec
        if not spec.lora_adapters:
            return
        family = GaugeMetricFamily(
            "vllm:lora_requests_info",
            "Running stats on lora requests.",
            labels=["max_lora", "waiting_lora_adapters", "running_lora_adapters"],
        )
        for (running, waiting), wall in self.source.engine.stats.lora_info.items():
            family.add_metric([str(spec.max_loras), waiting, running], wall)
        yield family

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
    """CacheConfig's fields as vLLM logs them into vllm:cache_config_info (str() of each)."""
    tokens = spec.num_gpu_blocks * spec.block_size
    fields = {
        "block_size": str(spec.block_size),
        "cache_dtype": spec.kv_cache_dtype,
        "calculate_kv_scales": "False",
        "cpu_offload_gb": "0",
        "enable_prefix_caching": str(bool(spec.enable_prefix_caching)),
        "gpu_memory_utilization": str(spec.gpu_memory_utilization),
        "is_attention_free": "False",
        "kv_cache_max_concurrency": str(round(tokens / spec.max_model_len, 2)),
        "kv_cache_memory_bytes": "None",
        "kv_cache_size_tokens": str(tokens),
        "num_cpu_blocks": "2048" if gen is Gen.V0 else "0",
        "num_gpu_blocks": str(spec.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256" if gen is Gen.V1_CURRENT else "builtin",
        "sliding_window": "None",
        "swap_space": "4",
        "swap_space_bytes": str(4 * 1024**3),
    }
    return {
        name: value for name, value in fields.items() if vllm_versions.cache_config_has(name, spec.version)
    }


def _http_families(source: MetricsSource, *, created: bool) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "http_requests",
        "Total number of requests by method, status and handler.",
        labels=["handler", "method", "status"],
    )
    for (handler, method, status), count in sorted(source.http_requests.items()):
        requests.add_metric(
            [handler, method, status], count, created=source.process_start if created else None
        )
    yield requests
    if not created:
        return  # multiprocess mode: prometheus_client's process collector is not registered
    start = GaugeMetricFamily(
        "process_start_time_seconds", "Start time of the process since unix epoch in seconds."
    )
    start.add_metric([], source.process_start)
    yield start
