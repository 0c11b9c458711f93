"""Scrape an engine's /metrics into canonical names, and derive rates and quantiles.

`scrape_metrics` reads the exposition (bounded, like every probe request) and reads the
samples of the families the console uses (fleet.probes.exposition; in a worker thread when
the page is large, so it cannot stall the other probes' timings); a body that is not
Prometheus text is `garbage`. `derive` compares two
scrapes, like PromQL's rate()/increase() and histogram_quantile() over the window between
them, without extrapolation. Canonical input names are listed in `metric_names`.

Derived keys:
  <gauge>                         every canonical gauge as read (kv_cache_usage, num_requests_running,
                                  num_requests_waiting_capacity / _deferred, engine_sleep_level,
                                  num_gpu_blocks, block_size, gpu_memory_utilization,
                                  kv_capacity_tokens, lora_*_adapters, gen_throughput, ...)
  window_s                        seconds between the two scrapes
  <counter>_per_s                 prompt_tokens_per_s, generation_tokens_per_s, preemptions_per_s,
                                  prefix_cache_queries_per_s, prefix_cache_hits_per_s,
                                  engine_steps_per_s, scheduled_tokens_per_s, spec_decode_*_per_s
  prefix_cache_hit_rate           Δhits / Δqueries (overrides the 0.7 gauge)
  prompt_tokens_<source>_per_s    by prompt_tokens_by_source's source: local_compute,
                                  local_cache_hit, external_kv_transfer
  iteration_tokens_mean           tokens per engine step (Δsum / Δcount of iteration_tokens_total)
  spec_decode_acceptance_rate     Δaccepted / Δdraft tokens (vLLM's "draft acceptance rate")
  spec_decode_mean_accepted_tokens  Δaccepted / Δdrafts: tokens accepted per draft
  spec_decode_mean_acceptance_length  1 + the above (vLLM's "mean acceptance length", which
                                  counts the bonus token every verification step yields)
  spec_decode_draft_length        Δdraft tokens / Δdrafts (num_speculative_tokens when every
                                  draft is full length)
  spec_decode_accepted_at_<i>     Δaccepted at position i / Δdrafts: the share of drafts
                                  whose first i+1 tokens were accepted
  requests_per_s                  all finished requests (every finished_reason)
  request_errors_per_s            finished_reason abort | error (TGI: tgi_request_failure)
  requests_<reason>_per_s         per finished_reason (stop, length, abort, error, repetition, ok)
  <hist>_p50_s, _p95_s, _p99_s    quantiles of the swept histograms (SWEPT_HISTOGRAMS: ttft, itl,
  <hist>_mean_s                   e2e, queue_time, prefill_time), and mean (Δsum / Δcount);
                                  decode_time, inference_time and request_tpot as their mean
                                  alone (MEAN_HISTOGRAMS: decode_time_mean_s, ...)
  prompt_length_p50, _p95, _p99   the prompt-length histogram's quantiles and mean, in tokens
  prompt_length_mean              (the scheduled capacity check compares them with the KV cache)
  (metric_names also maps the generation-length histogram; sweeps skip it until something
  uses it)
A counter reset (a smaller value than before: a restart) counts the current value as
the window's increase, as PromQL does. Without a previous scrape only gauges come back.
Text read from labels (the LoRA adapters' names) is kept apart, in Scrape.info and
ScrapeResult.info: the derived figures are numbers only.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fleet.probes import metric_names as names
from fleet.probes.engines import dialect_for
from fleet.probes.exposition import (
    MIN_PARSE_S,
    PROCESS_LABELS,
    ExpositionTooLarge,
    Samples,
    read_samples,
)
from fleet.probes.fetch import fetch_bounded
from fleet.probes.histograms import Buckets, bucket_deltas, histogram_quantile
from fleet.probes.http_client import ProbeClient
from fleet.probes.outcomes import Outcome, describe_exception
from fleet.probes.target import ProbeLimits, ProbeTarget

# A page up to this size is read on the event loop (the reader takes about 0.7 ms for a
# 40 KB vLLM page, so at most about a millisecond here: a thread hop costs about as much);
# a larger one in a worker thread, so that it does not hold up other probes' timings.
INLINE_PARSE_BYTES = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class Histogram:
    buckets: tuple[tuple[float, float], ...]
    sum: float = 0.0
    count: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        # Bounds as Prometheus writes them ("+Inf"): JSON has no infinity.
        return {"buckets": [[_le(b), c] for b, c in self.buckets], "sum": self.sum, "count": self.count}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Histogram:
        return cls(
            buckets=tuple((float(b), float(c)) for b, c in data["buckets"]),
            sum=float(data["sum"]),
            count=float(data["count"]),
        )


@lru_cache(maxsize=1024)
def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


@dataclass(frozen=True, kw_only=True)
class Scrape:
    timestamp: float
    engine: str
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # canonical name -> wire name read
    series: int = 0
    info: dict[str, str] = field(default_factory=dict)  # text read from labels (LoRA adapter names)

    @property
    def empty(self) -> bool:
        return not (self.gauges or self.counters or self.histograms)

    def to_dict(self) -> dict[str, Any]:
        # Built by hand: dataclasses.asdict deep-copies every bucket, and a sweep stores
        # a thousand of these.
        return {
            "timestamp": self.timestamp,
            "engine": self.engine,
            "gauges": dict(self.gauges),
            "counters": dict(self.counters),
            "histograms": {k: h.to_dict() for k, h in self.histograms.items()},
            "sources": dict(self.sources),
            "series": self.series,
            "info": dict(self.info),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scrape:
        """Rebuild a stored scrape; ValueError when the data is not one."""
        try:
            return cls(
                timestamp=float(data["timestamp"]),
                engine=str(data.get("engine", "")),
                gauges={k: float(v) for k, v in data.get("gauges", {}).items()},
                counters={k: float(v) for k, v in data.get("counters", {}).items()},
                histograms={k: Histogram.from_dict(h) for k, h in data.get("histograms", {}).items()},
                sources=dict(data.get("sources", {})),
                series=int(data.get("series", 0)),
                info={str(k): str(v) for k, v in (data.get("info") or {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a stored scrape: {exc!r}") from None


@dataclass(frozen=True, kw_only=True)
class ScrapeResult:
    outcome: Outcome
    supported: bool = True
    status: int | None = None
    error: str = ""
    elapsed_s: float = 0.0
    body_bytes: int = 0
    info: dict[str, str] = field(default_factory=dict)  # the scrape's info, kept with the result
    scrape: Scrape | None = None

    def to_dict(self, *, with_scrape: bool = True) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "scrape"}
        data["scrape"] = self.scrape.to_dict() if self.scrape and with_scrape else None
        return data


Series = list[tuple[dict[str, str], float]]


def _one_per_process(series: Series) -> Series:
    """Series that differ only by their `pid` as one, the largest: each process's copy of
    one engine's gauge (prometheus_client's multiprocess "all" mode; vllm#28792 shows
    kv_cache_usage_perc so with --api-server-count 8: one process holds the value, the
    others 0). The process labels are dropped; a series without a pid is left as it is."""
    if not any("pid" in labels for labels, _ in series):
        return series
    merged: dict[object, tuple[dict[str, str], float]] = {}
    for index, (labels, value) in enumerate(series):
        key: object = (
            tuple(sorted((k, v) for k, v in labels.items() if k != "pid")) if "pid" in labels else index
        )
        rest = {k: v for k, v in labels.items() if k not in PROCESS_LABELS}
        if key not in merged or value > merged[key][1]:
            merged[key] = (rest, value)
    return list(merged.values())


def _pick(mapping: names.MetricName, samples: Samples, *, gauge: bool) -> tuple[str, list[float]] | None:
    for wire in mapping.wire:
        if wire in samples:
            series = _one_per_process(samples[wire]) if gauge else samples[wire]
            return wire, [value for _, value in series]
    return None


def _histogram(wire: str, samples: Samples) -> Histogram:
    by_le: dict[float, float] = defaultdict(float)
    for labels, value in samples.get(f"{wire}_bucket", []):
        by_le[float(labels.get("le", "+Inf"))] += value
    total = sum(v for _, v in samples.get(f"{wire}_sum", []))
    count = sum(v for _, v in samples.get(f"{wire}_count", []))
    return Histogram(buckets=tuple(sorted(by_le.items())), sum=total, count=count)


def _request_counters(samples: Samples) -> dict[str, float]:
    found: dict[str, float] = defaultdict(float)
    for wire, label, fixed in names.REQUEST_COUNTERS:
        for labels, value in samples.get(wire, []):
            found[names.REQUEST_PREFIX + (fixed or labels.get(label or "", "unknown"))] += value
    for wire, label, prefix in names.LABELLED_COUNTERS:
        for labels, value in samples.get(wire, []):
            found[prefix + names.label_key(labels.get(label, ""))] += value
    return dict(found)


def _labelled_gauges(samples: Samples) -> dict[str, float]:
    """num_requests_waiting_<reason>, summed over engines; once the family is on the page
    both known reasons have a value (0 where the engine exports none)."""
    found: dict[str, float] = {}
    for wire, label, prefix in names.LABELLED_GAUGES:
        if wire not in samples:
            continue
        for labels, value in _one_per_process(samples[wire]):
            key = prefix + names.label_key(labels.get(label, ""))
            found[key] = found.get(key, 0.0) + value
        if wire == names.WAITING_BY_REASON:
            found = {key: 0.0 for key in names.KNOWN_WAITING} | found
    return found


def _sleep_level(samples: Samples) -> float | None:
    """0 awake, 1 weights offloaded, 2 all discarded: the deepest state an engine reports
    (vLLM puts every engine of a server to sleep together). An engine whose awake series
    is 0 without a level is asleep at level 1 or deeper: 1 is said."""
    series = _one_per_process(samples.get(names.SLEEP_STATE, []))
    if not series:
        return None
    level = 0
    for labels, value in series:
        state = labels.get("sleep_state", "")
        if state in names.SLEEP_LEVELS and state != "awake" and value >= 0.5:
            level = max(level, names.SLEEP_LEVELS[state])
        elif state == "awake" and value < 0.5:
            level = max(level, 1)
    return float(level)


def _label_number(text: str | None) -> float | None:
    """A label value as a number: "True"/"False" as 1/0; "None", text and what is not a
    finite number as None."""
    if text is None:
        return None
    word = text.strip()
    if word in ("True", "true", "False", "false"):
        return 1.0 if word.lower() == "true" else 0.0
    try:
        number = float(word)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _cache_config(samples: Samples) -> dict[str, float]:
    """vllm:cache_config_info's numeric fields (the largest over engines: every engine of
    a server has the same CacheConfig), and the KV capacity in tokens they make."""
    found: dict[str, float] = {}
    for labels, _ in samples.get(names.CACHE_CONFIG, []):
        for label, key in names.CACHE_CONFIG_FIELDS.items():
            number = _label_number(labels.get(label))
            if number is not None:
                found[key] = max(found.get(key, number), number)
    if found.get("num_gpu_blocks") and found.get("block_size"):
        found["kv_capacity_tokens"] = found["num_gpu_blocks"] * found["block_size"]
    return found


MAX_ADAPTERS = 64  # names kept of each list (the counts count them all)


def _adapters(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for name in text.split(","):
        if name.strip():
            seen.setdefault(name.strip(), None)
    return list(seen)


def _lora(samples: Samples) -> tuple[dict[str, float], dict[str, str]]:
    """The LoRA adapters of vllm:lora_requests_info's latest series (the largest value:
    the time it was last set): how many run, wait, and wait without running (starved),
    the max_lora slots, and the names."""
    series = samples.get(names.LORA_INFO, [])
    if not series:
        return {}, {}
    labels, _ = max(series, key=lambda s: s[1])
    running = _adapters(labels.get("running_lora_adapters", ""))
    waiting = _adapters(labels.get("waiting_lora_adapters", ""))
    also_running = set(running)
    starved = [name for name in waiting if name not in also_running]
    gauges = {
        "lora_running_adapters": float(len(running)),
        "lora_waiting_adapters": float(len(waiting)),
        "lora_starved_adapters": float(len(starved)),
    }
    slots = _label_number(labels.get("max_lora"))
    if slots is not None:
        gauges["lora_max_adapters"] = slots
    info = {
        "lora_running": ",".join(running[:MAX_ADAPTERS]),
        "lora_waiting": ",".join(waiting[:MAX_ADAPTERS]),
        "lora_starved": ",".join(starved[:MAX_ADAPTERS]),
    }
    return gauges, info


def parse_exposition(text: str, *, engine: str, timestamp: float, deadline: float | None = None) -> Scrape:
    """A Scrape from Prometheus text; ValueError when the text does not parse (or has more
    than MAX_LINES lines), ParseDeadline when `deadline` (time.monotonic()) passes first."""
    samples = read_samples(text, deadline=deadline)
    gauges, counters, histograms, sources = {}, _request_counters(samples), {}, {}
    for mapping in names.GAUGES + names.COUNTERS:
        gauge = mapping in names.GAUGES
        picked = _pick(mapping, samples, gauge=gauge)
        if picked:
            wire, values = picked
            value = max(values) if mapping.aggregate == "max" else sum(values)
            (gauges if gauge else counters)[mapping.canonical] = value
            sources[mapping.canonical] = wire
    for mapping in names.HISTOGRAMS:
        # a histogram read for its mean alone has no buckets: its count says it is there
        wire = next((w for w in mapping.wire if f"{w}_bucket" in samples or f"{w}_count" in samples), None)
        if wire:
            histograms[mapping.canonical], sources[mapping.canonical] = _histogram(wire, samples), wire
    gauges.update(_labelled_gauges(samples))
    level = _sleep_level(samples)
    if level is not None:
        gauges["engine_sleep_level"], sources["engine_sleep_level"] = level, names.SLEEP_STATE
    config = _cache_config(samples)
    if "kv_capacity_tokens" in gauges:  # the engine's own figure (SGLang) wins
        config.pop("kv_capacity_tokens", None)
    gauges.update(config)
    lora, info = _lora(samples)
    gauges.update(lora)
    return Scrape(
        timestamp=timestamp,
        engine=engine,
        gauges=gauges,
        counters=counters,
        histograms=histograms,
        sources=sources,
        series=sum(len(v) for v in samples.values()),
        info=info,
    )


async def scrape_metrics(*, client: ProbeClient, target: ProbeTarget, limits: ProbeLimits) -> ScrapeResult:
    """GET the dialect's /metrics (bounded) and parse it; never raises. An engine whose
    dialect has no metrics (Ollama) is not asked: the result says it is not supported."""
    dialect = dialect_for(target.engine)
    if not dialect.has_metrics:
        return ScrapeResult(
            outcome=Outcome.OK, supported=False, error=f"{dialect.label} has no /metrics endpoint"
        )
    fetch = await fetch_bounded(client=client, url=target.url(dialect.metrics_path), limits=limits)
    base = {"status": fetch.status, "elapsed_s": fetch.elapsed_s, "body_bytes": len(fetch.body)}
    if not fetch.ok:
        return ScrapeResult(outcome=fetch.outcome, error=fetch.error_text, **base)
    text = fetch.body.decode("utf-8", errors="replace")
    # The parse gets what is left of the probe's deadline (at least MIN_PARSE_S), and checks
    # it as it goes: a page no parse can finish in time is unreadable, not a stuck thread.
    deadline = time.monotonic() + max(limits.total_deadline_s - fetch.elapsed_s, MIN_PARSE_S)
    parse = {"engine": target.engine, "timestamp": time.time(), "deadline": deadline}
    try:
        if len(fetch.body) <= INLINE_PARSE_BYTES:
            scrape = parse_exposition(text, **parse)
        else:
            scrape = await asyncio.to_thread(parse_exposition, text, **parse)
    except ExpositionTooLarge as exc:
        return ScrapeResult(outcome=Outcome.TOO_LARGE, error=str(exc), **base)
    except Exception as exc:  # the parser raises ValueError (and worse) on bad text
        return ScrapeResult(
            outcome=Outcome.GARBAGE, error=f"not Prometheus text: {describe_exception(exc)}", **base
        )
    return ScrapeResult(outcome=Outcome.OK, scrape=scrape, info=dict(scrape.info), **base)


def _increase(before: float | None, now: float) -> float | None:
    if before is None:
        return None
    return now if now < before else now - before


def _counter_rates(previous: Scrape, current: Scrape, window: float) -> dict[str, float]:
    derived: dict[str, float] = {}
    requests: dict[str, float] = {}
    accepted_at: dict[str, float] = {}
    for name, now in current.counters.items():
        grown = _increase(previous.counters.get(name), now)
        if grown is None:
            continue
        if name.startswith(names.REQUEST_PREFIX):
            requests[name.removeprefix(names.REQUEST_PREFIX)] = grown / window
        elif name.startswith(names.PROMPT_SOURCE_PREFIX):
            derived[f"prompt_tokens_{name.removeprefix(names.PROMPT_SOURCE_PREFIX)}_per_s"] = grown / window
        elif name.startswith(names.ACCEPTED_AT_PREFIX):
            accepted_at[name.removeprefix(names.ACCEPTED_AT_PREFIX)] = grown
        else:
            derived[f"{name}_per_s"] = grown / window
    if requests:
        derived["requests_per_s"] = sum(requests.values())
        derived["request_errors_per_s"] = sum(v for k, v in requests.items() if k in names.ERROR_REASONS)
        derived.update({f"requests_{reason}_per_s": rate for reason, rate in requests.items()})
    queries, hits = derived.get("prefix_cache_queries_per_s"), derived.get("prefix_cache_hits_per_s")
    if queries and hits is not None:
        derived["prefix_cache_hit_rate"] = hits / queries
    steps, scheduled = derived.get("engine_steps_per_s"), derived.get("scheduled_tokens_per_s")
    if steps and scheduled is not None:
        derived["iteration_tokens_mean"] = scheduled / steps
    derived.update(_spec_decode(derived, accepted_at, window))
    return derived


def _spec_decode(rates: dict[str, float], accepted_at: dict[str, float], window: float) -> dict[str, float]:
    """Speculative decoding over the window, as vLLM's SpecDecodingLogging computes it."""
    drafts = rates.get("spec_decode_drafts_per_s")
    if not drafts:
        return {}
    accepted = rates.get("spec_decode_accepted_tokens_per_s", 0.0)
    drafted = rates.get("spec_decode_draft_tokens_per_s")
    found = {
        "spec_decode_mean_accepted_tokens": accepted / drafts,
        "spec_decode_mean_acceptance_length": 1 + accepted / drafts,
    }
    if drafted:
        found["spec_decode_acceptance_rate"] = accepted / drafted
        found["spec_decode_draft_length"] = drafted / drafts
    for position, grown in accepted_at.items():
        found[f"spec_decode_accepted_at_{position}"] = grown / (drafts * window)
    return found


def _histogram_window(name: str, before: Histogram | None, now: Histogram) -> dict[str, float]:
    if before is None:
        return {}
    reset = now.count < before.count
    deltas: Buckets = bucket_deltas(None if reset else list(before.buckets), list(now.buckets))
    count = now.count if reset else now.count - before.count
    total = now.sum if reset else now.sum - before.sum
    unit = "" if name in names.TOKEN_HISTOGRAMS else "_s"
    derived = {}
    for q, label in names.QUANTILES:
        value = histogram_quantile(q, deltas)
        if value is not None:
            derived[f"{name}_{label}{unit}"] = value
    if count > 0:
        derived[f"{name}_mean{unit}"] = total / count
    return derived


def derive(*, previous: Scrape | None, current: Scrape) -> dict[str, float]:
    """Gauges as read; counters as per-second rates and histograms as p50/p95/p99 and
    mean over the window since `previous` (see the module docstring for the keys)."""
    derived = dict(current.gauges)
    if previous is None or current.timestamp <= previous.timestamp:
        return derived
    window = current.timestamp - previous.timestamp
    derived["window_s"] = window
    derived.update(_counter_rates(previous, current, window))
    for name, histogram in current.histograms.items():
        derived.update(_histogram_window(name, previous.histograms.get(name), histogram))
    return derived
