"""Fixes that are checked before they are shown (issue 14): each candidate change of flags is
sized again, and only the changes with which vLLM starts are offered, ranked (the fewest
GPUs first, then the fewest flags changed, then the most KV cache), each with the KV capacity
it gives. When no single change starts it, pairs of changes are tried; when none does, the
answer says so instead of offering flags that fail too (a 70B model on one L40S: neither
"--quantization fp8" nor "--tensor-parallel-size 2" alone starts it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from itertools import combinations
from typing import TYPE_CHECKING, Any

from core.i18n import Message, later

if TYPE_CHECKING:
    from diagnostics.sizing.calculator import Sizing, SizingSpec

MAX_UTILIZATION = 0.98
WIDER_TP = (2, 4, 8)  # one node's worth of GPUs
MIN_UTILIZATION = 0.05
MAX_SHOWN = 5


@dataclass(frozen=True)
class Change:
    """One change of flags, as spec fields and as typed on the command line."""

    fields: tuple[tuple[str, Any], ...]
    flags: tuple[str, ...]

    def applied(self, spec: SizingSpec) -> SizingSpec:
        return replace(spec, **dict(self.fields))

    def __add__(self, other: Change) -> Change:
        return Change(self.fields + other.fields, self.flags + other.flags)


@dataclass(frozen=True)
class Verified:
    change: Change
    sizing: Sizing

    @property
    def gpus(self) -> int:
        return self.sizing.resolved.tensor_parallel_size * self.sizing.resolved.pipeline_parallel_size

    def message(self) -> Message:
        capacity = self.sizing.capacity
        return later(
            "%(flags)s: vLLM starts, with %(tokens)s tokens of KV cache (%(concurrency)s× max_model_len "
            "%(length)s)",
            flags=" ".join(self.change.flags),
            tokens=f"{capacity.tokens:,}",
            concurrency=f"{capacity.max_concurrency:.2f}",
            length=self.sizing.resolved.max_model_len,
        )


def _changes(sizing: Sizing) -> list[Change]:
    """Single changes worth sizing: KV in fp8, weights in fp8, wider tensor parallelism."""
    spec, resolved = sizing.spec, sizing.resolved
    found = []
    if not spec.kv_cache_dtype.startswith("fp8"):
        found.append(Change((("kv_cache_dtype", "fp8"),), ("--kv-cache-dtype fp8",)))
    if resolved.quantization == "" and spec.arch.dtype != "float32":
        found.append(Change((("quantization", "fp8"),), ("--quantization fp8",)))
    tp, pp = resolved.tensor_parallel_size, resolved.pipeline_parallel_size
    heads = spec.arch.num_attention_heads
    for size in WIDER_TP:
        if size > tp and heads % size == 0:
            fields = (("tensor_parallel_size", size), ("gpus", size * pp))
            found.append(Change(fields, (f"--tensor-parallel-size {size}",)))
    return found


def _starts(compute: Callable[[SizingSpec], Sizing], spec: SizingSpec) -> Sizing | None:
    try:
        sized = compute(spec)
    except ValueError:  # a change no launch could have (the calculator's SpecError)
        return None
    return sized if sized.error is None else None


def _search(
    compute: Callable[[SizingSpec], Sizing], spec: SizingSpec, values: list[Any], field: str
) -> tuple[Any, Sizing] | None:
    """The first of `values` (ordered from the least change) with which vLLM starts, by
    bisection: starting is monotonic along each of these flags."""
    lo, hi, best = 0, len(values) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        sized = _starts(compute, replace(spec, **{field: values[mid]}))
        if sized is not None:
            best, hi = (values[mid], sized), mid - 1
        else:
            lo = mid + 1
    return best


def _tuned(compute: Callable[[SizingSpec], Sizing], spec: SizingSpec, sizing: Sizing) -> list[Verified]:
    """The nearest max_model_len and gpu_memory_utilization with which it starts."""
    found = []
    resolved = sizing.resolved
    step = 1024 if resolved.max_model_len > 2048 else 256
    lengths = list(range(resolved.max_model_len // step * step, step - 1, -step))
    lengths = [n for n in lengths if n < resolved.max_model_len]
    if hit := _search(compute, spec, lengths, "max_model_len"):
        found.append(Verified(Change((("max_model_len", hit[0]),), (f"--max-model-len {hit[0]}",)), hit[1]))
    now = round(resolved.gpu_memory_utilization * 100)
    utils = [u / 100 for u in range(now + 1, round(MAX_UTILIZATION * 100) + 1)]
    hit = _search(compute, spec, utils, "gpu_memory_utilization")
    if hit is None:  # other processes hold memory: a lower share may leave them room
        hit = _first(compute, spec, [u / 100 for u in range(now - 1, round(MIN_UTILIZATION * 100) - 1, -1)])
    if hit:
        change = Change((("gpu_memory_utilization", hit[0]),), (f"--gpu-memory-utilization {hit[0]:.2f}",))
        found.append(Verified(change, hit[1]))
    return found


def _first(compute: Callable[[SizingSpec], Sizing], spec: SizingSpec, utils: list[float]) -> tuple | None:
    """The first utilization, going down, with which it starts (too low leaves no KV cache:
    not monotonic, so scanned)."""
    for util in utils:
        if (sized := _starts(compute, replace(spec, gpu_memory_utilization=util))) is not None:
            return util, sized
    return None


def verified_fixes(sizing: Sizing, compute: Callable[[SizingSpec], Sizing]) -> list[Verified]:
    """The changes of flags with which this set-up starts, best first."""
    spec = sizing.spec
    found = _tuned(compute, spec, sizing)
    singles = _changes(sizing)
    for change in singles:
        found += _verified(compute, spec, change)
    if not found:
        for pair in _pairs(singles):
            found += _verified(compute, spec, pair)
    return sorted(found, key=lambda v: (v.gpus, len(v.change.flags), -v.sizing.capacity.tokens))[:MAX_SHOWN]


def _verified(compute: Callable[[SizingSpec], Sizing], spec: SizingSpec, change: Change) -> list[Verified]:
    """The change when vLLM starts with it; else the change with the nearest shorter context or
    share of the GPU that starts it (sized once, then tuned from that sizing)."""
    changed = change.applied(spec)
    try:
        sized = compute(changed)
    except ValueError:  # a change no launch could have (the calculator's SpecError)
        return []
    if sized.error is None:
        return [Verified(change, sized)]
    return [Verified(change + v.change, v.sizing) for v in _tuned(compute, changed, sized)]


def _pairs(singles: Iterable[Change]) -> list[Change]:
    """Two different kinds of change together (never two tensor-parallel sizes)."""
    return [
        a + b
        for a, b in combinations(singles, 2)
        if {name for name, _ in a.fields}.isdisjoint({name for name, _ in b.fields})
    ]


def fix_messages(sizing: Sizing, compute: Callable[[SizingSpec], Sizing]) -> tuple[Message, ...]:
    fixes = verified_fixes(sizing, compute)
    if fixes:
        return tuple(v.message() for v in fixes)
    return (
        later(
            "no change of flags on %(gpus)s GPU(s) starts it (each candidate was sized again): more or "
            "bigger GPUs, or a smaller or quantized checkpoint",
            gpus=sizing.resolved.tensor_parallel_size * sizing.resolved.pipeline_parallel_size,
        ),
    )
