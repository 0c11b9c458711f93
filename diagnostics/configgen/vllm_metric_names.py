"""Which `vllm:*` metric names each vLLM generation exposes, for generated alert rules and
dashboards (corrections #5 and appendix A.1 in docs/guide-corrections.md).

The console's probes read both generations under canonical keys (fleet/probes/metric_names.py);
a generated PromQL expression cannot fall back like that, so it must name the one metric the
chosen version really exposes:

- KV usage: `vllm:gpu_cache_usage_perc` up to 0.8; `vllm:kv_cache_usage_perc` from 0.9 (the old
  name is kept, deprecated, in 0.9 and gone from 0.12).
- Inter-token latency: `vllm:time_per_output_token_seconds` up to 0.10;
  `vllm:inter_token_latency_seconds` from 0.11 (the old name is deprecated in 0.11, hidden in 0.12).
- Swap (`vllm:cpu_cache_usage_perc`, `vllm:num_requests_swapped`): 0.7 (V0 engine) only.
- Waiting by reason (`vllm:num_requests_waiting_by_reason{reason="capacity"|"deferred"}`): read
  from 0.20 (docs/vllm-metrics.md; the release is inferred), with the total as a fallback.
- There is no `vllm:request_failure_total` in any version: failed requests are
  `vllm:request_success_total{finished_reason=~"abort|error"}`.

Plain Python (Django only to translate two choice labels), shared by alert_rules.py and grafana.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_lazy

VERSIONS: tuple[str, ...] = ("0.7", "0.8", "0.9", "0.10", "0.11", "0.12", "0.20", "0.30")
DEFAULT_VERSION = "0.11"
VERSION_CHOICES: tuple[tuple[str, str], ...] = tuple(
    (v, gettext_lazy("0.7 (V0 engine)") if v == "0.7" else v) for v in VERSIONS
)

# Finished reasons that mean the request failed: abort (also a client that went away) and
# error (newer versions; a retryable internal error that became a 500).
FAILED_REASONS = "abort|error"

_COMMON = frozenset(
    {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
    }
)


@dataclass(frozen=True)
class VllmMetrics:
    """The names one vLLM version exposes, and the preferred one for each role."""

    version: tuple[int, int]
    kv_usage: str
    inter_token_latency: str
    cpu_cache_usage: str | None  # the V0 swap gauge; None where swapping does not exist
    num_requests_swapped: str | None
    exposed: frozenset[str]


def parse(version: str) -> tuple[int, int]:
    major, minor = version.strip().lstrip("v").split(".")[:2]
    return int(major), int(minor)


def metrics_for(version: str) -> VllmMetrics:
    """The metric names of a vLLM version (one of VERSIONS, or any "X.Y")."""
    v = parse(version)
    kv = "vllm:gpu_cache_usage_perc" if v <= (0, 8) else "vllm:kv_cache_usage_perc"
    itl = "vllm:time_per_output_token_seconds" if v <= (0, 10) else "vllm:inter_token_latency_seconds"
    exposed = set(_COMMON) | {kv, itl}
    if v == (0, 9):
        exposed.add("vllm:gpu_cache_usage_perc")  # deprecated beside the new name
    if v == (0, 11):
        exposed.add("vllm:time_per_output_token_seconds")  # deprecated beside the new name
    if v >= (0, 20):
        # waits split into capacity and deferred (the simulator's and the upgrade diff's 0.20)
        exposed.add("vllm:num_requests_waiting_by_reason")
    swap = v <= (0, 7)
    if swap:
        exposed |= {"vllm:cpu_cache_usage_perc", "vllm:num_requests_swapped"}
    return VllmMetrics(
        version=v,
        kv_usage=kv,
        inter_token_latency=itl,
        cpu_cache_usage="vllm:cpu_cache_usage_perc" if swap else None,
        num_requests_swapped="vllm:num_requests_swapped" if swap else None,
        exposed=frozenset(exposed),
    )


@dataclass(frozen=True)
class GpuMetrics:
    """One GPU exporter's series as PromQL: memory used as a fraction, utilization 0..1, °C."""

    memory_ratio: str
    utilization: str
    temperature: str


# DCGM exporter (dcgm-exporter, the NVIDIA GPU Operator's) and utkuozdemir/nvidia_gpu_exporter,
# which wraps nvidia-smi. Neither is scraped under vLLM's job, so these carry no job filter.
GPU_EXPORTERS: dict[str, GpuMetrics] = {
    "dcgm": GpuMetrics(
        memory_ratio="DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
        utilization="DCGM_FI_DEV_GPU_UTIL / 100",
        temperature="DCGM_FI_DEV_GPU_TEMP",
    ),
    "nvidia_smi": GpuMetrics(
        memory_ratio="nvidia_smi_memory_used_bytes / nvidia_smi_memory_total_bytes",
        utilization="nvidia_smi_utilization_gpu_ratio",
        temperature="nvidia_smi_temperature_gpu",
    ),
}
GPU_EXPORTER_CHOICES: tuple[tuple[str, str], ...] = (
    ("dcgm", gettext_lazy("DCGM exporter (DCGM_FI_DEV_*)")),
    ("nvidia_smi", "nvidia_gpu_exporter (nvidia_smi_*)"),
)
