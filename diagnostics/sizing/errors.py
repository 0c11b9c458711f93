"""The first error vLLM would stop with at start-up, in its own words, and the flags that fix it.

The checks run in vLLM's order: the config (heads against TP, length against the model),
free memory against the request, the weights against the device, then the KV cache:
none at all, or too little for one request at max_model_len. Texts are verbatim from
vLLM's sources for the version (research/vllm_memory.md 1.1 and 3.6), so they stay English in
every language (an engineer searches the log for them); the fixes are messages (core.i18n),
their flags kept as values so a page can show them as code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.i18n import Message, later
from diagnostics.sizing import kv_cache
from diagnostics.sizing.figures import GiB

if TYPE_CHECKING:
    from diagnostics.sizing.calculator import Resolved, SizingSpec

DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


@dataclass(frozen=True)
class StartupError:
    kind: str  # "tp_heads", "max_model_len", "free_memory", "load_oom", "no_kv_memory", "kv_too_small"
    message: str  # vLLM's own words
    fix_messages: tuple[Message | str, ...]  # a plain string is a flag with its value

    @property
    def fixes(self) -> tuple[str, ...]:
        """The fixes in English, as the API, the CLI and the stored results give them."""
        return tuple(str(fix) for fix in self.fix_messages)


def _gib(value: float) -> float:
    return round(value / GiB, 2)


def first_error(
    *,
    spec: SizingSpec,
    resolved: Resolved,
    requested: float,
    weights: float,
    available: float,
    kv: kv_cache.KvLayout,
) -> StartupError | None:
    for check in (_heads, _length, _free_memory, _weights_fit, _kv_memory):
        error = check(
            spec=spec, resolved=resolved, requested=requested, weights=weights, available=available, kv=kv
        )
        if error:
            return error
    return None


def _heads(*, spec: SizingSpec, resolved: Resolved, **_: object) -> StartupError | None:
    heads, tp = spec.arch.num_attention_heads, resolved.tensor_parallel_size
    if heads % tp == 0:
        return None
    valid = [str(size) for size in range(1, spec.gpus + 1) if heads % size == 0 and spec.gpus % size == 0]
    return StartupError(
        "tp_heads",
        f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp}).",
        (f"--tensor-parallel-size {' or '.join(valid)}",),
    )


def _length(*, spec: SizingSpec, resolved: Resolved, **_: object) -> StartupError | None:
    derived = spec.arch.max_position_embeddings
    if not derived or resolved.max_model_len <= derived:
        return None
    return StartupError(
        "max_model_len",
        f"User-specified max_model_len ({resolved.max_model_len}) is greater than the derived max_model_len "
        f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow "
        "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.",
        (
            f"--max-model-len {derived}",
            later("or the model's RoPE scaling (%(key)s), where it supports longer", key="rope_scaling"),
        ),
    )


def _free_memory(
    *, spec: SizingSpec, resolved: Resolved, requested: float, **_: object
) -> StartupError | None:
    total = resolved.total_bytes
    free = total - spec.other_used_bytes
    if free >= requested:
        return None
    util = resolved.gpu_memory_utilization
    device = "on device cuda:0 " if resolved.behaviour.errors_link_docs else "on device "
    most = math.floor(free / total * 100) / 100
    return StartupError(
        "free_memory",
        f"Free memory {device}({_gib(free)}/{_gib(total)} GiB) on startup is less than desired GPU memory "
        f"utilization ({util}, {_gib(requested)} GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by other processes.",
        (
            later("%(flag)s (at most free/total)", flag=f"--gpu-memory-utilization {most:.2f}"),
            later(
                "or stop what holds %(gib)s GiB on the GPU (%(tool)s lists it)",
                gib=_gib(spec.other_used_bytes),
                tool="nvidia-smi",
            ),
        ),
    )


def _weights_fit(*, spec: SizingSpec, resolved: Resolved, weights: float, **_: object) -> StartupError | None:
    free = resolved.total_bytes - spec.other_used_bytes
    if weights < free:
        return None
    return StartupError(
        "load_oom",
        f"torch.OutOfMemoryError: CUDA out of memory while loading the weights: {_gib(weights)} GiB per GPU "
        f"does not fit in the {_gib(free)} GiB free.",
        _more_room_fixes(spec, resolved),
    )


def _kv_memory(
    *,
    spec: SizingSpec,
    resolved: Resolved,
    requested: float,
    available: float,
    kv: kv_cache.KvLayout,
    **_: object,
) -> StartupError | None:
    beh = resolved.behaviour
    tail = f" {DOCS}" if beh.errors_link_docs else ""
    if available <= 0:
        return StartupError(
            "no_kv_memory",
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            f"initializing the engine.{tail}",
            _util_fix(resolved, requested, -available + kv.bytes_per_request(resolved.max_model_len))
            + _more_room_fixes(spec, resolved),
        )
    mml = resolved.max_model_len
    needed = kv_cache.needed_for_one_request(kv, mml, beh)
    if needed <= available:
        return None
    estimate = kv_cache.estimate_max_model_len(kv, available, beh, mml)
    if beh.errors_link_docs:
        estimated = f"Based on the available memory, the estimated maximum model length is {estimate}. "
        message = (
            f"To serve at least one request with the models's max seq len ({mml}), ({_gib(needed)} GiB KV "
            "cache is needed, which is larger than the available KV cache memory "
            f"({_gib(available)} GiB). {estimated}Try increasing `gpu_memory_utilization` or decreasing "
            f"`max_model_len` when initializing the engine.{tail}"
        )
    else:
        estimated = f"Based on the available memory, the estimated maximum model length is {estimate}."
        message = (
            f"To serve at least one request with the models's max seq len ({mml}), "
            f"({needed / GiB:.2f} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({available / GiB:.2f} GiB). {estimated} Try increasing `gpu_memory_utilization` or "
            "decreasing `max_model_len` when initializing the engine."
        )
    fixes: list[Message | str] = [f"--max-model-len {_round_down(estimate)}"] if estimate else []
    fixes += _util_fix(resolved, requested, needed - available)
    if not spec.kv_cache_dtype.startswith("fp8"):
        fixes.append(later("%(flag)s (halves KV bytes per token)", flag="--kv-cache-dtype fp8"))
    return StartupError("kv_too_small", message, tuple(fixes))


def _round_down(length: int) -> int:
    return length // 1024 * 1024 if length >= 2048 else length


def _util_fix(resolved: Resolved, requested: float, shortfall: float) -> tuple[str, ...]:
    """The gpu_memory_utilization that closes the shortfall, when one under 0.98 does."""
    util = math.ceil((requested + shortfall) / resolved.total_bytes * 100) / 100
    if util <= 0.98:
        return (f"--gpu-memory-utilization {util:.2f}",)
    return ()


def _more_room_fixes(spec: SizingSpec, resolved: Resolved) -> tuple[Message | str, ...]:
    fixes: list[Message | str] = []
    if resolved.quantization == "" and spec.arch.dtype != "float32":
        fixes.append(later("%(flag)s (halves the weights)", flag="--quantization fp8"))
    tp = resolved.tensor_parallel_size
    heads = spec.arch.num_attention_heads
    wider = next((size for size in (2, 4, 8, 16) if size > tp and heads % size == 0), None)
    if wider:
        fixes.append(
            later(
                "%(flag)s on %(gpus)s GPUs",
                flag=f"--tensor-parallel-size {wider}",
                gpus=wider * resolved.pipeline_parallel_size,
            )
        )
    fixes.append(
        later(
            "lower %(batched)s or %(seqs)s (smaller activation peak)",
            batched="--max-num-batched-tokens",
            seqs="--max-num-seqs",
        )
    )
    return tuple(fixes)
