"""The metric series the console stores per instance: the one list.

Each series names the probe kind that measures it and how its value is read from a probe.
Charts, alert signals, incident evidence and the capacity check all read these names; a
series is stored because it is declared here, not because a chart shows it.

Engine figures are the canonical names of fleet.probes.scrape.derive (the same for every
vLLM name generation); error_rate, kv_swap and the probe/GPU figures are the console's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.probes.parts import ProbeKind


@dataclass(frozen=True)
class Series:
    name: str
    label: str
    unit: str
    kind: ProbeKind | str  # a probe kind, or "host": sent by the host's agent (fleet.agent.status)


def _engine(name: str, label: str, unit: str) -> Series:
    return Series(name, label, unit, ProbeKind.METRICS)


SERIES: tuple[Series, ...] = (
    _engine("ttft_p50_s", "TTFT p50", "s"),
    _engine("ttft_p95_s", "TTFT p95", "s"),
    _engine("ttft_p99_s", "TTFT p99", "s"),
    _engine("e2e_p50_s", "end-to-end p50", "s"),
    _engine("e2e_p95_s", "end-to-end p95", "s"),
    _engine("e2e_p99_s", "end-to-end p99", "s"),
    _engine("kv_cache_usage", "KV cache used", "fraction"),
    _engine("num_requests_running", "running", "requests"),
    _engine("num_requests_waiting", "waiting", "requests"),
    _engine("prompt_tokens_per_s", "prompt tokens/s", "tokens/s"),
    _engine("generation_tokens_per_s", "generation tokens/s", "tokens/s"),
    _engine("preemptions_per_s", "preemptions/s", "per s"),
    _engine("prompt_length_p50", "prompt length p50", "tokens"),
    _engine("prompt_length_p95", "prompt length p95", "tokens"),
    _engine("prompt_length_p99", "prompt length p99", "tokens"),
    _engine("requests_per_s", "finished requests/s", "per s"),
    _engine("error_rate", "share ending in abort or error", "fraction"),
    _engine("kv_swap", "CPU KV cache used (vLLM 0.7)", "fraction"),
    # vLLM 0.11+ (docs/vllm-metrics-judgements.md): what the live sizing check, the TTFT
    # breakdown and the judgements read, kept so they can be charted and alerted on.
    _engine("num_requests_waiting_capacity", "waiting for capacity", "requests"),
    _engine("engine_sleep_level", "sleep level (0 awake)", "level"),
    _engine("prefix_cache_hit_rate", "prefix cache hit rate", "fraction"),
    _engine("spec_decode_acceptance_rate", "draft tokens accepted", "fraction"),
    _engine("num_gpu_blocks", "KV cache blocks", "blocks"),
    _engine("queue_time_mean_s", "queue time (mean)", "s"),
    _engine("prefill_time_mean_s", "prefill time (mean)", "s"),
    Series("probe_connect_s", "connect", "s", ProbeKind.HEALTH),
    Series("probe_ttfb_s", "TTFB", "s", ProbeKind.HEALTH),
    Series("probe_total_s", "total", "s", ProbeKind.HEALTH),
    Series("stream_ttft_s", "stream TTFT", "s", ProbeKind.STREAM),
    Series("stream_tokens_per_s", "stream tokens/s", "tokens/s", ProbeKind.STREAM),
    Series("gpu_memory_used_pct", "GPU memory used", "%", ProbeKind.GPU),
    Series("gpu_sm_utilization_pct", "SM utilization", "%", ProbeKind.GPU),
    Series("gpu_temperature_c", "hottest GPU", "°C", ProbeKind.GPU),
    Series("engine_rss_gib", "engine RSS", "GiB", "host"),
)
BY_NAME: dict[str, Series] = {s.name: s for s in SERIES}
NAMES: frozenset[str] = frozenset(BY_NAME)


def _error_rate(d: Mapping[str, float]) -> float | None:
    requests = d.get("requests_per_s")
    return d.get("request_errors_per_s", 0.0) / requests if requests else None


# Series whose value is not a derived figure of the same name.
_FROM_DERIVED: dict[str, Callable[[Mapping[str, float]], float | None]] = {
    "error_rate": _error_rate,
    "kv_swap": lambda d: d.get("cpu_cache_usage"),
}


def engine_values(derived: Mapping[str, float]) -> dict[str, float | None]:
    """The engine series from the metrics probe's derived figures."""
    names = [s.name for s in SERIES if s.kind == ProbeKind.METRICS]
    return {n: _FROM_DERIVED[n](derived) if n in _FROM_DERIVED else derived.get(n) for n in names}


def _gpu_values(probe: Any, gpu_indexes: frozenset[int]) -> dict[str, float]:
    reading = probe.gpus.reading if probe.gpus else None
    gpus = [g for g in reading.gpus if not gpu_indexes or g.index in gpu_indexes] if reading else []
    if not gpus:
        return {}
    total = sum(g.memory_total_mib for g in gpus)
    return {
        "gpu_memory_used_pct": 100.0 * sum(g.memory_used_mib for g in gpus) / total if total else 0.0,
        "gpu_sm_utilization_pct": max(g.sm_utilization_pct for g in gpus),
        "gpu_temperature_c": max(g.temperature_c for g in gpus),
    }


def values_from(probe: Any, *, gpu_indexes: frozenset[int] = frozenset()) -> dict[str, float]:
    """The declared series of one InstanceProbe, by name: only those of the kinds it
    measured (the others were stored when they were measured). GPU figures cover the
    instance's own GPUs (all GPUs of the reading when none are given)."""
    values: dict[str, float | None] = {}
    if probe.measured(ProbeKind.METRICS):
        values.update(engine_values(probe.derived))
    if probe.measured(ProbeKind.HEALTH) and probe.phases:
        phases = probe.phases
        values |= {"probe_connect_s": phases.connect_s, "probe_ttfb_s": phases.ttfb_s}
        values["probe_total_s"] = phases.total_s
    if probe.measured(ProbeKind.STREAM) and probe.stream:
        values["stream_ttft_s"] = probe.stream.ttft_s
        values["stream_tokens_per_s"] = probe.stream.output_tokens_per_s
    if probe.measured(ProbeKind.GPU):
        values.update(_gpu_values(probe, gpu_indexes))
    return {k: float(v) for k, v in values.items() if isinstance(v, int | float) and v == v}
