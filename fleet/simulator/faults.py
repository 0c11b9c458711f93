"""Fault kinds an instance can be told to show, their parameters, and the active set.

A fault is JSON: {"kind": "tps_drop", "factor": 3, "duration_s": 60}. Each kind takes the
parameters listed in FAULT_KINDS (all optional, with defaults) plus "duration_s" (the fault
clears itself after that many seconds). Posting a kind that is active replaces it. What
each kind does is applied by the instance (instance.py) and the servers:

  slow_prefill        factor >= 1: prefill takes factor x longer (TTFT climbs)
  tps_drop            factor >= 1: every step takes factor x longer; /_sim/nvml shows a hot,
                      thermally throttled GPU
  kv_near_full        fraction in (0, 1): that share of KV blocks is taken (preemptions)
  queue_backlog       n >= 1: keeps n extra requests waiting while active
  refuse_connections  the port stops listening: connection refused
  hang                connections are accepted and never answered
  slow_headers        delay_s > 0 before any response starts
  http_500, http_503  requests fail with that status (fraction of them, paths prefixes)
  rate_limited        a gateway in front of the engine answers 429 with an OpenAI-style
                      rate_limit_error body and Retry-After: retry_after_s (fraction of
                      requests, paths prefixes); vLLM itself never returns 429 (corrections #8)
  crash               the instance stops listening and records exit_code (137 by default)
  malformed_metrics   /metrics serves text a Prometheus parser rejects
  huge_metrics        /metrics serves a valid body of about size_mb megabytes
  gpu_xid             /_sim/nvml reports XID xid (79: fallen off the bus, 48: DBE) on gpu,
                      an index of the instance's own GPUs (the inventory's, e.g. 2 for an
                      instance on GPU 2); without gpu, on every GPU of the instance. A gpu
                      the instance does not have is refused (400 listing its indices)
  engine_dead         the engine is dead: /health 500 (<=0.10) or 503 (0.11+), requests 500
  engine_stall        the engine stops stepping but /health stays 200 (vllm#39863)

vLLM V1 states the console judges (docs/vllm-metrics.md §6); the metrics they show follow
the instance's version (vllm_versions.py):
  engine_asleep       level 1 or 2: the engine sleeps as after POST /sleep?level=N:
                      vllm:engine_sleep_state says so, /health stays 200, GET /is_sleeping
                      (dev mode) answers {"is_sleeping":true}, KV usage drops to 0 and
                      requests wait, unanswered, until it wakes (the fault is cleared)
  waiting_deferred    n >= 1: keeps n requests waiting for a KV transfer, counted as
                      num_requests_waiting_by_reason{reason="deferred"}, not "capacity";
                      the scheduler passes over them. Cleared, their KV "arrives": they
                      run, their prompts counted as prompt_tokens_by_source
                      {source="external_kv_transfer"}
  prefix_cache_collapse  keep in [0, 1]: only that share of the usual prefix-cache hits
                      is found (a routing change that scatters sessions): prefix_cache_hits
                      stalls while prefix_cache_queries goes on
  spec_decode_low_acceptance  acceptance in [0, 1]: each draft token is accepted with that
                      chance (speculative decoding that costs more than it saves); no
                      effect on an instance without speculative decoding
  lora_starving       no LoRA adapter can be scheduled: their requests wait as "deferred",
                      vllm:lora_requests_info lists them as waiting and none as running;
                      no effect on an instance without LoRA adapters
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class FaultKind(StrEnum):
    SLOW_PREFILL = "slow_prefill"
    TPS_DROP = "tps_drop"
    KV_NEAR_FULL = "kv_near_full"
    QUEUE_BACKLOG = "queue_backlog"
    REFUSE_CONNECTIONS = "refuse_connections"
    HANG = "hang"
    SLOW_HEADERS = "slow_headers"
    HTTP_500 = "http_500"
    HTTP_503 = "http_503"
    RATE_LIMITED = "rate_limited"
    CRASH = "crash"
    MALFORMED_METRICS = "malformed_metrics"
    HUGE_METRICS = "huge_metrics"
    GPU_XID = "gpu_xid"
    ENGINE_DEAD = "engine_dead"
    ENGINE_STALL = "engine_stall"
    ENGINE_ASLEEP = "engine_asleep"
    WAITING_DEFERRED = "waiting_deferred"
    PREFIX_CACHE_COLLAPSE = "prefix_cache_collapse"
    SPEC_DECODE_LOW_ACCEPTANCE = "spec_decode_low_acceptance"
    LORA_STARVING = "lora_starving"


class FaultError(ValueError):
    """A fault request is malformed; the message says what to change, `field` which field."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Param:
    type: type
    default: Any
    low: float | None = None
    high: float | None = None
    exclusive: bool = False  # low and high themselves not allowed
    hint: str = ""


# Parameters that name one GPU by its index; the instance checks them against its own GPUs.
GPU_PARAMS = ("gpu",)
GPU_HINT = "one of the instance's GPU indices; omitted: every GPU of the instance"
_FRACTION = Param(float, 1.0, 0.0, 1.0, hint="the share of requests that fail")
_PATHS = Param(list, [], hint="path prefixes; empty: every path")

FAULT_KINDS: dict[FaultKind, dict[str, Param]] = {
    FaultKind.SLOW_PREFILL: {"factor": Param(float, 4.0, 1.0, 1000.0, hint="how many times slower")},
    FaultKind.TPS_DROP: {"factor": Param(float, 3.0, 1.0, 1000.0, hint="how many times slower")},
    FaultKind.KV_NEAR_FULL: {"fraction": Param(float, 0.95, 0.0, 1.0, exclusive=True)},
    FaultKind.QUEUE_BACKLOG: {
        "n": Param(int, 50, 1, 100_000),
        "prompt_tokens": Param(int, 1000, 1, 10_000_000),
        "output_tokens": Param(int, 200, 1, 1_000_000),
    },
    FaultKind.REFUSE_CONNECTIONS: {},
    FaultKind.HANG: {},
    FaultKind.SLOW_HEADERS: {"delay_s": Param(float, 5.0, 0.0, 3600.0, exclusive=True)},
    FaultKind.HTTP_500: {"fraction": _FRACTION, "paths": _PATHS},
    FaultKind.HTTP_503: {"fraction": _FRACTION, "paths": _PATHS},
    FaultKind.RATE_LIMITED: {
        "fraction": _FRACTION,
        "paths": _PATHS,
        "retry_after_s": Param(int, 1, 0, 3600, hint="the Retry-After header, in seconds"),
    },
    FaultKind.CRASH: {"exit_code": Param(int, 137, 1, 255), "oom_killed": Param(bool, False)},
    FaultKind.MALFORMED_METRICS: {},
    FaultKind.HUGE_METRICS: {"size_mb": Param(float, 20.0, 0.1, 200.0)},
    FaultKind.GPU_XID: {"xid": Param(int, 79, 1, 1000), "gpu": Param(int, None, 0, 63, hint=GPU_HINT)},
    FaultKind.ENGINE_DEAD: {},
    FaultKind.ENGINE_STALL: {},
    FaultKind.ENGINE_ASLEEP: {
        "level": Param(int, 1, 1, 2, hint="1: weights offloaded to CPU, 2: weights and KV cache discarded")
    },
    FaultKind.WAITING_DEFERRED: {
        "n": Param(int, 20, 1, 100_000, hint="requests kept waiting for a KV transfer"),
        "prompt_tokens": Param(int, 1000, 1, 10_000_000),
        "output_tokens": Param(int, 200, 1, 1_000_000),
    },
    FaultKind.PREFIX_CACHE_COLLAPSE: {
        "keep": Param(float, 0.02, 0.0, 1.0, hint="the share of the usual prefix-cache hits still found")
    },
    FaultKind.SPEC_DECODE_LOW_ACCEPTANCE: {
        "acceptance": Param(float, 0.05, 0.0, 1.0, hint="the chance that each draft token is accepted")
    },
    FaultKind.LORA_STARVING: {},
}
_DURATION = Param(float, None, 0.0, 10_000_000.0, exclusive=True, hint="seconds until it clears itself")


@dataclass(frozen=True, kw_only=True)
class Fault:
    kind: FaultKind
    params: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    expires_at: float | None = None

    def to_dict(self, *, now: float) -> dict[str, Any]:
        remaining = None if self.expires_at is None else round(max(0.0, self.expires_at - now), 3)
        return {"kind": str(self.kind), **self.params, "remaining_s": remaining}


def parse_fault(data: Any, *, now: float, time_scale: float = 1.0) -> Fault:
    """A Fault from its JSON form, with every parameter filled in.

    time_scale divides duration_s (a scenario's timeline runs faster than real time).
    """
    if not isinstance(data, Mapping):
        raise FaultError('a fault must be a JSON object like {"kind": "hang"}')
    kind = _kind(data.get("kind"))
    rules = FAULT_KINDS[kind]
    unknown = sorted(set(data) - set(rules) - {"kind", "duration_s"})
    if unknown:
        takes = ", ".join([*rules, "duration_s"])
        raise FaultError(f"unknown parameter {unknown[0]!r} for {kind}; it takes: {takes}", field=unknown[0])
    params = {name: _value(name, data.get(name, rule.default), rule) for name, rule in rules.items()}
    duration = _value("duration_s", data.get("duration_s"), _DURATION)
    expires = None if duration is None else now + duration / time_scale
    return Fault(kind=kind, params=params, started_at=now, expires_at=expires)


def check_gpus(fault: Fault, *, indices: Sequence[int], instance: str) -> None:
    """Refuse a fault that names a GPU the instance does not have (FaultError naming the field).

    Without this an XID on GPU 0 of an instance that runs on GPU 2 would show nowhere.
    """
    for name in GPU_PARAMS:
        index = fault.params.get(name)
        if index is not None and index not in indices:
            listed = ", ".join(str(i) for i in indices)
            raise FaultError(
                f"{name} {index} is not one of {instance}'s GPUs; its GPU indices: {listed} "
                f"(leave {name} out for every one of them)",
                field=name,
            )


def _kind(value: Any) -> FaultKind:
    known = ", ".join(FAULT_KINDS)
    if value is None:
        raise FaultError(f"kind is required; known kinds: {known}", field="kind")
    try:
        return FaultKind(value)
    except ValueError:
        raise FaultError(f"unknown fault kind {value!r}; known kinds: {known}", field="kind") from None


def _value(name: str, value: Any, rule: Param) -> Any:
    if value is None:
        return None
    if rule.type is bool:
        if not isinstance(value, bool):
            raise FaultError(f"{name} must be true or false, got {value!r}", field=name)
        return value
    if rule.type is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise FaultError(f"{name} must be a list of strings, got {value!r}", field=name)
        return list(value)
    return _number(name, value, rule)


def _number(name: str, value: Any, rule: Param) -> float | int:
    wants_int = rule.type is int
    ok = isinstance(value, int) if wants_int else isinstance(value, int | float)
    if not ok or isinstance(value, bool):
        raise FaultError(
            f"{name} must be {'an integer' if wants_int else 'a number'}, got {value!r}", field=name
        )
    low, high = rule.low, rule.high
    outside = (value <= low or value >= high) if rule.exclusive else (value < low or value > high)
    if outside:
        bounds = f"between {low:g} and {high:g}" + (" (exclusive)" if rule.exclusive else "")
        hint = f" ({rule.hint})" if rule.hint else ""
        raise FaultError(f"{name} must be {bounds}{hint}, got {value!r}", field=name)
    return int(value) if wants_int else float(value)


class FaultBook:
    """The faults active on one instance, at most one per kind."""

    def __init__(self) -> None:
        self._active: dict[FaultKind, Fault] = {}

    def add(self, fault: Fault) -> None:
        self._active[fault.kind] = fault

    def remove(self, kind: FaultKind) -> Fault | None:
        return self._active.pop(kind, None)

    def clear(self) -> list[Fault]:
        gone = list(self._active.values())
        self._active.clear()
        return gone

    def expire(self, now: float) -> list[Fault]:
        """Remove and return the faults whose duration has run out."""
        gone = [f for f in self._active.values() if f.expires_at is not None and f.expires_at <= now]
        for fault in gone:
            del self._active[fault.kind]
        return gone

    def get(self, kind: FaultKind) -> Fault | None:
        return self._active.get(kind)

    def __contains__(self, kind: object) -> bool:
        return kind in self._active

    def __bool__(self) -> bool:
        return bool(self._active)

    def param(self, kind: FaultKind, name: str) -> Any:
        fault = self._active.get(kind)
        return None if fault is None else fault.params[name]

    def to_list(self, *, now: float) -> list[dict[str, Any]]:
        return [f.to_dict(now=now) for f in self._active.values()]
