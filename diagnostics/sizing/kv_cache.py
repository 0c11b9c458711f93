"""The KV cache as vLLM's V1 engine lays it out on one GPU: page sizes per layer kind,
hybrid layer groups, blocks, the "GPU KV cache size" tokens and "Maximum concurrency".

Follows vllm/v1/kv_cache_interface.py and vllm/v1/core/kv_cache_utils.py (research/
vllm_memory.md sections 2 to 4). Everything here is per tensor-parallel rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from core.i18n import later
from diagnostics.sizing.architecture import Architecture, LayerKind
from diagnostics.sizing.figures import Text
from diagnostics.sizing.versions import VllmBehaviour

DEFAULT_BLOCK_SIZE = 16
MLA_BLOCK_SIZE = 64  # FlashMLA, the default MLA backend on Hopper, forces a multiple of 64
_KERNEL_ALIGNMENT = 16
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    """Bytes per KV element: fp8 variants store one byte; "auto" follows the dtype the model
    runs in (--dtype, resolved)."""
    if kv_cache_dtype.startswith("fp8"):
        return 1
    if kv_cache_dtype in ("auto", ""):
        return _DTYPE_BYTES.get(model_dtype, 2)
    return _DTYPE_BYTES.get(kv_cache_dtype, 2)


@dataclass(frozen=True, kw_only=True)
class KvLayout:
    """The per-rank KV layout of a model under given flags, before any memory is known."""

    kinds: dict[LayerKind, int]  # layers of each kind on this rank
    page_bytes: int  # one block of one layer (all kinds share one page size)
    block_size: int  # tokens per block of the attention layers
    kv_heads_per_rank: int
    head_size: int
    dtype_bytes: int
    sliding_window: int | None
    linear_state_bytes: int  # one sequence's state in one linear layer, before padding
    max_num_batched_tokens: int
    # Layers per KV-cache group: all of them when uniform; for hybrid models the smallest
    # kind's count (or the largest, when 0.12+ finds the counts within 25 %).
    group_size: int
    groups: dict[LayerKind, int]  # how many groups each kind fills
    notes: tuple[str, ...] = ()  # figures.Text: English, with its message

    @property
    def hybrid(self) -> bool:
        return len(self.kinds) > 1

    @property
    def num_groups(self) -> int:
        return sum(self.groups.values())

    @property
    def bytes_per_token(self) -> float:
        """Bytes one more token of context costs across the layers that keep KV per token
        (full, sliding within its window, MLA); linear layers keep a fixed state instead."""
        per_token_layers = sum(n for kind, n in self.kinds.items() if kind != LayerKind.LINEAR)
        return self.page_bytes / self.block_size * per_token_layers

    @property
    def bytes_per_token_growing(self) -> float:
        """Bytes per token of the layers that keep growing with the context (full and MLA)."""
        growing = self.kinds.get(LayerKind.FULL, 0) + self.kinds.get(LayerKind.MLA, 0)
        return self.page_bytes / self.block_size * growing

    def blocks_needed(self, kind: LayerKind, context: int) -> int:
        """Blocks one request of `context` tokens holds in one layer of `kind`
        (the spec's max_memory_usage_bytes / page_size)."""
        if kind == LayerKind.SLIDING:
            tokens = min((self.sliding_window or 0) - 1 + self.max_num_batched_tokens, context)
            return cdiv(tokens, self.block_size) + 1  # the window may start mid-block
        if kind == LayerKind.LINEAR:
            return 1  # one state per sequence (no prefix caching of the state)
        return cdiv(context, self.block_size)

    def blocks_per_request(self, context: int) -> int:
        """Block ids one request of `context` tokens takes across all groups."""
        return sum(groups * self.blocks_needed(kind, context) for kind, groups in self.groups.items())

    def bytes_per_request(self, context: int) -> int:
        """KV bytes one request of `context` tokens holds on this rank, padding layers included."""
        return self.blocks_per_request(context) * self.page_bytes * self.group_size


def layout(
    arch: Architecture,
    *,
    behaviour: VllmBehaviour,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int | None = None,
    max_num_batched_tokens: int,
    model_dtype: str | None = None,
    disable_hybrid: bool = False,
) -> KvLayout:
    """The KV layout on one rank of the first pipeline stage (the stage with the most layers).
    model_dtype: the dtype the model runs in; None: the checkpoint's (16-bit for float32)."""
    model_dtype = model_dtype or ("bfloat16" if arch.dtype == "float32" else arch.dtype)
    dtype_bytes = kv_dtype_bytes(kv_cache_dtype, model_dtype)
    notes: list[str] = []
    kinds: dict[LayerKind, int] = {}
    per_stage = _layers_on_first_stage(arch, pipeline_parallel_size)
    for kind in per_stage:
        if disable_hybrid and kind == LayerKind.SLIDING:
            kind = LayerKind.FULL
        kinds[kind] = kinds.get(kind, 0) + 1

    if LayerKind.MLA in kinds:
        kv_heads, head = 1, (arch.kv_lora_rank or 0) + (arch.qk_rope_head_dim or 0)
        page_per_token = head * dtype_bytes  # one latent, no K/V pair, not split across ranks
        block = block_size or MLA_BLOCK_SIZE
    else:
        kv_heads = max(1, arch.num_kv_heads // tensor_parallel_size)
        if arch.num_kv_heads < tensor_parallel_size:
            notes.append(
                Text(
                    later(
                        "%(heads)s KV heads on %(gpus)s GPUs: each GPU keeps a copy of one head, so tensor "
                        "parallelism beyond the KV heads does not shrink KV per token",
                        heads=arch.num_kv_heads,
                        gpus=tensor_parallel_size,
                    )
                )
            )
        head = arch.head_dim
        page_per_token = 2 * kv_heads * head * dtype_bytes
        block = block_size or DEFAULT_BLOCK_SIZE

    linear_bytes = 0
    if LayerKind.LINEAR in kinds and arch.linear_state:
        state = arch.linear_state
        # Conv and recurrent state both split across ranks; stored in the model dtype.
        model_bytes = _DTYPE_BYTES.get(model_dtype, 2)
        linear_bytes = (
            state.conv_elements // tensor_parallel_size + state.recurrent_elements // tensor_parallel_size
        ) * model_bytes
        if block_size is None:
            # vLLM enlarges the attention block until its page holds a whole linear state.
            block = _KERNEL_ALIGNMENT * cdiv(linear_bytes, _KERNEL_ALIGNMENT * page_per_token)
            notes.append(
                Text(
                    later(
                        "attention block size raised to %(block)s tokens so one page holds a "
                        "linear-attention state of %(bytes)s bytes",
                        block=block,
                        bytes=f"{linear_bytes:,}",
                    )
                )
            )
    page = block * page_per_token
    if linear_bytes > page:
        raise ValueError(
            later(
                "block_size %(block)s gives a %(page)s-byte page, smaller than one linear-attention state "
                "(%(state)s bytes); leave block_size unset",
                block=block,
                page=f"{page:,}",
                state=f"{linear_bytes:,}",
            )
        )

    group_size, groups = _grouping(kinds, behaviour)
    return KvLayout(
        kinds=kinds,
        page_bytes=page,
        block_size=block,
        kv_heads_per_rank=kv_heads,
        head_size=head,
        dtype_bytes=dtype_bytes,
        sliding_window=arch.sliding_window,
        linear_state_bytes=linear_bytes,
        max_num_batched_tokens=max_num_batched_tokens,
        group_size=group_size,
        groups=groups,
        notes=tuple(notes),
    )


def _layers_on_first_stage(arch: Architecture, pipeline_parallel_size: int) -> tuple[LayerKind, ...]:
    """vLLM splits layers evenly across pipeline stages, the remainder going to the first ones."""
    per_stage = ceil(arch.num_layers / pipeline_parallel_size)
    return arch.layer_kinds[:per_stage]


def _grouping(kinds: dict[LayerKind, int], behaviour: VllmBehaviour) -> tuple[int, dict[LayerKind, int]]:
    if len(kinds) == 1:
        ((kind, count),) = kinds.items()
        return count, {kind: 1}
    smallest, largest = min(kinds.values()), max(kinds.values())
    size = smallest
    if behaviour.widens_near_equal_groups and largest < smallest * 1.25:
        size = largest
    return size, {kind: cdiv(count, size) for kind, count in kinds.items()}


@dataclass(frozen=True, kw_only=True)
class KvCapacity:
    num_blocks: int
    tokens: int  # as vLLM logs "GPU KV cache size"
    max_concurrency: float  # as vLLM logs "Maximum concurrency for max_model_len tokens per request"
    allocated_bytes: int  # num_blocks x page x group size

    def to_dict(self) -> dict[str, float]:
        return {
            "num_blocks": self.num_blocks,
            "tokens": self.tokens,
            "max_concurrency": self.max_concurrency,
            "allocated_bytes": self.allocated_bytes,
        }


def capacity(
    kv: KvLayout, available_bytes: float, *, max_model_len: int, behaviour: VllmBehaviour
) -> KvCapacity:
    """Blocks, logged tokens and maximum concurrency for the KV memory of one rank."""
    num_blocks = max(int(available_bytes // kv.page_bytes // kv.group_size), 0)
    concurrency = num_blocks / kv.blocks_per_request(max_model_len)
    if behaviour.tokens_from_concurrency:
        tokens = int(concurrency * max_model_len)
    else:
        tokens = num_blocks // kv.num_groups * kv.block_size
    return KvCapacity(
        num_blocks=num_blocks,
        tokens=tokens,
        max_concurrency=concurrency,
        allocated_bytes=num_blocks * kv.page_bytes * kv.group_size,
    )


def concurrency_at(kv: KvLayout, num_blocks: int, context: int) -> float:
    """Requests of `context` tokens that fit at once in num_blocks."""
    return num_blocks / kv.blocks_per_request(context)


def needed_for_one_request(kv: KvLayout, max_model_len: int, behaviour: VllmBehaviour) -> int:
    """The bytes vLLM's start-up check asks for: one request at max_model_len.
    0.14+ counts the padded groups; before, each layer's own need."""
    if behaviour.errors_link_docs:
        return kv.bytes_per_request(max_model_len)
    return sum(n * kv.blocks_needed(kind, max_model_len) * kv.page_bytes for kind, n in kv.kinds.items())


def estimate_max_model_len(kv: KvLayout, available_bytes: float, behaviour: VllmBehaviour, upper: int) -> int:
    """The longest max_model_len whose one request fits (vLLM's binary search)."""
    low, high = 1, upper
    if needed_for_one_request(kv, low, behaviour) > available_bytes:
        return 0
    while low < high:
        mid = (low + high + 1) // 2
        if needed_for_one_request(kv, mid, behaviour) <= available_bytes:
            low = mid
        else:
            high = mid - 1
    return low
