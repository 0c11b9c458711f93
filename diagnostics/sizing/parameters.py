"""Every weight tensor a checkpoint holds, counted from its config.json, named as Hugging Face
names them, so that a quantization config's target and ignore lists can be applied to them.

Counted: embeddings, the LM head unless tied, each decoder layer's attention (standard with
optional output gate, MLA with the DeepSeek sparse-attention indexer, Gated DeltaNet linear
attention), its dense MLP or MoE block (experts, shared experts, router), norms, the MTP layers
the checkpoint ships, and the vision tower. Norm and bias vectors are counted; the vision tower
is approximated as a plain ViT (attention, MLP, patch embedding, merger) and never quantized.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from diagnostics.sizing import bounds


@dataclass(frozen=True, kw_only=True)
class Tensor:
    """One weight (or `count` identical ones: the experts of a layer), out x in elements."""

    name: str
    rows: int
    cols: int = 1
    count: int = 1
    linear: bool = True  # a Linear layer's weight, which quantization may compress

    @property
    def elements(self) -> int:
        return self.rows * self.cols * self.count


def _get(c: Mapping[str, Any], *names: str, default: int = 0) -> int:
    for name in names:
        value = c.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return default


def _section(config: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(config)
    text = config.get("text_config")
    if isinstance(text, Mapping):
        merged.update(text)
    return merged


def tensors(config: Mapping[str, Any]) -> list[Tensor]:
    """The checkpoint's tensors, from a parsed config.json (multimodal ones read text_config);
    ConfigError naming a number outside its plausible range (bounds.py), which keeps the count of
    tensors and their sizes bounded."""
    bounds.check_config(config)
    c = _section(config)
    hidden, vocab = _get(c, "hidden_size"), _get(c, "vocab_size")
    out = [Tensor(name="model.embed_tokens", rows=vocab, cols=hidden, linear=False)]
    if not c.get("tie_word_embeddings", False):
        out.append(Tensor(name="lm_head", rows=vocab, cols=hidden))
    out.append(Tensor(name="model.norm", rows=hidden, linear=False))
    layers = _get(c, "num_hidden_layers")
    kinds = _attention_kinds(c, layers)
    for i in range(layers):
        out += _layer(c, f"model.layers.{i}", i, kinds[i])
    out += _mtp(c, layers)
    out += _vision(config.get("vision_config"))
    return out


def _attention_kinds(c: Mapping[str, Any], layers: int) -> list[str]:
    types = c.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return ["linear" if t in ("linear_attention", "mamba") else "attention" for t in types]
    interval = _get(c, "full_attention_interval")
    if interval:
        return ["attention" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    return ["attention"] * layers


def _layer(c: Mapping[str, Any], prefix: str, index: int, kind: str) -> list[Tensor]:
    hidden = _get(c, "hidden_size")
    norms = 4 if str(c.get("model_type", "")).startswith("gemma") else 2
    out = [Tensor(name=f"{prefix}.input_layernorm", rows=hidden * norms, linear=False)]
    if kind == "linear":
        out += _linear_attention(c, f"{prefix}.linear_attn")
    elif c.get("kv_lora_rank"):
        out += _mla(c, f"{prefix}.self_attn")
    else:
        out += _attention(c, f"{prefix}.self_attn")
    out += _mlp(c, f"{prefix}.mlp", index)
    return out


def _attention(c: Mapping[str, Any], p: str) -> list[Tensor]:
    hidden, heads = _get(c, "hidden_size"), _get(c, "num_attention_heads")
    kv_heads = _get(c, "num_key_value_heads", default=heads)
    head_dim = _get(c, "head_dim", default=hidden // heads if heads else 0)
    model_type = str(c.get("model_type", ""))
    gated = bool(c.get("attn_output_gate")) or model_type.startswith("qwen3_next")
    q = heads * head_dim
    out = [
        Tensor(name=f"{p}.q_proj", rows=q * (2 if gated else 1), cols=hidden),
        Tensor(name=f"{p}.k_proj", rows=kv_heads * head_dim, cols=hidden),
        Tensor(name=f"{p}.v_proj", rows=kv_heads * head_dim, cols=hidden),
        Tensor(name=f"{p}.o_proj", rows=hidden, cols=q),
    ]
    biased = bool(c.get("attention_bias")) or model_type in ("qwen2", "qwen2_moe")
    if biased:  # q, k, v biases (Qwen2); gpt-oss also biases o_proj and adds per-head sinks
        out.append(Tensor(name=f"{p}.qkv_bias", rows=q + 2 * kv_heads * head_dim, linear=False))
    if model_type == "gpt_oss":
        out.append(Tensor(name=f"{p}.o_bias_sinks", rows=hidden + heads, linear=False))
    if model_type.startswith(("qwen3", "gemma3")) or c.get("use_qk_norm"):
        width = heads * head_dim if c.get("qk_norm_type") == "per_layer" else head_dim
        out.append(Tensor(name=f"{p}.qk_norm", rows=2 * width, linear=False))
    return out


def _mla(c: Mapping[str, Any], p: str) -> list[Tensor]:
    """DeepSeek V2/V3 multi-head latent attention, plus V3.2's sparse-attention indexer."""
    hidden, heads = _get(c, "hidden_size"), _get(c, "num_attention_heads")
    rank, rope = _get(c, "kv_lora_rank"), _get(c, "qk_rope_head_dim")
    nope, v_dim = _get(c, "qk_nope_head_dim"), _get(c, "v_head_dim")
    q_rank = _get(c, "q_lora_rank")
    q_out = heads * (nope + rope)
    if q_rank:
        out = [
            Tensor(name=f"{p}.q_a_proj", rows=q_rank, cols=hidden),
            Tensor(name=f"{p}.q_a_layernorm", rows=q_rank, linear=False),
            Tensor(name=f"{p}.q_b_proj", rows=q_out, cols=q_rank),
        ]
    else:
        out = [Tensor(name=f"{p}.q_proj", rows=q_out, cols=hidden)]
    out += [
        Tensor(name=f"{p}.kv_a_proj_with_mqa", rows=rank + rope, cols=hidden),
        Tensor(name=f"{p}.kv_a_layernorm", rows=rank, linear=False),
        Tensor(name=f"{p}.kv_b_proj", rows=heads * (nope + v_dim), cols=rank),
        Tensor(name=f"{p}.o_proj", rows=hidden, cols=heads * v_dim),
    ]
    index_heads, index_dim = _get(c, "index_n_heads"), _get(c, "index_head_dim")
    if index_heads and index_dim:
        out += [
            Tensor(name=f"{p}.indexer.wq_b", rows=index_heads * index_dim, cols=q_rank or hidden),
            Tensor(name=f"{p}.indexer.wk", rows=index_dim, cols=hidden),
            Tensor(name=f"{p}.indexer.k_norm", rows=2 * index_dim, linear=False),
            Tensor(name=f"{p}.indexer.weights_proj", rows=index_heads, cols=hidden, linear=False),
        ]
    return out


def _linear_attention(c: Mapping[str, Any], p: str) -> list[Tensor]:
    """Gated DeltaNet: Qwen3-Next fuses the input projections, Qwen3.5 splits them."""
    hidden = _get(c, "hidden_size")
    key_heads, value_heads = _get(c, "linear_num_key_heads"), _get(c, "linear_num_value_heads")
    key_dim = key_heads * _get(c, "linear_key_head_dim")
    value_dim = value_heads * _get(c, "linear_value_head_dim")
    kernel = _get(c, "linear_conv_kernel_dim", default=4)
    if str(c.get("model_type", "")).startswith("qwen3_next"):
        projections = [
            Tensor(name=f"{p}.in_proj_qkvz", rows=2 * key_dim + 2 * value_dim, cols=hidden),
            Tensor(name=f"{p}.in_proj_ba", rows=2 * value_heads, cols=hidden),
        ]
    else:
        projections = [
            Tensor(name=f"{p}.in_proj_qkv", rows=2 * key_dim + value_dim, cols=hidden),
            Tensor(name=f"{p}.in_proj_z", rows=value_dim, cols=hidden),
            Tensor(name=f"{p}.in_proj_b", rows=value_heads, cols=hidden),
            Tensor(name=f"{p}.in_proj_a", rows=value_heads, cols=hidden),
        ]
    return [
        *projections,
        Tensor(name=f"{p}.conv1d", rows=(2 * key_dim + value_dim) * kernel, linear=False),
        Tensor(
            name=f"{p}.A_log_dt_bias_norm",
            rows=2 * value_heads + (value_dim // value_heads if value_heads else 0),
            linear=False,
        ),
        Tensor(name=f"{p}.out_proj", rows=hidden, cols=value_dim),
    ]


def _is_moe_layer(c: Mapping[str, Any], index: int) -> bool:
    if not _experts(c):
        return False
    if index < _get(c, "first_k_dense_replace"):
        return False
    if index in (c.get("mlp_only_layers") or ()):
        return False
    step = _get(c, "interleave_moe_layer_step", "decoder_sparse_step", "moe_layer_freq", default=1)
    if "interleave_moe_layer_step" in c:  # Llama 4: every step-th layer, counting from 1
        return (index + 1) % step == 0
    return index % step == 0


def _experts(c: Mapping[str, Any]) -> int:
    return _get(c, "num_local_experts", "num_experts", "n_routed_experts")


def _mlp(c: Mapping[str, Any], p: str, index: int) -> list[Tensor]:
    hidden = _get(c, "hidden_size")
    if not _is_moe_layer(c, index):
        width = _get(c, "intermediate_size_mlp", "intermediate_size")
        return _dense(p, hidden, width)
    experts = _experts(c)
    width = _get(c, "moe_intermediate_size", "intermediate_size")
    out = [
        Tensor(name=f"{p}.gate", rows=experts, cols=hidden, linear=False),  # the router
        Tensor(name=f"{p}.experts.0.gate_proj", rows=width, cols=hidden, count=experts),
        Tensor(name=f"{p}.experts.0.up_proj", rows=width, cols=hidden, count=experts),
        Tensor(name=f"{p}.experts.0.down_proj", rows=hidden, cols=width, count=experts),
    ]
    if str(c.get("model_type", "")) == "gpt_oss":  # expert and router biases
        out.append(
            Tensor(name=f"{p}.experts.bias", rows=experts * (3 * width + hidden) + experts, linear=False)
        )
    shared = _get(c, "shared_expert_intermediate_size") or _get(c, "n_shared_experts") * width
    if str(c.get("model_type", "")).startswith("llama4"):
        shared = _get(c, "intermediate_size")
    if shared:
        out += _dense(f"{p}.shared_expert", hidden, shared)
        if _get(c, "shared_expert_intermediate_size"):
            out.append(Tensor(name=f"{p}.shared_expert_gate", rows=hidden, linear=False))
    return out


def _dense(p: str, hidden: int, width: int) -> list[Tensor]:
    return [
        Tensor(name=f"{p}.gate_proj", rows=width, cols=hidden),
        Tensor(name=f"{p}.up_proj", rows=width, cols=hidden),
        Tensor(name=f"{p}.down_proj", rows=hidden, cols=width),
    ]


def _mtp(c: Mapping[str, Any], layers: int) -> Iterator[Tensor]:
    """Multi-token-prediction layers the checkpoint ships beside the decoder (vLLM loads them only
    for speculative decoding, but safetensors total_size counts them)."""
    hidden, vocab = _get(c, "hidden_size"), _get(c, "vocab_size")
    deepseek = _get(c, "num_nextn_predict_layers")
    for n in range(deepseek):
        p = f"model.layers.{layers + n}"
        yield Tensor(name=f"{p}.eh_proj", rows=hidden, cols=2 * hidden)
        yield Tensor(name=f"{p}.enorm_hnorm", rows=3 * hidden, linear=False)
        if str(c.get("model_type", "")).startswith(("deepseek_v3", "deepseek_v32", "kimi")):
            # DeepSeek V3's MTP layer stores its own copies of the embedding and the head.
            yield Tensor(name=f"{p}.embed_tokens", rows=vocab, cols=hidden, linear=False)
            yield Tensor(name=f"{p}.shared_head.head", rows=vocab, cols=hidden, linear=False)
        yield from _layer(c, p, layers + n, "attention")
    for n in range(_get(c, "mtp_num_hidden_layers")):  # Qwen3.5
        if n == 0:
            yield Tensor(name="mtp.fc", rows=hidden, cols=2 * hidden)
            yield Tensor(name="mtp.norms", rows=3 * hidden, linear=False)
        yield from _layer(c, f"mtp.layers.{n}", layers, "attention")


def _vision(vision: Any) -> list[Tensor]:
    """A vision tower, approximated as a ViT: attention and MLP per block, the patch embedding,
    the position embedding and a merger into the language model's width. Never quantized here."""
    if not isinstance(vision, Mapping):
        return []
    depth = _get(vision, "depth", "num_hidden_layers")
    width = _get(vision, "hidden_size", "embed_dim")
    mlp = _get(vision, "intermediate_size", default=4 * width)
    patch = _get(vision, "patch_size", default=14)
    channels = _get(vision, "in_channels", "num_channels", default=3)
    temporal = _get(vision, "temporal_patch_size", default=1)
    merge = _get(vision, "spatial_merge_size", default=1) ** 2
    out_width = _get(vision, "out_hidden_size", "projection_dim", default=width)
    block = 4 * width * width + 2 * width * mlp + 4 * width + mlp
    elements = (
        depth * block
        + channels * temporal * patch * patch * width
        + _get(vision, "num_position_embeddings") * width
        + (width * merge) ** 2
        + width * merge * out_width
    )
    return [Tensor(name="model.visual", rows=elements, linear=False)] if elements else []
