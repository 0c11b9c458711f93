"""Scheduled capacity findings: an instance's flags against its GPUs (will it start, how many
requests fit) and against the load it really sees (prompt lengths and KV pressure from the
probes). The guide's 03:00 case is the model: max_model_len 32768 and max_num_seqs 256
looked fine for 2K-token chats, until a batch of 30K-token prompts filled the KV cache
with a handful of requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.i18n import Message, later
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
    """A capacity problem, its text kept as messages (core.i18n): the check runs with no
    reader, and the finding is read later in English or Chinese."""

    code: str
    severity: str  # critical, warning, info
    title_message: Message
    detail_message: Message | str  # a plain string is vLLM's own error, as it logs it
    fix_messages: tuple[Message | str, ...]  # a plain string is a flag with its value
    numbers: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return str(self.title_message)

    @property
    def detail(self) -> str:
        return str(self.detail_message)

    @property
    def fix(self) -> str:
        return "; ".join(str(fix) for fix in self.fix_messages)

    def text(self) -> dict[str, Any]:
        """The title, detail and fixes as stored messages (core.i18n.shown reads them back)."""
        return {
            "title": _stored(self.title_message),
            "detail": _stored(self.detail_message),
            "fixes": [_stored(fix) for fix in self.fix_messages],
        }


def _stored(text: Message | str) -> dict[str, Any] | str:
    return text.to_json() if isinstance(text, Message) else text


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
        title_message=later("Would not start with its launch flags"),
        detail_message=error.message,
        fix_messages=error.fix_messages,
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
        title_message=later(
            "Prompts of %(prompt)s tokens: %(fit)s fit in the KV cache at once (max_num_seqs %(seqs)s)",
            prompt=f"{int(prompt):,}",
            fit=f"{fit:.1f}",
            seqs=seqs,
        ),
        detail_message=_long_prompt_detail(sizing, load, prompt=int(prompt), fit=fit),
        fix_messages=_long_prompt_fixes(sizing),
        numbers=numbers,
    )


def _long_prompt_detail(sizing: Sizing, load: ObservedLoad, *, prompt: int, fit: float) -> Message:
    values = {"prompt": f"{prompt:,}", "tokens": f"{sizing.capacity.tokens:,}", "fit": f"{fit:.1f}"}
    if load.under_pressure:
        return later(
            "The probes saw p99 prompts of %(prompt)s tokens. At that length the KV cache (%(tokens)s "
            "tokens) holds %(fit)s requests, so a handful of them leave the rest waiting or preempted; "
            "KV usage reached %(usage)s with requests waiting or preempted.",
            usage=f"{load.kv_usage_max:.0%}",
            **values,
        )
    return later(
        "The probes saw p99 prompts of %(prompt)s tokens. At that length the KV cache (%(tokens)s "
        "tokens) holds %(fit)s requests, so a handful of them leave the rest waiting or preempted; "
        "no pressure seen yet.",
        **values,
    )


def _long_prompt_fixes(sizing: Sizing) -> tuple[Message, ...]:
    fixes = [
        later("queue long-document batches instead of sending them at once"),
        later(
            "lower %(flag)s (now %(now)s) so one request cannot take so much",
            flag="--max-model-len",
            now=f"{sizing.resolved.max_model_len:,}",
        ),
    ]
    if not sizing.spec.kv_cache_dtype.startswith("fp8"):
        fixes.append(later("%(flag)s doubles the tokens that fit", flag="--kv-cache-dtype fp8"))
    fixes.append(later("or add GPUs (tensor parallelism frees memory for KV)"))
    return tuple(fixes)


def _few_at_max_len(sizing: Sizing) -> Issue | None:
    at_max = sizing.capacity.max_concurrency
    seqs = sizing.resolved.max_num_seqs
    if at_max >= FEW_AT_MAX_LEN or at_max >= seqs:
        return None
    mml = sizing.resolved.max_model_len
    return Issue(
        code="few_requests_at_max_len",
        severity="warning",
        title_message=later(
            "%(fit)s requests of max_model_len %(mml)s fill the KV cache", fit=f"{at_max:.1f}", mml=f"{mml:,}"
        ),
        detail_message=later(
            "With max_model_len %(mml)s and max_num_seqs %(seqs)s, %(fit)s requests at full length take the "
            "whole KV cache (%(tokens)s tokens): a batch of long prompts starves everyone.",
            mml=f"{mml:,}",
            seqs=seqs,
            fit=f"{at_max:.1f}",
            tokens=f"{sizing.capacity.tokens:,}",
        ),
        fix_messages=(
            later("cap prompt length at the gateway or lower %(flag)s", flag="--max-model-len"),
            later("%(flag)s if long requests are the norm", flag=f"--max-num-seqs {max(int(at_max), 1)}"),
        ),
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
        title_message=later(
            "max_num_seqs %(seqs)s is above the %(fit)s requests the KV cache holds at %(context)s tokens",
            seqs=seqs,
            fit=f"{fit:.0f}",
            context=f"{sizing.average_context:,}",
        ),
        detail_message=later(
            "Requests beyond that wait for KV blocks or preempt others; the guide sizes max_num_seqs as "
            "available KV / KV per average request, with a margin."
        ),
        fix_messages=(f"--max-num-seqs {max(int(fit * 0.85), 1)}",),
        numbers={"max_num_seqs": seqs, "requests_that_fit": round(fit, 1), "context": sizing.average_context},
    )
