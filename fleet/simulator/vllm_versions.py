"""Which behaviour a vLLM version has: metric names, error bodies, /health when dead.

Each rule rests on docs/guide-corrections.md, appendix A, and docs/vllm-metrics.md (the
per-metric table below, with the pull requests and release cut-overs it comes from).
Versions are compared as numbers, never as strings ("0.10" > "0.9").

vLLM's deprecation policy (docs/vllm-metrics.md §2): a metric deprecated in X.Y still
appears in X.Y with "DEPRECATED: Use ... instead." appended to its HELP text, is hidden in
X.Y+1 unless the server runs with --show-hidden-metrics-for-version=X.Y, and is removed in
X.Y+2. `METRICS` names, per metric, the release that added it, the release whose HELP
first says DEPRECATED, the X.Y the policy counts from and its replacement; `presence()`
turns that into what a given version shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_NUMBERS = re.compile(r"\d+")

Version = tuple[int, int, int]


class MetricGeneration(StrEnum):
    """The four sets of vLLM metric names."""

    V0 = "v0"  # 0.7.x: V0 engine, gpu/cpu cache usage, swapped, TPOT; model_name label only
    V1_EARLY = "v1-early"  # 0.8.x: V1 engine, gpu_cache_usage_perc, gpu_prefix_cache_* (blocks)
    V1_RENAMED = "v1-renamed"  # 0.9-0.11: kv_cache_usage_perc (0.9.2+) and the deprecated names
    V1_CURRENT = "v1-current"  # 0.12+: the 0.9 renames' old names removed


class Presence(StrEnum):
    """What one version's /metrics page does with one metric."""

    ABSENT = "absent"  # not yet added, or removed
    SHOWN = "shown"
    DEPRECATED = "deprecated"  # shown, HELP ends with "DEPRECATED: Use <replacement> instead."
    HIDDEN = "hidden"  # deprecated a release ago: only with --show-hidden-metrics-for-version


@dataclass(frozen=True, kw_only=True)
class MetricRule:
    """One metric's life in vLLM (docs/vllm-metrics.md §1 has each row's source)."""

    added: Version
    deprecated: tuple[int, int] | None = None  # the X.Y the deprecation policy counts from
    deprecated_help_from: Version | None = None  # first release whose HELP says DEPRECATED
    replaced_by: str = ""
    removed: Version | None = None  # an explicit removal that does not follow the policy


# Metrics whose presence changes with the version. Metrics every V1 release has (running,
# waiting, prompt/generation tokens, request_success, TTFT, e2e, queue/prefill/decode/
# inference time, iteration_tokens_total, cache_config_info) are not listed.
METRICS: dict[str, MetricRule] = {
    # 0.9.2 renamed the KV usage gauge and the prefix-cache counters (blocks -> tokens) and
    # marked the old names DEPRECATED; 0.11 hid them (re-enable with =0.10); 0.12 removed
    # them (vllm#29330).
    "vllm:gpu_cache_usage_perc": MetricRule(
        added=(0, 0, 0),
        deprecated=(0, 10),
        deprecated_help_from=(0, 9, 2),
        replaced_by="vllm:kv_cache_usage_perc",
    ),
    "vllm:gpu_prefix_cache_queries": MetricRule(
        added=(0, 8, 0),
        deprecated=(0, 10),
        deprecated_help_from=(0, 9, 2),
        replaced_by="vllm:prefix_cache_queries",
    ),
    "vllm:gpu_prefix_cache_hits": MetricRule(
        added=(0, 8, 0),
        deprecated=(0, 10),
        deprecated_help_from=(0, 9, 2),
        replaced_by="vllm:prefix_cache_hits",
    ),
    "vllm:kv_cache_usage_perc": MetricRule(added=(0, 9, 2)),
    "vllm:prefix_cache_queries": MetricRule(added=(0, 9, 2)),
    "vllm:prefix_cache_hits": MetricRule(added=(0, 9, 2)),
    # vllm#24110: inter_token_latency_seconds and the per-request TPOT histogram added, the
    # old TPOT histogram's HELP DEPRECATED from 0.10.2; the code counts the deprecation
    # from 0.11, hidden in 0.12 (vllm#29330), removed per the policy in 0.13 (vllm#32661).
    "vllm:time_per_output_token_seconds": MetricRule(
        added=(0, 0, 0),
        deprecated=(0, 11),
        deprecated_help_from=(0, 10, 2),
        replaced_by="vllm:inter_token_latency_seconds",
    ),
    "vllm:inter_token_latency_seconds": MetricRule(added=(0, 10, 2)),
    "vllm:request_time_per_output_token_seconds": MetricRule(added=(0, 10, 2)),
    # vllm#24176 (merged late October 2025, outside dev mode with vllm#27867): 0.11.1.
    "vllm:engine_sleep_state": MetricRule(added=(0, 11, 1)),
    # vllm#33290 (merged February 2026): 0.16.0.
    "vllm:prompt_tokens_by_source": MetricRule(added=(0, 16, 0)),
    "vllm:prompt_tokens_cached": MetricRule(added=(0, 16, 0)),
    # vllm#38435 (opened 2026-03-28, after 0.18.0); the release is not pinned in the sources
    # read: the simulator's cut-over is 0.20.0 (docs/vllm-metrics.md §1, note 3).
    "vllm:num_requests_waiting_by_reason": MetricRule(added=(0, 20, 0)),
    # V1 speculative decoding: drafted and accepted tokens from 0.8.3 (vllm#15151), drafts
    # and the per-position counter from 0.9.0 (vllm#16665). Only with speculative decoding.
    "vllm:spec_decode_num_draft_tokens": MetricRule(added=(0, 8, 3)),
    "vllm:spec_decode_num_accepted_tokens": MetricRule(added=(0, 8, 3)),
    "vllm:spec_decode_num_drafts": MetricRule(added=(0, 9, 0)),
    "vllm:spec_decode_num_accepted_tokens_per_pos": MetricRule(added=(0, 9, 0)),
}

# CacheConfig fields that vllm:cache_config_info gained or lost (docs/vllm-metrics.md §4).
CACHE_CONFIG_FIELDS_ADDED: dict[str, Version] = {
    "prefix_caching_hash_algo": (0, 9, 0),
    "kv_cache_memory_bytes": (0, 10, 2),  # vllm#21489
    "kv_cache_size_tokens": (0, 22, 0),  # vllm#42206, merged after 2026-05-13: cut-over 0.22.0
    "kv_cache_max_concurrency": (0, 22, 0),
}
CACHE_CONFIG_FIELDS_REMOVED: dict[str, Version] = {
    "swap_space": (0, 18, 0),  # vllm#36216: --swap-space left EngineArgs in 0.18.0
    "swap_space_bytes": (0, 18, 0),
}
# With --api-server-count > 1 the metrics live in prometheus_client's multiprocess mode,
# and a Gauge without multiprocess_mode (default "all") gets one series per process, told
# apart by a "pid" label. kv_cache_usage_perc lacked it from its introduction until
# vllm#28792 (merged 2025-11-16, after 0.11.1's branch): per-process up to 0.11.x.
KV_USAGE_PER_PROCESS_UNTIL: Version = (0, 12, 0)


def parse_version(text: str) -> Version:
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


def presence(name: str, version: str, *, show_hidden_for: str = "") -> Presence:
    """What `version` does with metric `name` (a name METRICS lists; others are SHOWN).

    show_hidden_for is --show-hidden-metrics-for-version: vLLM accepts only the previous
    minor release ("0.10" on 0.11.x), and then shows the metrics that release deprecated.
    """
    rule = METRICS.get(name)
    if rule is None:
        return Presence.SHOWN
    v = parse_version(version)
    if v < rule.added or (rule.removed is not None and v >= rule.removed):
        return Presence.ABSENT
    if rule.deprecated is None:
        return Presence.SHOWN
    major, minor = rule.deprecated
    if (v[0], v[1]) >= (major, minor + 2):
        return Presence.ABSENT
    if (v[0], v[1]) == (major, minor + 1):
        if _shows_hidden(v, show_hidden_for) and (major, minor) == _minor(show_hidden_for):
            return Presence.DEPRECATED
        return Presence.HIDDEN
    if rule.deprecated_help_from is not None and v >= rule.deprecated_help_from:
        return Presence.DEPRECATED
    return Presence.SHOWN


def exposed(name: str, version: str, *, show_hidden_for: str = "") -> bool:
    return presence(name, version, show_hidden_for=show_hidden_for) in (Presence.SHOWN, Presence.DEPRECATED)


def deprecation_note(name: str) -> str:
    """The text vLLM appends to a deprecated metric's HELP (no leading space, as vLLM has it)."""
    return f"DEPRECATED: Use {METRICS[name].replaced_by} instead."


def _minor(text: str) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        v = parse_version(text)
    except ValueError:
        return None
    return v[0], v[1]


def _shows_hidden(v: Version, show_hidden_for: str) -> bool:
    """vLLM's check: the flag must name the minor release just before the running one."""
    wanted = _minor(show_hidden_for)
    return wanted is not None and wanted == (v[0], v[1] - 1)


def valid_show_hidden(version: str, show_hidden_for: str) -> bool:
    """Whether vLLM would start with this --show-hidden-metrics-for-version ("" always)."""
    return not show_hidden_for or _shows_hidden(parse_version(version), show_hidden_for)


def cache_config_has(field: str, version: str) -> bool:
    v = parse_version(version)
    added = CACHE_CONFIG_FIELDS_ADDED.get(field)
    removed = CACHE_CONFIG_FIELDS_REMOVED.get(field)
    return (added is None or v >= added) and (removed is None or v < removed)


def kv_usage_per_process(version: str) -> bool:
    """kv_cache_usage_perc gets a series per API-server process (pid label) with
    --api-server-count > 1: from its introduction until the vllm#28792 fix."""
    return parse_version(version) < KV_USAGE_PER_PROCESS_UNTIL


def nested_error_bodies(version: str) -> bool:
    """{"error": {...}} from 0.10.1 (vllm#22099); flat {"object": "error", ...} before."""
    return parse_version(version) >= (0, 10, 1)


def dead_engine_health_status(version: str) -> int:
    """/health answers 500 while the engine is dead up to 0.10, 503 from 0.11 (vllm#24897)."""
    return 503 if parse_version(version) >= (0, 11, 0) else 500


def has_inter_token_latency(version: str) -> bool:
    """inter_token_latency_seconds and request_time_per_output_token_seconds (vllm#24110)."""
    return exposed("vllm:inter_token_latency_seconds", version)


def finish_reasons(version: str) -> tuple[str, ...]:
    """The finished_reason values request_success_total is pre-created for."""
    if metric_generation(version) is MetricGeneration.V1_CURRENT:
        return ("stop", "length", "abort", "error", "repetition")
    return ("stop", "length", "abort")


def validation_messages_are_new(version: str) -> bool:
    """Whether context-length errors use the VLLMValidationError wording. The reference does
    not pin the release; the simulator switches with the 0.12 metric generation."""
    return parse_version(version) >= (0, 12, 0)
