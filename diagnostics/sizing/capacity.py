"""Scheduled capacity findings: an instance's flags against its GPUs (will it start, how many
requests fit) and against the load it really sees (prompt lengths and KV pressure from the
probes). The guide's 03:00 case is the model: max_model_len 32768 and max_num_seqs 256
looked fine for 2K-token chats, until a batch of 30K-token prompts filled the KV cache
with a handful of requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnostics.sizing import kv_cache
from diagnostics.sizing.calculator import Sizing

FEW_AT_MAX_LEN = 8  # fewer max-length requests than this fill the KV cache: a handful
KV_PRESSURE = 0.9  # KV usage above this, with waiting or preempted requests, is pressure


@dataclass(frozen=True, kw_only=True)
class ObservedLoad:
    """What the probes saw over the check's window (maxima), None where not measured."""

    prompt_p95: float | None = None
    prompt_p99: float | None = None
    kv_usage_max: float | None = None
    waiting_max: float | None = None
    preemptions_per_s_max: float | None = None

    @property
    def under_pressure(self) -> bool:
        full = (self.kv_usage_max or 0) >= KV_PRESSURE
        return full and ((self.waiting_max or 0) > 0 or (self.preemptions_per_s_max or 0) > 0)


@dataclass(frozen=True, kw_only=True)
class Issue:
    code: str
    severity: str  # critical, warning, info
    title: str
    detail: str
    fix: str
    numbers: dict[str, Any] = field(default_factory=dict)


def check(sizing: Sizing, load: ObservedLoad) -> list[Issue]:
    """Every capacity issue of one instance, the worst first."""
    if sizing.error:
        return [_will_not_start(sizing)]
    issues = [
        issue
        for issue in (_long_prompts(sizing, load), _few_at_max_len(sizing), _seqs_beyond_kv(sizing))
        if issue
    ]
    order = {"critical": 0, "warning": 1, "info": 2}
    return sorted(issues, key=lambda issue: order[issue.severity])


def _will_not_start(sizing: Sizing) -> Issue:
    error = sizing.error
    assert error is not None
    return Issue(
        code="will_not_start",
        severity="critical",
        title="Would not start with its launch flags",
        detail=error.message,
        fix="; ".join(error.fixes),
        numbers={"available_kv_gib": round(sizing.available_kv_bytes / 2**30, 2), "error_kind": error.kind},
    )


def _long_prompts(sizing: Sizing, load: ObservedLoad) -> Issue | None:
    """Observed long prompts that fill the KV cache with far fewer requests than max_num_seqs."""
    prompt = load.prompt_p99 or load.prompt_p95
    if not prompt:
        return None
    seqs = sizing.resolved.max_num_seqs
    context = int(prompt) + sizing.spec.avg_output_tokens
    fit = kv_cache.concurrency_at(sizing.kv, sizing.capacity.num_blocks, context)
    if fit >= seqs or fit >= 2 * max(sizing.concurrency_at_average, 1) or fit >= 64:
        return None
    pressure = load.under_pressure
    numbers = {
        "prompt_tokens_p99": round(prompt),
        "requests_that_fit": round(fit, 1),
        "max_num_seqs": seqs,
        "kv_usage_max": load.kv_usage_max,
        "waiting_max": load.waiting_max,
        "preemptions_per_s_max": load.preemptions_per_s_max,
        "max_model_len": sizing.resolved.max_model_len,
    }
    return Issue(
        code="long_prompts_exhaust_kv",
        severity="critical" if pressure else "warning",
        title=f"Prompts of {int(prompt):,} tokens: {fit:.1f} fit in the KV cache at once "
        f"(max_num_seqs {seqs})",
        detail=(
            f"The probes saw p99 prompts of {int(prompt):,} tokens. At that length the KV cache "
            f"({sizing.capacity.tokens:,} tokens) holds {fit:.1f} requests, so a handful of them leave the "
            "rest waiting or preempted"
            + (
                f"; KV usage reached {load.kv_usage_max:.0%} with requests waiting or preempted."
                if pressure
                else "; no pressure seen yet."
            )
        ),
        fix=_long_prompt_fix(sizing, int(prompt)),
        numbers=numbers,
    )


def _long_prompt_fix(sizing: Sizing, prompt: int) -> str:
    fixes = [
        "queue long-document batches instead of sending them at once",
        f"lower --max-model-len (now {sizing.resolved.max_model_len:,}) so one request cannot take so much",
    ]
    if not sizing.spec.kv_cache_dtype.startswith("fp8"):
        fixes.append("--kv-cache-dtype fp8 doubles the tokens that fit")
    fixes.append("or add GPUs (tensor parallelism frees memory for KV)")
    return "; ".join(fixes)


def _few_at_max_len(sizing: Sizing) -> Issue | None:
    at_max = sizing.capacity.max_concurrency
    seqs = sizing.resolved.max_num_seqs
    if at_max >= FEW_AT_MAX_LEN or at_max >= seqs:
        return None
    mml = sizing.resolved.max_model_len
    return Issue(
        code="few_requests_at_max_len",
        severity="warning",
        title=f"{at_max:.1f} requests of max_model_len {mml:,} fill the KV cache",
        detail=(
            f"With max_model_len {mml:,} and max_num_seqs {seqs}, {at_max:.1f} requests at full length "
            f"take the whole KV cache ({sizing.capacity.tokens:,} tokens): a batch of long prompts "
            "starves everyone."
        ),
        fix=f"cap prompt length at the gateway or lower --max-model-len; "
        f"--max-num-seqs {max(int(at_max), 1)} if long requests are the norm",
        numbers={"max_concurrency": round(at_max, 2), "max_model_len": mml, "max_num_seqs": seqs},
    )


def _seqs_beyond_kv(sizing: Sizing) -> Issue | None:
    """max_num_seqs above what the KV cache holds at the expected average context."""
    seqs = sizing.resolved.max_num_seqs
    fit = sizing.concurrency_at_average
    if fit >= seqs:
        return None
    return Issue(
        code="max_num_seqs_beyond_kv",
        severity="info",
        title=f"max_num_seqs {seqs} is above the {fit:.0f} requests the KV cache holds "
        f"at {sizing.average_context:,} tokens",
        detail="Requests beyond that wait for KV blocks or preempt others; the guide sizes max_num_seqs as "
        "available KV / KV per average request, with a margin.",
        fix=f"--max-num-seqs {max(int(fit * 0.85), 1)}",
        numbers={"max_num_seqs": seqs, "requests_that_fit": round(fit, 1), "context": sizing.average_context},
    )
