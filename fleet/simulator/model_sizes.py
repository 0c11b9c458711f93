"""Rough model sizes for simulated instances, guessed from a model's name.

These are placeholders until the sizing calculator (diagnostics/sizing) can be asked: the
parameter count comes from a "32B" in the name, a mixture-of-experts' active count from
"A3B", bytes per weight from the quantization, and KV bytes per token from a typical
grouped-query layout for the size (8B: 32 layers x 8 KV heads x 128 x 2 x 2 = 131072).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PARAMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])")
_ACTIVE = re.compile(r"[-_]A(\d+(?:\.\d+)?)B", re.IGNORECASE)

_BYTES_PER_PARAM = {
    "fp8": 1.0,
    "compressed-tensors": 1.0,
    "awq": 0.55,
    "gptq": 0.55,
    "bitsandbytes": 0.55,
    "gguf": 0.56,
    "mxfp4": 0.53,
}


@dataclass(frozen=True, kw_only=True)
class ModelSize:
    params_b: float
    active_params_b: float
    weight_bytes_per_param: float


def guess_model_size(*, name: str, quantization: str = "", dtype: str = "") -> ModelSize:
    """Size from the served model name; 8B when the name carries no size."""
    active = _ACTIVE.search(name)
    without_active = _ACTIVE.sub("", name)
    params = _PARAMS.search(without_active.split("/")[-1])
    params_b = float(params.group(1)) if params else 8.0
    bpp = _BYTES_PER_PARAM.get(quantization, 4.0 if dtype == "float32" else 2.0)
    if not quantization and "fp8" in name.lower():
        bpp = 1.0
    return ModelSize(
        params_b=params_b,
        active_params_b=float(active.group(1)) if active else params_b,
        weight_bytes_per_param=bpp,
    )


# Families whose layout differs from the typical one, by the model's name (without its
# organisation, lower case): layers x KV heads x head dim x (K, V) x 2 bytes, from their
# published config.json (the same figures as diagnostics/sizing/data/models.json).
_KNOWN_KV_BYTES = {
    "qwen2-7b": 28 * 4 * 128 * 2 * 2,
    "qwen2.5-7b": 28 * 4 * 128 * 2 * 2,
    "qwen2.5-14b": 48 * 8 * 128 * 2 * 2,
    "qwen3-8b": 36 * 8 * 128 * 2 * 2,
    "qwen3-14b": 40 * 8 * 128 * 2 * 2,
}


def kv_bytes_per_token_guess(params_b: float, name: str = "") -> int:
    """KV bytes per token at 16-bit KV: the family's own layout when the name is one of
    _KNOWN_KV_BYTES, else a typical grouped-query model of this size."""
    short = name.rsplit("/", 1)[-1].lower()
    for family, kv_bytes in _KNOWN_KV_BYTES.items():
        if short == family or short.startswith(f"{family}-"):
            return kv_bytes
    if params_b <= 10:
        return 131072  # 32 layers x 8 KV heads x 128 dims x (K, V) x 2 bytes
    if params_b <= 40:
        return 262144  # 64 layers
    return 327680  # 80 layers (70B class)
