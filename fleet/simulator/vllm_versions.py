"""Which behaviour a vLLM version has: metric names, error bodies, /health when dead.

Each rule rests on docs/guide-corrections.md, appendix A. Versions are compared as
numbers, never as strings ("0.10" > "0.9").
"""

from __future__ import annotations

import re
from enum import StrEnum

_NUMBERS = re.compile(r"\d+")


class MetricGeneration(StrEnum):
    """The four sets of vLLM metric names."""

    V0 = "v0"  # 0.7.x: V0 engine, gpu/cpu cache usage, swapped, TPOT; model_name label only
    V1_EARLY = "v1-early"  # 0.8.x: V1 engine, gpu_cache_usage_perc, gpu_prefix_cache_* (blocks)
    V1_RENAMED = "v1-renamed"  # 0.9-0.11: kv_cache_usage_perc, prefix_cache_* + deprecated names
    V1_CURRENT = "v1-current"  # 0.12+: old names removed; ITL and per-request TPOT


def parse_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) from "0.11.2", "v0.7.3" or "0.10.2.dev378+g4d7fe40fc"."""
    numbers = [int(n) for n in _NUMBERS.findall(text.split("+")[0])[:3]]
    if not numbers:
        raise ValueError(f"not a version: {text!r}")
    numbers += [0] * (3 - len(numbers))
    return numbers[0], numbers[1], numbers[2]


def metric_generation(version: str) -> MetricGeneration:
    v = parse_version(version)
    if v < (0, 8, 0):
        return MetricGeneration.V0
    if v < (0, 9, 0):
        return MetricGeneration.V1_EARLY
    if v < (0, 12, 0):
        return MetricGeneration.V1_RENAMED
    return MetricGeneration.V1_CURRENT


def nested_error_bodies(version: str) -> bool:
    """{"error": {...}} from 0.10.1 (vllm#22099); flat {"object": "error", ...} before."""
    return parse_version(version) >= (0, 10, 1)


def dead_engine_health_status(version: str) -> int:
    """/health answers 500 while the engine is dead up to 0.10, 503 from 0.11 (vllm#24897)."""
    return 503 if parse_version(version) >= (0, 11, 0) else 500


def has_inter_token_latency(version: str) -> bool:
    """inter_token_latency_seconds and request_time_per_output_token_seconds from 0.11 (vllm#24110)."""
    return parse_version(version) >= (0, 11, 0)


def finish_reasons(version: str) -> tuple[str, ...]:
    """The finished_reason values request_success_total is pre-created for."""
    if metric_generation(version) is MetricGeneration.V1_CURRENT:
        return ("stop", "length", "abort", "error", "repetition")
    return ("stop", "length", "abort")


def validation_messages_are_new(version: str) -> bool:
    """Whether context-length errors use the VLLMValidationError wording. The reference does
    not pin the release; the simulator switches with the 0.12 metric generation."""
    return parse_version(version) >= (0, 12, 0)
