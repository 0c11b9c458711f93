"""Plausible ranges for every number the sizing readers take from a model's files: config.json
(its text_config and vision_config too), the quantization_config in it, and the safetensors
index.

Each range holds every real model with room to spare (the largest shipped ones: 94 layers,
hidden size 16384, a vocabulary of 262,208, 512 experts, 10M positions, 2 TB of weights sit
far inside), and keeps an upload from making the calculator build millions of layers or
overflow a float. A number outside its range, or not a whole number where one belongs (a
boolean, a float, NaN, Infinity, text), is a ConfigError naming the field and the range.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.i18n import Message, later
from diagnostics.sizing.config_error import ConfigError

MAX_LAYERS = 1024
MAX_WIDTH = 1 << 20  # hidden and FFN widths, LoRA ranks
MAX_HEADS = 4096  # attention heads, and the size of one head
MAX_EXPERTS = 16_384
MAX_POSITIONS = 1 << 28  # context lengths and windows: 268M tokens
MAX_WEIGHT_BYTES = 1 << 50  # 1 PiB
MAX_GROUP = 1 << 16  # quantization group and block sizes
MAX_DEPTH = 32  # objects and lists within each other; a real config nests five deep

# The decoder's numbers, as config.json (or its text_config) names them: field -> (low, high).
CONFIG_INTS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, MAX_LAYERS),
    "hidden_size": (1, MAX_WIDTH),
    "num_attention_heads": (1, MAX_HEADS),
    "num_key_value_heads": (1, MAX_HEADS),
    "head_dim": (1, MAX_HEADS),
    "vocab_size": (1, 1 << 23),
    "intermediate_size": (1, MAX_WIDTH),
    "intermediate_size_mlp": (1, MAX_WIDTH),
    "max_position_embeddings": (1, MAX_POSITIONS),
    "sliding_window": (1, MAX_POSITIONS),
    "sliding_window_pattern": (1, MAX_LAYERS),
    "full_attention_interval": (1, MAX_LAYERS),
    "attention_chunk_size": (1, MAX_POSITIONS),
    "kv_lora_rank": (1, MAX_WIDTH),
    "q_lora_rank": (0, MAX_WIDTH),
    "qk_rope_head_dim": (1, MAX_HEADS),
    "qk_nope_head_dim": (0, MAX_HEADS),
    "v_head_dim": (1, MAX_HEADS),
    "index_n_heads": (0, MAX_HEADS),
    "index_head_dim": (0, MAX_HEADS),
    "num_local_experts": (1, MAX_EXPERTS),
    "num_experts": (1, MAX_EXPERTS),
    "n_routed_experts": (1, MAX_EXPERTS),
    "num_experts_per_tok": (1, MAX_EXPERTS),
    "experts_per_token": (1, MAX_EXPERTS),
    "moe_intermediate_size": (1, MAX_WIDTH),
    "shared_expert_intermediate_size": (0, MAX_WIDTH),
    "n_shared_experts": (0, MAX_EXPERTS),
    "first_k_dense_replace": (0, MAX_LAYERS),
    "interleave_moe_layer_step": (1, MAX_LAYERS),
    "decoder_sparse_step": (1, MAX_LAYERS),
    "moe_layer_freq": (1, MAX_LAYERS),
    "linear_num_key_heads": (1, MAX_HEADS),
    "linear_num_value_heads": (1, MAX_HEADS),
    "linear_key_head_dim": (1, MAX_HEADS),
    "linear_value_head_dim": (1, MAX_HEADS),
    "linear_conv_kernel_dim": (1, MAX_HEADS),
    "num_nextn_predict_layers": (0, 64),
    "mtp_num_hidden_layers": (0, 64),
}
# A vision tower's numbers, in its vision_config.
VISION_INTS: dict[str, tuple[int, int]] = {
    "depth": (0, MAX_LAYERS),
    "num_hidden_layers": (0, MAX_LAYERS),
    "hidden_size": (0, MAX_WIDTH),
    "embed_dim": (0, MAX_WIDTH),
    "intermediate_size": (0, MAX_WIDTH),
    "patch_size": (1, 1024),
    "in_channels": (1, 64),
    "num_channels": (1, 64),
    "temporal_patch_size": (1, 64),
    "spatial_merge_size": (1, 64),
    "out_hidden_size": (0, MAX_WIDTH),
    "projection_dim": (0, MAX_WIDTH),
    "num_position_embeddings": (0, MAX_POSITIONS),
}


def whole(field: str, value: Any, low: int, high: int) -> int:
    """`value` as a whole number from `low` to `high`; ConfigError naming config.json's `field`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(not_whole(field, value))
    if not low <= value <= high:
        raise ConfigError(
            later(
                "config.json %(key)s must be from %(low)s to %(high)s, not %(value)s",
                key=repr(field),
                low=f"{low:,}",
                high=f"{high:,}",
                value=shown(value),
            )
        )
    return value


def not_whole(field: str, value: Any) -> Message:
    return later(
        "config.json %(key)s must be a whole number, not %(value)s", key=repr(field), value=shown(value)
    )


def in_range(value: Any, low: int, high: int) -> bool:
    """Whether `value` is a whole number (not a boolean) from `low` to `high`."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_config(config: Mapping[str, Any]) -> None:
    """Every number the readers take from a parsed config.json, where it is given."""
    _check(config, CONFIG_INTS, prefix="")
    text = config.get("text_config")
    if isinstance(text, Mapping):
        _check(text, CONFIG_INTS, prefix="text_config.")
    vision = config.get("vision_config")
    if isinstance(vision, Mapping):
        _check(vision, VISION_INTS, prefix="vision_config.")
    for section, prefix in ((config, ""), (text, "text_config.")):
        if isinstance(section, Mapping) and section.get("mlp_only_layers") is not None:
            _layer_list(section["mlp_only_layers"], f"{prefix}mlp_only_layers")


def _check(section: Mapping[str, Any], fields: dict[str, tuple[int, int]], *, prefix: str) -> None:
    for name, (low, high) in fields.items():
        value = section.get(name)
        if value is not None:
            whole(prefix + name, value, low, high)


def _layer_list(value: Any, field: str) -> None:
    if not isinstance(value, list) or len(value) > MAX_LAYERS:
        raise ConfigError(later("config.json %(key)s must be a list of layer numbers", key=repr(field)))
    for item in value:
        whole(field, item, 0, MAX_LAYERS - 1)


def shown(value: Any) -> str:
    """A value as a message quotes it, cut short: an upload may hold anything."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def check_tree(value: Any, *, what: str) -> None:
    """A parsed JSON file as the catalogue can keep it: nested at most MAX_DEPTH deep, and no
    text holding NUL or a lone surrogate (which PostgreSQL's JSON cannot store)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, str):
            _check_text(item, what)
        elif isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise ConfigError(too_deep(what))
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children)


def too_deep(what: str) -> Message:
    return later("%(file)s nests more than %(limit)s levels deep", file=what, limit=MAX_DEPTH)


def _check_text(text: str, what: str) -> None:
    found = _UNSTORABLE.search(text)
    if found:
        raise ConfigError(
            later(
                "%(file)s holds the character %(character)s, which a config cannot hold",
                file=what,
                character=f"U+{ord(found.group()):04X}",
            )
        )


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
