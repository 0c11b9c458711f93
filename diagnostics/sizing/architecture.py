"""A model's architecture as the sizing calculator needs it, read from Hugging Face's config.json.

Only facts that change memory are kept: the layer count and the attention kind of each
layer (full, sliding window, MLA latent, linear attention / Mamba-style state), KV heads
and head size, hidden and vocabulary sizes, the MoE shape, the dtype and quantization,
and the parameter count or exact weight bytes. `from_hf_config` refuses a config with a
missing, unknown-typed, implausible (bounds.py) or contradictory field, naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from core.i18n import later
from diagnostics.sizing import bounds
from diagnostics.sizing import quantization as quant
from diagnostics.sizing.config_error import ConfigError

__all__ = [
    "Architecture",
    "ConfigError",
    "LayerKind",
    "LinearState",
    "from_hf_config",
    "weight_bytes_from_index",
]


class LayerKind(StrEnum):
    FULL = "full"  # full attention: KV for every token of the context
    SLIDING = "sliding"  # sliding-window attention: KV for at most the window
    MLA = "mla"  # multi-head latent attention: one compressed latent per token
    LINEAR = "linear"  # linear attention / Mamba-style: a fixed state per sequence


@dataclass(frozen=True, kw_only=True)
class LinearState:
    """The per-sequence state of one linear-attention layer (Gated DeltaNet, Mamba2):
    a convolution window and a recurrent state, in elements."""

    conv_elements: int
    recurrent_elements: int
    # The state's heads split across tensor-parallel ranks, like attention heads.
    heads: int


@dataclass(frozen=True, kw_only=True)
class Architecture:
    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int = 0
    max_position_embeddings: int | None = None
    dtype: str = "bfloat16"
    quantization: str = ""  # "", "fp8", "mxfp4", "nvfp4", "awq", "gptq", "int4", "int8", ...
    quant_detail: str = ""  # the config's own words: "fp8 e4m3, one fp32 scale per 128x128 block"
    layer_kinds: tuple[LayerKind, ...] = ()
    sliding_window: int | None = None
    kv_lora_rank: int | None = None  # MLA
    qk_rope_head_dim: int | None = None  # MLA
    linear_state: LinearState | None = None
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0  # each expert's FFN width, where it differs from intermediate_size
    params_total: float | None = None  # parameters, as the model card counts them
    params_active: float | None = None
    weight_bytes: int | None = None  # exact, from model.safetensors.index.json
    # A quantized checkpoint's size from its own quantization_config (quantization.estimate).
    weight_bytes_estimate: int | None = None
    tie_word_embeddings: bool = False
    architectures: tuple[str, ...] = ()
    hf_id: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def count(self, kind: LayerKind) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    def with_weights(self, weight_bytes: int) -> Architecture:
        return replace(self, weight_bytes=weight_bytes)


_SUPPORTED_DTYPES = {"bfloat16", "float16", "float32"}


def _section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a config: multimodal configs nest it in text_config."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" in text:
        merged = dict(config)
        merged.update(text)
        return merged
    return config


def _int(config: Mapping[str, Any], name: str, *, required: bool = True) -> int | None:
    """A whole number in its plausible range (bounds.CONFIG_INTS); None when absent and optional."""
    value = config.get(name)
    if value is None:
        if required:
            raise ConfigError(later("config.json has no %(key)s", key=repr(name)))
        return None
    low, high = bounds.CONFIG_INTS[name]
    return bounds.whole(name, value, low, high)


def _layer_kinds(config: Mapping[str, Any], layers: int, sliding: int | None) -> tuple[LayerKind, ...]:
    """Each layer's attention kind, from layer_types, a pattern, or the sliding window."""
    types = config.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise ConfigError(
                later(
                    "config.json 'layer_types' must list one type per layer (%(layers)s), not %(given)s",
                    layers=layers,
                    given=len(types) if isinstance(types, list) else type(types).__name__,
                )
            )
        return tuple(_kind_of(t, sliding) for t in types)
    interval = _int(config, "full_attention_interval", required=False)
    if interval:  # Qwen3-Next: every interval-th layer is full attention, the rest linear
        return tuple(LayerKind.FULL if (i + 1) % interval == 0 else LayerKind.LINEAR for i in range(layers))
    pattern = _int(config, "sliding_window_pattern", required=False)
    if sliding and pattern:  # Gemma 3: pattern-1 sliding layers, then one full
        return tuple(LayerKind.FULL if (i + 1) % pattern == 0 else LayerKind.SLIDING for i in range(layers))
    model_type = str(config.get("model_type", ""))
    if sliding and model_type.startswith("gemma2"):  # Gemma 2: sliding and full alternate
        return tuple(LayerKind.SLIDING if i % 2 == 0 else LayerKind.FULL for i in range(layers))
    if sliding and config.get("use_sliding_window", True) is not False:
        return (LayerKind.SLIDING,) * layers  # Mistral 7B v0.1: every layer slides
    return (LayerKind.FULL,) * layers


_TYPE_NAMES = {
    "full_attention": LayerKind.FULL,
    "attention": LayerKind.FULL,
    "sliding_attention": LayerKind.SLIDING,
    "sliding_window_attention": LayerKind.SLIDING,
    "linear_attention": LayerKind.LINEAR,
    "mamba": LayerKind.LINEAR,
}


def _kind_of(name: Any, sliding: int | None) -> LayerKind:
    kind = _TYPE_NAMES.get(str(name))
    if kind is None:
        known = ", ".join(sorted(_TYPE_NAMES))
        raise ConfigError(
            later(
                "config.json 'layer_types' has an unknown type %(type)s (known: %(known)s)",
                type=bounds.shown(name),
                known=known,
            )
        )
    if kind == LayerKind.SLIDING and not sliding:
        raise ConfigError(later("config.json 'layer_types' has sliding layers but no 'sliding_window'"))
    return kind


def _head_dim(config: Mapping[str, Any], hidden: int, heads: int) -> int:
    explicit = _int(config, "head_dim", required=False)
    if explicit:
        return explicit
    if hidden % heads:
        raise ConfigError(
            later(
                "config.json has no 'head_dim' and hidden_size %(hidden)s is not a multiple of "
                "num_attention_heads %(heads)s",
                hidden=hidden,
                heads=heads,
            )
        )
    return hidden // heads


def _linear_state(config: Mapping[str, Any]) -> LinearState | None:
    key_heads = _int(config, "linear_num_key_heads", required=False)
    if not key_heads:
        return None
    value_heads = _int(config, "linear_num_value_heads")
    key_dim, value_dim = _int(config, "linear_key_head_dim"), _int(config, "linear_value_head_dim")
    kernel = _int(config, "linear_conv_kernel_dim")
    conv_channels = 2 * key_heads * key_dim + value_heads * value_dim
    return LinearState(
        conv_elements=(kernel - 1) * conv_channels,
        recurrent_elements=value_heads * key_dim * value_dim,
        heads=value_heads,
    )


def _quantization(config: Mapping[str, Any], dtype: str) -> tuple[str, str, int | None]:
    """The calculator's name for the checkpoint's quantization, the config's detail, and the
    weight bytes it implies; ("", "", None) for an unquantized checkpoint."""
    scheme = quant.scheme(config)
    if scheme is None:
        return "", "", None
    dtype_bytes = 4.0 if dtype == "float32" else 2.0
    return scheme.key, scheme.detail, quant.estimate(config, dtype_bytes=dtype_bytes).total


def _notes(c: Mapping[str, Any]) -> tuple[str, ...]:
    chunk = c.get("attention_chunk_size")
    if chunk:  # Llama 4
        return (
            f"chunked local attention ({chunk} tokens) on the RoPE layers: sized as full attention, "
            "as vLLM's KV accounting for it depends on the version and the hybrid KV cache manager",
        )
    return ()


def _dtype(config: Mapping[str, Any]) -> str:
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    if dtype not in _SUPPORTED_DTYPES:
        raise ConfigError(
            later(
                "config.json 'torch_dtype' %(dtype)s is not one of %(known)s",
                dtype=bounds.shown(dtype),
                known=str(sorted(_SUPPORTED_DTYPES)),
            )
        )
    return dtype


def from_hf_config(config: Any, *, name: str = "", params_total: float | None = None) -> Architecture:
    """An Architecture from a parsed config.json; ConfigError naming the field at fault."""
    if not isinstance(config, Mapping):
        raise ConfigError(later("config.json must be a JSON object"))
    bounds.check_config(config)  # every number in its range before any is used
    c = _section(config)
    layers, hidden = _int(c, "num_hidden_layers"), _int(c, "hidden_size")
    heads = _int(c, "num_attention_heads")
    kv_heads = _int(c, "num_key_value_heads", required=False) or heads
    if heads % kv_heads:
        raise ConfigError(
            later(
                "config.json num_attention_heads %(heads)s is not a multiple of "
                "num_key_value_heads %(kv_heads)s",
                heads=heads,
                kv_heads=kv_heads,
            )
        )
    sliding = _int(c, "sliding_window", required=False)
    kinds = _layer_kinds(c, layers, sliding)
    kv_lora_rank = _int(c, "kv_lora_rank", required=False)
    if kv_lora_rank:
        kinds = tuple(LayerKind.MLA if k == LayerKind.FULL else k for k in kinds)
    experts = _int(c, "num_local_experts", required=False) or _int(c, "num_experts", required=False)
    experts = experts or _int(c, "n_routed_experts", required=False) or 0
    per_token = _int(c, "num_experts_per_tok", required=False) or _int(c, "experts_per_token", required=False)
    architectures = c.get("architectures") or ()
    if not isinstance(architectures, list | tuple):
        raise ConfigError(later("config.json 'architectures' must be a list"))
    linear = _linear_state(c) if LayerKind.LINEAR in kinds else None
    if LayerKind.LINEAR in kinds and linear is None:
        raise ConfigError(
            later(
                "config.json has linear-attention layers but no state sizes "
                "('linear_num_key_heads', 'linear_key_head_dim', ...)"
            )
        )
    dtype = _dtype(c)
    quantization, quant_detail, estimate = _quantization(config, dtype)
    return Architecture(
        name=name or str(c.get("_name_or_path") or (architectures[0] if architectures else "model")),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=_head_dim(c, hidden, heads),
        vocab_size=_int(c, "vocab_size"),
        intermediate_size=_int(c, "intermediate_size", required=False) or 0,
        max_position_embeddings=_int(c, "max_position_embeddings", required=False),
        dtype=dtype,
        quantization=quantization,
        quant_detail=quant_detail,
        weight_bytes_estimate=estimate,
        layer_kinds=kinds,
        sliding_window=sliding if LayerKind.SLIDING in kinds else None,
        kv_lora_rank=kv_lora_rank,
        qk_rope_head_dim=_int(c, "qk_rope_head_dim", required=bool(kv_lora_rank)),
        linear_state=linear,
        num_experts=experts,
        experts_per_token=per_token or 0,
        moe_intermediate_size=_int(c, "moe_intermediate_size", required=False) or 0,
        params_total=params_total,
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        architectures=tuple(str(a) for a in architectures),
        notes=_notes(c),
    )


def weight_bytes_from_index(index: Any) -> int:
    """Exact weight bytes from model.safetensors.index.json (metadata.total_size): a number of
    bytes from 1 to bounds.MAX_WEIGHT_BYTES (a finite float is taken, its fraction dropped)."""
    if not isinstance(index, Mapping) or not isinstance(index.get("metadata"), Mapping):
        raise ConfigError(later("model.safetensors.index.json has no 'metadata' object"))
    total = index["metadata"].get("total_size")
    finite = isinstance(total, int) or (isinstance(total, float) and math.isfinite(total))
    if isinstance(total, bool) or not finite or total < 1:
        raise ConfigError(
            later(
                "model.safetensors.index.json metadata 'total_size' is not a size: %(total)s",
                total=bounds.shown(total),
            )
        )
    if total > bounds.MAX_WEIGHT_BYTES:
        raise ConfigError(
            later(
                "model.safetensors.index.json metadata 'total_size' must be at most %(high)s bytes, "
                "not %(total)s",
                high=f"{bounds.MAX_WEIGHT_BYTES:,}",
                total=bounds.shown(total),
            )
        )
    return int(total)
