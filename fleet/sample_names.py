"""The metric samples stored per probe, and how the instance page groups them into charts.

Names are the canonical ones of `fleet.probes.scrape.derive` (engine metrics, identical for
every vLLM name generation), plus the console's own probe and GPU measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.probes.parts import ProbeKind


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    series: tuple[tuple[str, str], ...]  # (sample name, legend label)


PANELS: tuple[Panel, ...] = (
    Panel("Time to first token", "s", (("ttft_p50_s", "p50"), ("ttft_p95_s", "p95"), ("ttft_p99_s", "p99"))),
    Panel("End-to-end latency", "s", (("e2e_p50_s", "p50"), ("e2e_p95_s", "p95"), ("e2e_p99_s", "p99"))),
    Panel("KV cache usage", "fraction", (("kv_cache_usage", "used"),)),
    Panel("Requests", "requests", (("num_requests_running", "running"), ("num_requests_waiting", "waiting"))),
    Panel(
        "Tokens per second",
        "tokens/s",
        (("prompt_tokens_per_s", "prompt"), ("generation_tokens_per_s", "generation")),
    ),
    Panel("Preemptions", "per s", (("preemptions_per_s", "preemptions"),)),
    Panel(
        "Prompt length",
        "tokens",
        (("prompt_length_p50", "p50"), ("prompt_length_p95", "p95"), ("prompt_length_p99", "p99")),
    ),
    Panel(
        "GPU memory and utilization",
        "%",
        (("gpu_memory_used_pct", "memory used"), ("gpu_sm_utilization_pct", "SM utilization")),
    ),
    Panel("GPU temperature", "°C", (("gpu_temperature_c", "hottest GPU"),)),
    Panel(
        "Probe latency",
        "s",
        (
            ("probe_connect_s", "connect"),
            ("probe_ttfb_s", "TTFB"),
            ("probe_total_s", "total"),
            ("stream_ttft_s", "stream TTFT"),
        ),
    ),
)

SAMPLE_NAMES: frozenset[str] = frozenset(name for panel in PANELS for name, _ in panel.series)


def _gpu_samples(probe, gpu_indexes: frozenset[int]) -> dict[str, float]:
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


def samples_from(probe, *, gpu_indexes: frozenset[int] = frozenset()) -> dict[str, float]:
    """The values of one InstanceProbe that the instance page charts, by sample name: only
    those of the kinds it measured (the others were stored when they were measured).

    GPU figures cover the instance's own GPUs (all GPUs of the reading when none are given).
    """
    values: dict[str, float | None] = {}
    if probe.measured(ProbeKind.METRICS):
        values.update((k, v) for k, v in probe.derived.items() if k in SAMPLE_NAMES)
    if probe.measured(ProbeKind.HEALTH) and probe.phases:
        values["probe_connect_s"] = probe.phases.connect_s
        values["probe_ttfb_s"] = probe.phases.ttfb_s
        values["probe_total_s"] = probe.phases.total_s
    if probe.measured(ProbeKind.STREAM) and probe.stream:
        values["stream_ttft_s"] = probe.stream.ttft_s
    if probe.measured(ProbeKind.GPU):
        values.update(_gpu_samples(probe, gpu_indexes))
    return {k: float(v) for k, v in values.items() if isinstance(v, int | float) and v == v}
