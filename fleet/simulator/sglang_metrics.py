"""SGLang's /metrics page (--enable-metrics), as its TokenizerManager serves it (docs/sglang.md).

SGLang writes its metrics with prometheus_client in multiprocess mode (each process into
PROMETHEUS_MULTIPROC_DIR, the HTTP process merging them), so the page has no `_created`
samples and holds a labelled family only once something set it. Two processes write:

- the scheduler, its gauges labelled engine_type="unified", model_name, pp_rank, tp_rank
  (and moe_ep_rank from 0.5.10), written only when it logs its stats: after every prefill
  batch, every --decode-log-interval (40) decode steps, and every 30 s while it is idle.
  Between those moments the page shows the last values, so a gauge lags the engine, and a
  scheduler that stopped stepping (stuck, or dead) leaves its last values on the page.
  cache_hit_rate is the hit rate of the last prefill batch and is set to 0 by each decode
  log; gen_throughput is the tokens decoded since the last decode log per second (0 in an
  idle log); max_total_num_tokens (0.5.10 and later) stays 0 until the first batch has
  been logged, as the idle log does not set it;
- the tokenizer manager, its counters and histograms labelled model_name, each observed
  when a request finishes (time_to_first_token at its first token): prompt_tokens_total
  and generation_tokens_total grow only when requests end, so a long generation adds
  nothing until it is done.

`SchedulerLog` keeps what the scheduler last logged and updates it from the engine's
counters when the page is read (when both a prefill and a decode log fell since the last
read, the prefill's are the values shown); `render_sglang_metrics` writes the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from fleet.simulator import exposition
from fleet.simulator.engine import Engine
from fleet.simulator.histograms import BucketSet, Histogram
from fleet.simulator.spec import InstanceSpec

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # prometheus_client's ASGI app, no Accept
DECODE_LOG_INTERVAL = 40  # --decode-log-interval
IDLE_LOG_INTERVAL_S = 30.0  # the scheduler's idle self-check logs the metrics this often

TIME_TO_FIRST_TOKEN = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0,
)  # fmt: skip
INTER_TOKEN_LATENCY = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0,
)  # fmt: skip
E2E_0_4 = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0, 800.0,
)  # fmt: skip
E2E_0_5 = (*E2E_0_4[:-1], 600.0, 1200.0, 1800.0, 2400.0)

# Where the layout changed, by the releases checked (docs/sglang.md): 0.4.10.post2 and
# 0.5.5 have the short label set and no max_total_num_tokens, 0.5.10 has both.
MOE_EP_RANK_AND_MAX_TOKENS_FROM = (0, 5, 10, 0)
LONG_E2E_BUCKETS_FROM = (0, 5, 0, 0)
LATEST = (0, 5, 10, 0)  # a version that does not parse is read as the default


def version_tuple(version: str) -> tuple[int, int, int, int]:
    """'0.5.10' -> (0, 5, 10, 0); '0.4.10.post2' -> (0, 4, 10, 2); unreadable -> LATEST."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?", version.strip())
    if match is None:
        return LATEST
    major, minor, patch, post = match.groups()
    return int(major), int(minor), int(patch or 0), int(post or 0)


def sglang_buckets(spec: InstanceSpec) -> BucketSet:
    """The engine's histograms with SGLang's default boundaries (TTFT, ITL, e2e)."""
    long_e2e = version_tuple(spec.version) >= LONG_E2E_BUCKETS_FROM
    return BucketSet(
        latency=E2E_0_5 if long_e2e else E2E_0_4,
        first_token=TIME_TO_FIRST_TOKEN,
        inter_token=INTER_TOKEN_LATENCY,
    )


def max_total_num_tokens(spec: InstanceSpec) -> int:
    """The KV pool in tokens (SGLang's page size is 1 token)."""
    return spec.num_gpu_blocks * spec.block_size


@dataclass(eq=False)
class SchedulerLog:
    """The scheduler's gauges as it last logged them (see the module docstring)."""

    engine: Engine
    started: float
    logged: bool = False
    last_log_at: float = 0.0
    running: int = 0
    queued: int = 0
    token_usage: float = 0.0
    num_used_tokens: int = 0
    gen_throughput: float = 0.0
    cache_hit_rate: float = 0.0
    max_total_num_tokens: int = 0
    _prefill_steps: int = 0
    _decode_steps: int = 0
    _decode_log_at: float = 0.0
    _decode_tokens: int = 0
    _prefix_queries: int = 0
    _prefix_hits: int = 0
    _pool_tokens: int = 0

    def __post_init__(self) -> None:
        self.last_log_at = self._decode_log_at = self.started
        self._pool_tokens = self.engine.pool.total * self.engine.pool.block_size

    def refresh(self, now: float) -> None:
        """Apply the logs the scheduler would have written by `now`."""
        engine = self.engine
        if engine.knobs.dead or engine.knobs.stalled:
            return  # a scheduler that does not step writes nothing
        stats = engine.stats
        if stats.decode_steps - self._decode_steps >= DECODE_LOG_INTERVAL:
            gap = now - self._decode_log_at
            tokens = stats.generation_tokens - self._decode_tokens
            self.gen_throughput = tokens / gap if gap > 0 else 0.0
            self.cache_hit_rate = 0.0
            self._decode_steps, self._decode_log_at, self._decode_tokens = (
                stats.decode_steps,
                now,
                stats.generation_tokens,
            )
            self._take(now, batch=True)
        if stats.prefill_steps != self._prefill_steps:
            queried = stats.prefix_queries_tokens - self._prefix_queries
            hit = stats.prefix_hits_tokens - self._prefix_hits
            self.cache_hit_rate = hit / queried if queried else 0.0
            self._prefill_steps = stats.prefill_steps
            self._prefix_queries, self._prefix_hits = stats.prefix_queries_tokens, stats.prefix_hits_tokens
            self._take(now, batch=True)
        elif not engine.running and not engine.waiting and now - self.last_log_at >= IDLE_LOG_INTERVAL_S:
            self.gen_throughput = 0.0
            self._take(now, batch=False)

    def _take(self, now: float, *, batch: bool) -> None:
        engine = self.engine
        usage = engine.kv_usage
        self.running, self.queued = engine.num_running, engine.num_waiting
        self.num_used_tokens = round(usage * self._pool_tokens)
        self.token_usage = usage if batch else round(usage, 2)
        if batch:
            self.max_total_num_tokens = self._pool_tokens
        self.logged, self.last_log_at = True, now


@dataclass(frozen=True, kw_only=True)
class SglangMetricsSource:
    spec: InstanceSpec
    engine: Engine
    log: SchedulerLog


def render_sglang_metrics(source: SglangMetricsSource) -> bytes:
    return exposition.render(sglang_metric_families(source))


def sglang_metric_families(source: SglangMetricsSource) -> Iterator[Metric]:
    yield from _scheduler_families(source)
    yield from _tokenizer_families(source)


def _scheduler_labels(source: SglangMetricsSource) -> dict[str, str]:
    labels = {
        "model_name": source.spec.served_model_name,
        "engine_type": "unified",
        "tp_rank": "0",
        "pp_rank": "0",
    }
    if version_tuple(source.spec.version) >= MOE_EP_RANK_AND_MAX_TOKENS_FROM:
        labels["moe_ep_rank"] = "0"
    return labels


def _scheduler_families(source: SglangMetricsSource) -> Iterator[Metric]:
    log = source.log
    if not log.logged:
        return  # nothing logged yet: the multiprocess files hold no scheduler series
    labels = _scheduler_labels(source)
    gauges = [
        ("sglang:num_running_reqs", "The number of running requests.", log.running),
        ("sglang:num_used_tokens", "The number of used tokens.", log.num_used_tokens),
        ("sglang:token_usage", "The token usage.", log.token_usage),
        ("sglang:gen_throughput", "The generation throughput (token/s).", log.gen_throughput),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", log.queued),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", log.cache_hit_rate),
    ]
    if version_tuple(source.spec.version) >= MOE_EP_RANK_AND_MAX_TOKENS_FROM:
        gauges.append(
            (
                "sglang:max_total_num_tokens",
                "Maximum total number of tokens in the KV cache pool.",
                log.max_total_num_tokens,
            )
        )
    for name, help_text, value in gauges:
        family = GaugeMetricFamily(name, help_text, labels=list(labels))
        family.add_metric(list(labels.values()), value)
        yield family


def _tokenizer_families(source: SglangMetricsSource) -> Iterator[Metric]:
    stats = source.engine.stats
    model = [source.spec.served_model_name]
    if stats.finished_total:
        # Counted when a request finishes: its whole prompt and every token it produced.
        yield _counter(
            "sglang:prompt_tokens", "Number of prefill tokens processed.", model, stats.prompt_len.sum
        )
        yield _counter(
            "sglang:generation_tokens",
            "Number of generation tokens processed.",
            model,
            stats.generation_len.sum,
        )
        yield _counter("sglang:num_requests", "Number of requests processed.", model, stats.finished_total)
    if stats.finished["abort"]:
        yield _counter(
            "sglang:num_aborted_requests", "Number of requests aborted.", model, stats.finished["abort"]
        )
    if stats.time_to_first_token.count:
        yield _histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            model,
            stats.time_to_first_token,
        )
    if stats.inter_token_latency.count:
        yield _histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            model,
            stats.inter_token_latency,
        )
    if stats.e2e_latency.count:
        yield _histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            model,
            stats.e2e_latency,
        )


def _counter(name: str, help_text: str, model: list[str], value: float) -> Metric:
    family = CounterMetricFamily(name, help_text, labels=["model_name"])
    family.add_metric(model, value)
    return family


def _histogram(name: str, help_text: str, model: list[str], hist: Histogram) -> Metric:
    family = HistogramMetricFamily(name, help_text, labels=["model_name"])
    family.add_metric(model, hist.cumulative(), hist.sum)
    return family
