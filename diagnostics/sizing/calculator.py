"""Does this model fit on these GPUs with these flags, and how many requests of what length
run at once? vLLM's V1 accounting, figure by figure, each with its formula filled in.

`size(spec)` is the whole answer (with recommendations); `compute(spec)` the answer for
exactly the flags given, used by the recommendations, charts and scheduled checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from core.i18n import Message, later
from diagnostics.sizing import errors, kv_cache, memory
from diagnostics.sizing.architecture import Architecture, LayerKind
from diagnostics.sizing.figures import Figure, GiB, MiB, Text, g, gib, n
from diagnostics.sizing.versions import VllmBehaviour, behaviour
from fleet.gpu_catalog import GpuModel


class SpecError(ValueError):
    """Inputs that cannot describe a vLLM launch; the message (a core.i18n message, English
    as str()) names the input."""


@dataclass(frozen=True, kw_only=True)
class SizingSpec:
    arch: Architecture
    gpu: GpuModel | None = None
    device_total_bytes: float | None = None  # cudaMemGetInfo's total, when known; else from the GPU
    gpus: int = 1
    tensor_parallel_size: int | None = None  # None: all the GPUs of one replica
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: float | None = None  # None: the version's default
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    max_num_seqs: int | None = None  # None: vLLM's default for the GPU
    max_num_batched_tokens: int | None = None
    dtype: str = "auto"
    quantization: str | None = None  # None: the checkpoint's own
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    avg_prompt_tokens: int = 1500
    avg_output_tokens: int = 500
    vllm_version: str = ""
    enforce_eager: bool = False
    enable_chunked_prefill: bool = True
    other_used_bytes: float = 0.0  # held on the GPU by other processes at start-up
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory-bytes
    measured: memory.Measured = field(default_factory=memory.Measured)


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """The flags vLLM would actually run with, defaults filled in."""

    behaviour: VllmBehaviour
    total_bytes: float
    tensor_parallel_size: int
    pipeline_parallel_size: int
    replicas: int
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    dtype: str
    quantization: str


@dataclass(frozen=True, kw_only=True)
class Sizing:
    spec: SizingSpec
    resolved: Resolved
    figures: tuple[Figure, ...]
    weights_bytes_per_gpu: float
    available_kv_bytes: float
    kv: kv_cache.KvLayout
    capacity: kv_cache.KvCapacity
    concurrency_at_average: float
    fits: bool
    error: errors.StartupError | None
    notes: tuple[str, ...]  # figures.Text: English, with its message
    recommendations: dict[str, Any] = field(default_factory=dict)
    # What the memory vLLM requests holds besides the KV cache (weights, activation, non-torch,
    # CUDA graphs), subtracted in that order; None when --kv-cache-memory-bytes sets the KV cache.
    held_bytes: tuple[float, ...] | None = None

    def figure(self, key: str) -> Figure:
        return next(f for f in self.figures if f.key == key)

    @property
    def average_context(self) -> int:
        return self.spec.avg_prompt_tokens + self.spec.avg_output_tokens

    def to_dict(self) -> dict[str, Any]:
        r = self.resolved
        return {
            "model": self.spec.arch.name,
            "gpu": self.spec.gpu.key if self.spec.gpu else None,
            "gpu_memory_mib": self.spec.gpu.memory_mib if self.spec.gpu else None,  # "custom": the one figure
            "gpus": self.spec.gpus,
            "vllm_version": r.behaviour.label,
            "flags": {
                "tensor_parallel_size": r.tensor_parallel_size,
                "pipeline_parallel_size": r.pipeline_parallel_size,
                "gpu_memory_utilization": r.gpu_memory_utilization,
                "max_model_len": r.max_model_len,
                "max_num_seqs": r.max_num_seqs,
                "max_num_batched_tokens": r.max_num_batched_tokens,
                "kv_cache_dtype": self.spec.kv_cache_dtype,
                "block_size": self.kv.block_size,
                "quantization": r.quantization,
                "dtype": r.dtype,
            },
            "weights_gib_per_gpu": round(gib(self.weights_bytes_per_gpu), 3),
            "kv_bytes_per_token": round(self.kv.bytes_per_token),
            "kv_bytes_per_token_long_context": round(self.kv.bytes_per_token_growing),
            "available_kv_cache_gib": round(gib(self.available_kv_bytes), 3),
            "kv_cache_gib": round(gib(self.capacity.allocated_bytes), 3),
            "kv_cache_blocks": self.capacity.num_blocks,
            "kv_cache_tokens": self.capacity.tokens,
            "max_concurrency": round(self.capacity.max_concurrency, 2),
            "max_concurrency_at_average_context": round(self.concurrency_at_average, 2),
            "average_context_tokens": self.average_context,
            "replicas": r.replicas,
            "fits": self.fits,
            "error": self.error.message if self.error else None,
            "error_kind": self.error.kind if self.error else None,
            "fixes": list(self.error.fixes) if self.error else [],
            "recommendations": _english(self.recommendations),
            "figures": [f.to_dict() for f in self.figures],
            "notes": [str(note) for note in self.notes],  # plain English text in the JSON
        }


def _english(value: Any) -> Any:
    """A result's messages as English text, for the JSON the API, the CLI and the check keep."""
    if isinstance(value, Message):
        return str(value)
    if isinstance(value, dict):
        return {key: _english(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_english(item) for item in value]
    return value


def size(spec: SizingSpec) -> Sizing:
    """The sizing for the flags given, with recommendations for the guide's scenarios."""
    from diagnostics.sizing import fixes, recommend  # both size variants of the spec itself

    result = compute(spec)
    if result.error is not None:  # only fixes that start it, each sized again (fixes.py)
        result = replace(
            result, error=replace(result.error, fix_messages=fixes.fix_messages(result, compute_numbers))
        )
    return replace(result, recommendations=recommend.recommendations(result))


def compute_numbers(spec: SizingSpec) -> Sizing:
    """A variant's sizing without its figures: the fixes and recommendations read its numbers."""
    return compute(spec, explain=False)


def compute(spec: SizingSpec, *, explain: bool = True) -> Sizing:
    """The sizing of the flags given. explain=False leaves out the figures and their formulas
    (the recommendations and the fixes size many variants and read only their numbers)."""
    resolved = resolve(spec)
    arch, beh = spec.arch, resolved.behaviour
    tp, pp = resolved.tensor_parallel_size, resolved.pipeline_parallel_size
    figures: list[Figure] = []
    notes: list[str] = []

    total = resolved.total_bytes
    requested = memory.requested(total, resolved.gpu_memory_utilization, beh)
    weights_all, how = memory.weights_total(arch, quantization=resolved.quantization, dtype=resolved.dtype)
    weights = spec.measured.weights if spec.measured.weights is not None else weights_all / (tp * pp)
    if explain:
        figures.append(_device_figure(spec, total))
        figures.append(_requested_figure(total, requested, resolved))
        figures.append(_weights_figure(spec, weights, weights_all, how, tp, pp))

    kv = _layout(spec, resolved, spec.kv_cache_dtype)
    notes.extend(kv.notes)

    held = None
    if spec.kv_cache_memory_bytes:
        available = float(spec.kv_cache_memory_bytes)
        if explain:
            figures.append(
                Figure(
                    key="available_kv",
                    label=later("KV cache memory per GPU"),
                    value=gib(available),
                    unit="GiB",
                    formula=f"--kv-cache-memory-bytes {spec.kv_cache_memory_bytes:,} (profiling skipped)",
                )
            )
    else:
        held = _held(spec, resolved, weights, sum(kv.kinds.values()), figures if explain else None, notes)
        available = _after(requested, held)
        if explain:
            terms = " - ".join(g(term) for term in (requested, *held) if term)
            figures.append(
                _gib_figure("available_kv", later("Available KV cache memory per GPU"), available, terms)
            )

    capacity = kv_cache.capacity(kv, available, max_model_len=resolved.max_model_len, behaviour=beh)
    context = spec.avg_prompt_tokens + spec.avg_output_tokens
    average = kv_cache.concurrency_at(kv, capacity.num_blocks, context)
    if explain:
        figures.extend(_kv_figures(arch, kv, tp))
        figures.extend(_capacity_figures(kv, capacity, resolved, available, average, spec))

    error = errors.first_error(
        spec=spec, resolved=resolved, requested=requested, weights=weights, available=available, kv=kv
    )
    return Sizing(
        spec=spec,
        resolved=resolved,
        figures=tuple(figures),
        weights_bytes_per_gpu=weights,
        available_kv_bytes=available,
        kv=kv,
        capacity=capacity,
        concurrency_at_average=average,
        fits=error is None,
        error=error,
        notes=tuple(notes),
        held_bytes=held,
    )


def kv_blocks_with(
    sizing: Sizing, *, gpu_memory_utilization: float, kv_cache_dtype: str
) -> tuple[kv_cache.KvLayout, int]:
    """(KV layout, blocks) of the sizing's spec with only gpu_memory_utilization and
    kv_cache_dtype changed: what compute() of that spec finds, from the terms already worked
    out (neither input changes what the memory holds besides the KV cache)."""
    spec, resolved = sizing.spec, sizing.resolved
    kv = sizing.kv if kv_cache_dtype == spec.kv_cache_dtype else _layout(spec, resolved, kv_cache_dtype)
    if sizing.held_bytes is None:  # --kv-cache-memory-bytes
        available = sizing.available_kv_bytes
    else:
        requested = memory.requested(resolved.total_bytes, gpu_memory_utilization, resolved.behaviour)
        available = _after(requested, sizing.held_bytes)
    capacity = kv_cache.capacity(
        kv, available, max_model_len=resolved.max_model_len, behaviour=resolved.behaviour
    )
    return kv, capacity.num_blocks


def _layout(spec: SizingSpec, resolved: Resolved, kv_cache_dtype: str) -> kv_cache.KvLayout:
    return kv_cache.layout(
        spec.arch,
        behaviour=resolved.behaviour,
        tensor_parallel_size=resolved.tensor_parallel_size,
        pipeline_parallel_size=resolved.pipeline_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        block_size=spec.block_size,
        max_num_batched_tokens=resolved.max_num_batched_tokens,
        model_dtype=resolved.dtype,
    )


def _after(requested: float, held: tuple[float, ...]) -> float:
    """The KV cache's memory: what vLLM requests less what it holds besides, term by term."""
    available = requested
    for term in held:
        available -= term
    return available


def resolve(spec: SizingSpec) -> Resolved:
    """The flags vLLM would run with; SpecError for inputs no launch could have."""
    try:
        beh = behaviour(spec.vllm_version)
    except ValueError as exc:
        raise SpecError(exc.args[0]) from None
    if spec.gpus < 1:
        raise SpecError(_at_least("gpus"))
    pp = spec.pipeline_parallel_size
    if pp < 1:
        raise SpecError(_at_least("pipeline_parallel_size"))
    tp = spec.tensor_parallel_size or max(spec.gpus // pp, 1)
    if tp < 1:
        raise SpecError(_at_least("tensor_parallel_size"))
    if tp * pp > spec.gpus:
        raise SpecError(
            later(
                "tensor_parallel_size %(tp)s x pipeline_parallel_size %(pp)s needs %(needed)s GPUs, "
                "not %(gpus)s",
                tp=tp,
                pp=pp,
                needed=tp * pp,
                gpus=spec.gpus,
            )
        )
    if spec.gpus % (tp * pp):
        raise SpecError(
            later(
                "%(gpus)s GPUs do not divide into replicas of TP %(tp)s x PP %(pp)s; "
                "use a multiple of %(needed)s",
                gpus=spec.gpus,
                tp=tp,
                pp=pp,
                needed=tp * pp,
            )
        )
    total = _total_bytes(spec)
    util = spec.gpu_memory_utilization
    if util is None:
        util = beh.default_gpu_memory_utilization
    if not 0 < util <= 1:
        raise SpecError(later("gpu_memory_utilization must be in (0, 1], not %(util)s", util=util))
    max_len = spec.max_model_len or spec.arch.max_position_embeddings
    if not max_len:
        raise SpecError(later("max_model_len is needed: the model's config has no max_position_embeddings"))
    if max_len < 1:
        raise SpecError(_at_least("max_model_len"))
    seqs, batched = _scheduler_defaults(spec, beh, total, max_len)
    quant = spec.arch.quantization if spec.quantization is None else spec.quantization
    try:
        memory.bytes_per_param(quant, spec.dtype)
    except ValueError as exc:
        raise SpecError(exc.args[0]) from None
    dtype = spec.dtype
    if dtype in ("", "auto"):  # vLLM runs float32 checkpoints in 16 bits unless told otherwise
        dtype = "bfloat16" if spec.arch.dtype == "float32" else spec.arch.dtype
    if dtype not in ("bfloat16", "float16", "float32"):
        raise SpecError(
            later("dtype must be auto, bfloat16, float16 or float32, not %(dtype)s", dtype=repr(spec.dtype))
        )
    block = spec.block_size
    if block is not None and (block < 1 or block % 16 and block not in (1, 8)):
        raise SpecError(later("block_size must be 1, 8 or a multiple of 16, not %(block)s", block=block))
    return Resolved(
        behaviour=beh,
        total_bytes=total,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        replicas=spec.gpus // (tp * pp),
        gpu_memory_utilization=util,
        max_model_len=max_len,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        dtype=dtype,
        quantization=quant,
    )


def _at_least(flag: str) -> Message:
    return later("%(flag)s must be at least 1", flag=flag)


def _total_bytes(spec: SizingSpec) -> float:
    if spec.device_total_bytes:
        return float(spec.device_total_bytes)
    if spec.gpu is None:
        raise SpecError(later("a GPU model (or the device's total memory) is needed"))
    return float(spec.gpu.memory_mib * MiB - memory.CUDA_RESERVED_BYTES)


def _scheduler_defaults(spec: SizingSpec, beh: VllmBehaviour, total: float, max_len: int) -> tuple[int, int]:
    """vLLM's OpenAI server defaults: 8192 batched tokens and 1024 sequences on GPUs of 70 GiB
    or more that are not A100s, 2048 and 256 elsewhere, then trimmed to what can be used."""
    name = (spec.gpu.name if spec.gpu else "").lower()
    big = total >= 70 * GiB and "a100" not in name
    seqs = spec.max_num_seqs or (1024 if big else 256)
    batched = spec.max_num_batched_tokens
    if batched is None:
        batched = 8192 if big else 2048
        if not spec.enable_chunked_prefill:
            batched = max(max_len, batched)
        if beh.version >= (0, 12):
            batched = min(seqs * max_len, batched)
    if spec.max_num_seqs is None:
        seqs = min(seqs, batched)
    for flag, value in (("max_num_seqs", seqs), ("max_num_batched_tokens", batched)):
        if value < 1:
            raise SpecError(_at_least(flag))
    return seqs, batched


def _requested_figure(total: float, requested: float, resolved: Resolved) -> Figure:
    return Figure(
        key="requested",
        label=later("Memory vLLM requests per GPU"),
        value=gib(requested),
        unit="GiB",
        formula=f"{g(total)} x gpu_memory_utilization {resolved.gpu_memory_utilization:g}"
        + (" (rounded up)" if resolved.behaviour.rounds_request_up else ""),
    )


def _weights_figure(
    spec: SizingSpec, weights: float, weights_all: float, how: str, tp: int, pp: int
) -> Figure:
    return Figure(
        key="weights",
        label=later("Weights per GPU"),
        value=gib(weights),
        unit="GiB",
        formula="measured (Model loading took)"
        if spec.measured.weights is not None
        else f"{g(weights_all)} ({how}) / (TP {tp} x PP {pp})",
    )


def _gib_figure(key: str, label: Message, value: float, formula: str) -> Figure:
    return Figure(key=key, label=label, value=gib(value), unit="GiB", formula=formula)


def _device_figure(spec: SizingSpec, total: float) -> Figure:
    if spec.device_total_bytes or spec.gpu is None:
        formula = "the device's total as CUDA reports it"
    else:
        reserved = g(memory.CUDA_RESERVED_BYTES)
        formula = f"{spec.gpu.memory_mib:,} MiB (NVML total) - {reserved} CUDA keeps back"
    return _gib_figure("device_total", later("GPU memory CUDA reports"), total, formula)


def _held(
    spec: SizingSpec,
    resolved: Resolved,
    weights: float,
    layers_on_rank: int,
    figures: list[Figure] | None,
    notes: list[str],
) -> tuple[float, float, float, float]:
    """What the memory vLLM requests holds besides the KV cache: weights, peak activation,
    non-torch memory and CUDA graphs (0 where this version does not subtract them). Their
    figures go to `figures` (None: not wanted)."""
    arch, measured = spec.arch, spec.measured
    tp = resolved.tensor_parallel_size
    if measured.activation is not None:
        activation, formula = measured.activation, "measured (torch peak memory increase)"
    else:
        activation, formula = memory.activation_estimate(
            arch,
            max_num_batched_tokens=resolved.max_num_batched_tokens,
            max_num_seqs=resolved.max_num_seqs,
            tensor_parallel_size=tp,
        )
        formula = f"estimate: {formula}"
    if figures is not None:
        figures.append(_gib_figure("activation", later("Peak activation (profile run)"), activation, formula))
    non_torch = measured.non_torch if measured.non_torch is not None else memory.non_torch_estimate(tp)
    formula = "estimate: 0.1 GiB" + (" + 0.1 GiB for TP > 1" if tp > 1 else "")
    if measured.non_torch is not None:
        formula = "measured"
    if figures is not None:
        figures.append(_gib_figure("non_torch", later("Non-torch memory (NCCL, cuBLAS)"), non_torch, formula))
    graphs = 0.0
    if resolved.behaviour.subtracts_cuda_graphs and not spec.enforce_eager:
        if measured.cuda_graphs is not None:
            graphs, formula = measured.cuda_graphs, "measured (Estimated CUDA graph memory)"
        else:
            graphs = memory.cuda_graph_estimate(arch, layers_on_rank)
            per = memory.CUDA_GRAPH_BYTES_PER_LAYER * (3 if arch.is_moe else 1)
            base = g(memory.CUDA_GRAPH_BASE_BYTES)
            formula = f"estimate: {base} + {layers_on_rank} layers x {per / MiB:g} MiB"
        if figures is not None:
            figures.append(_gib_figure("cuda_graphs", later("CUDA graphs"), graphs, formula))
    elif not spec.enforce_eager:
        notes.append(
            Text(
                later(
                    "vLLM %(version)s captures CUDA graphs after sizing the KV cache, in the memory left "
                    "outside gpu_memory_utilization; keep that slack (typically 0.3-1.5 GiB)",
                    version=resolved.behaviour.label,
                )
            )
        )
    return weights, activation, non_torch, graphs


def _kv_figures(arch: Architecture, kv: kv_cache.KvLayout, tp: int) -> list[Figure]:
    layers = sum(count for kind, count in kv.kinds.items() if kind != LayerKind.LINEAR)
    if LayerKind.MLA in kv.kinds:
        latent = f"({arch.kv_lora_rank} + {arch.qk_rope_head_dim}) latent"
        per_token = f"{layers} MLA layers x {latent} x {kv.dtype_bytes} B"
        page = f"{kv.block_size} tokens x {kv.head_size} x {kv.dtype_bytes} B (not split across GPUs)"
    else:
        heads = f"{kv.kv_heads_per_rank} KV heads per GPU"
        per_token = f"2 (K, V) x {layers} layers x {heads} x {kv.head_size} head dim x {kv.dtype_bytes} B"
        page = f"2 x {kv.block_size} tokens x {kv.kv_heads_per_rank} x {kv.head_size} x {kv.dtype_bytes} B"
    result = [
        Figure(
            key="kv_bytes_per_token",
            label=later("KV bytes per token per GPU"),
            value=kv.bytes_per_token,
            unit="bytes",
            formula=per_token,
        ),
        Figure(
            key="page_bytes",
            label=later("Block page per layer"),
            value=kv.page_bytes,
            unit="bytes",
            formula=page,
        ),
    ]
    if kv.hybrid:
        kinds = ", ".join(f"{count} {kind.value}" for kind, count in kv.kinds.items())
        result.append(
            Figure(
                key="groups",
                label=later("KV cache groups"),
                value=kv.num_groups,
                unit="groups",
                formula=f"{kinds} layers in groups of {kv.group_size}: "
                + " + ".join(f"cdiv({kv.kinds[k]}, {kv.group_size})" for k in kv.groups),
                note=_hybrid_note(arch, kv),
            )
        )
    return result


def _hybrid_note(arch: Architecture, kv: kv_cache.KvLayout) -> Message | str:
    sliding = later(
        "sliding layers keep at most window %(window)s + the batched tokens", window=arch.sliding_window
    )
    linear = later(
        "linear layers keep one %(bytes)s-byte state per sequence", bytes=f"{kv.linear_state_bytes:,}"
    )
    if LayerKind.SLIDING in kv.kinds and LayerKind.LINEAR in kv.kinds:
        return later("%(first)s; %(second)s", first=sliding, second=linear)
    if LayerKind.SLIDING in kv.kinds:
        return sliding
    return linear if LayerKind.LINEAR in kv.kinds else ""


def _capacity_figures(
    kv: kv_cache.KvLayout,
    cap: kv_cache.KvCapacity,
    resolved: Resolved,
    available: float,
    average: float,
    spec: SizingSpec,
) -> list[Figure]:
    mml = resolved.max_model_len
    per_request = kv.blocks_per_request(mml)
    if resolved.behaviour.tokens_from_concurrency:
        tokens_formula = f"int({cap.max_concurrency:.4f} x {mml:,})"
    else:
        tokens_formula = f"{cap.num_blocks:,} blocks // {kv.num_groups} group(s) x {kv.block_size}"
    context = spec.avg_prompt_tokens + spec.avg_output_tokens
    effective = min(average, resolved.max_num_seqs)
    return [
        Figure(
            key="num_blocks",
            label=later("KV cache blocks"),
            value=cap.num_blocks,
            unit="blocks",
            formula=f"floor({g(max(available, 0))} / {kv.page_bytes:,} B / {kv.group_size} layers)",
        ),
        Figure(
            key="kv_cache_tokens",
            label=later("GPU KV cache size"),
            value=cap.tokens,
            unit="tokens",
            formula=tokens_formula,
        ),
        Figure(
            key="kv_cache_gib",
            label=later("KV cache allocated per GPU"),
            value=gib(cap.allocated_bytes),
            unit="GiB",
            formula=f"{cap.num_blocks:,} blocks x {kv.page_bytes:,} B x {kv.group_size} layers",
        ),
        Figure(
            key="max_concurrency",
            label=later("Maximum concurrency for %(tokens)s tokens per request", tokens=f"{mml:,}"),
            value=cap.max_concurrency,
            unit="x",
            formula=f"{cap.num_blocks:,} blocks / {per_request:,} blocks per request",
        ),
        Figure(
            key="concurrency_at_average",
            label=later("Requests of %(tokens)s tokens at once", tokens=f"{context:,}"),
            value=average,
            unit="x",
            formula=f"{cap.num_blocks:,} blocks / {kv.blocks_per_request(context):,} blocks per request "
            f"({n(spec.avg_prompt_tokens)} prompt + {n(spec.avg_output_tokens)} output)",
        ),
        Figure(
            key="running_at_average",
            label=later("Running at once at that length"),
            value=float(int(effective)),
            unit="requests",
            formula=f"min({average:,.1f}, max_num_seqs {resolved.max_num_seqs:,})"
            + (f" per replica, x {resolved.replicas} replicas" if resolved.replicas > 1 else ""),
        ),
    ]
