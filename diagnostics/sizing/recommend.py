"""Launch flags and host resources that follow from a sizing.

Scenarios are the guide's (2.3.2): short chat (average under 2K tokens) with 16384 batched
tokens, long documents (over 4K) with 32768, RAG (long prompt, short answer) with 65536.
max_num_seqs is what the KV cache holds at the scenario's length with a 15 % margin (the
guide's "270, so 200-256"). Host memory is the guide's 2.4.2/2.4.3: load peak 1.5 x the
weight files plus tokenizer, request buffers and system, the container limit 20 % above it,
and 8 GiB of /dev/shm for multi-GPU tensor parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from core.i18n import Message, later
from diagnostics.sizing import memory
from diagnostics.sizing.figures import GiB

if TYPE_CHECKING:
    from diagnostics.sizing.calculator import Sizing

MARGIN = 0.85
MAX_SEQS = 1024
HOST_OVERHEAD_BYTES = 8 * GiB  # tokenizer ~2, request buffers ~3, system ~3 (the guide's measurement)
LOAD_PEAK_FACTOR = 1.5
STEADY_FACTOR = 0.6
LIMIT_MARGIN = 1.2
SHM_MULTI_GPU_GIB = 8
SHM_MULTI_GPU_WHY = later(
    "tensor-parallel workers exchange through %(shm)s "
    "(%(size)s or %(ipc)s; a memory %(volume)s in Kubernetes)",
    shm="/dev/shm",
    size="--shm-size",
    ipc="--ipc=host",
    volume="emptyDir",
)
SHM_SINGLE_GPU_WHY = later(
    "one GPU: little shared memory is used; 1 GiB leaves room for the engine's message queue"
)


@dataclass(frozen=True)
class Scenario:
    key: str
    label: Message
    prompt: int
    output: int
    batched_tokens: int
    why: Message


SCENARIOS = (
    Scenario("short_chat", later("Short chat"), 1500, 500, 16384, later("average context under 2K tokens")),
    Scenario(
        "long_documents", later("Long documents"), 8000, 1000, 32768, later("average context over 4K tokens")
    ),
    Scenario("rag", later("RAG"), 6000, 300, 65536, later("long prompts, short answers")),
)


def recommendations(sizing: Sizing) -> dict[str, Any]:
    return {
        "scenarios": [_scenario(sizing, s) for s in SCENARIOS] + [_expected(sizing)],
        "host": host_resources(sizing),
    }


def _scenario(sizing: Sizing, scenario: Scenario) -> dict[str, Any]:
    return _fit_scenario(
        sizing,
        key=scenario.key,
        label=scenario.label,
        prompt=scenario.prompt,
        output=scenario.output,
        batched=scenario.batched_tokens,
        why=scenario.why,
    )


def _expected(sizing: Sizing) -> dict[str, Any]:
    spec = sizing.spec
    return _fit_scenario(
        sizing,
        key="expected",
        label=later("Your expected load"),
        prompt=spec.avg_prompt_tokens,
        output=spec.avg_output_tokens,
        batched=sizing.resolved.max_num_batched_tokens,
        why=later("the average prompt and output lengths given"),
    )


def _fit_scenario(
    sizing: Sizing, *, key: str, label: Message, prompt: int, output: int, batched: int, why: Message
) -> dict[str, Any]:
    """Size the spec with the scenario's batched tokens (halved until it starts), then set
    max_num_seqs to what the KV cache holds at the scenario's length, and size again."""
    from diagnostics.sizing.calculator import compute_numbers as compute

    notes: list[Message] = []
    base = replace(sizing.spec, avg_prompt_tokens=prompt, avg_output_tokens=output, max_num_seqs=None)
    trial = compute(replace(base, max_num_batched_tokens=batched))
    while trial.error and trial.error.kind in ("no_kv_memory", "kv_too_small") and batched > 2048:
        batched //= 2
        trial = compute(replace(base, max_num_batched_tokens=batched))
        notes.append(
            later(
                "max_num_batched_tokens lowered to %(batched)s so the KV cache keeps room",
                batched=f"{batched:,}",
            )
        )
    if trial.error:
        return _row(key, label, prompt, output, batched, None, trial, why, notes)
    seqs = _seqs(trial.concurrency_at_average)
    final = compute(replace(base, max_num_batched_tokens=batched, max_num_seqs=seqs))
    seqs = min(_seqs(final.concurrency_at_average), max(seqs, 1)) if not final.error else seqs
    return _row(key, label, prompt, output, batched, seqs, final, why, notes)


def _seqs(concurrency: float) -> int:
    seqs = int(concurrency * MARGIN)
    if seqs >= 16:
        seqs -= seqs % 8
    return max(1, min(seqs, MAX_SEQS))


def _row(key, label, prompt, output, batched, seqs, sized, why, notes) -> dict[str, Any]:  # noqa: ANN001
    return {
        "key": key,
        "label": label,
        "why": why,
        "avg_prompt_tokens": prompt,
        "avg_output_tokens": output,
        "max_num_batched_tokens": batched,
        "max_num_seqs": seqs,
        "concurrency_at_context": round(sized.concurrency_at_average, 1),
        "kv_cache_tokens": sized.capacity.tokens,
        "fits": sized.fits,
        "error": sized.error.message if sized.error else None,
        "notes": notes,
    }


def host_resources(sizing: Sizing) -> dict[str, Any]:
    """Host RAM to load the weights, the container's memory request and limit, /dev/shm;
    per replica (one vLLM process group)."""
    resolved = sizing.resolved
    weights_all, _ = memory.weights_total(
        sizing.spec.arch, quantization=resolved.quantization, dtype=resolved.dtype
    )
    load_peak = LOAD_PEAK_FACTOR * weights_all + HOST_OVERHEAD_BYTES
    steady = STEADY_FACTOR * weights_all + HOST_OVERHEAD_BYTES
    multi_gpu = resolved.tensor_parallel_size * resolved.pipeline_parallel_size > 1
    w = weights_all / GiB
    return {
        "host_ram_gib": round(load_peak / GiB, 1),
        "host_ram_formula": later(
            "1.5 x %(weights)s GiB weights + 8 GiB (tokenizer, request buffers, system)", weights=f"{w:,.1f}"
        ),
        "container_request_gib": round(steady / GiB, 1),
        "container_request_formula": later(
            "0.6 x %(weights)s GiB weights + 8 GiB (steady state)", weights=f"{w:,.1f}"
        ),
        "container_limit_gib": round(load_peak * LIMIT_MARGIN / GiB, 1),
        "container_limit_formula": later("load peak %(peak)s GiB + 20 %%", peak=f"{load_peak / GiB:,.1f}"),
        "shm_gib": SHM_MULTI_GPU_GIB if multi_gpu else 1,
        "shm_why": SHM_MULTI_GPU_WHY if multi_gpu else SHM_SINGLE_GPU_WHY,
    }
