"""The GPU memory budget of one vLLM worker: what it requests, what the weights, the profiled
activation peak, non-torch memory and CUDA graphs take, and what is left for the KV cache.

vLLM measures the activation, non-torch and CUDA-graph terms at start-up; the calculator
estimates them (the formulas say how) and takes measured values when it has them, from a
start-up log or from an instance's own report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.i18n import later
from diagnostics.sizing.architecture import Architecture
from diagnostics.sizing.figures import GiB, MiB
from diagnostics.sizing.versions import VllmBehaviour

# cudaMemGetInfo's total is a little below NVML's memory.total (H100 80 GB: 79.65 GiB by
# NVML, 79.19 GiB in vLLM's log; L40S 44.99 against 44.42; RTX 3090 24.0 against 23.58).
CUDA_RESERVED_BYTES = int(0.47 * GiB)

# Bytes per parameter as loaded on the GPU. 4-bit formats carry group scales (about
# 4.5 bits a weight for group size 128; MXFP4's shared 8-bit scale per 32 values is 4.25).
_BYTES_PER_PARAM = {
    "": 2.0,
    "fp8": 1.0,
    "fbgemm_fp8": 1.0,
    "modelopt": 1.0,
    "int8": 1.0,
    "awq": 0.5625,
    "gptq": 0.5625,
    "awq_marlin": 0.5625,
    "gptq_marlin": 0.5625,
    "int4": 0.5625,
    "compressed-tensors": 0.5625,
    "bitsandbytes": 0.5625,
    "gguf": 0.6,
    "mxfp4": 0.53125,
    # NVFP4: 4-bit values and one fp8 scale per 16 (4.5 bits a weight).
    "nvfp4": 0.5625,
    "modelopt_fp4": 0.5625,
}

SAMPLER_BYTES_PER_LOGIT = 32  # logits, their fp32 copy, sort values and int64 indices, softmax
ACTIVATION_WIDTH_HIDDEN = 4  # hidden-sized tensors alive at the forward peak (residual, norms, attention out)
NON_TORCH_BYTES = int(0.1 * GiB)  # cuBLAS workspaces, the CUDA context's share
NON_TORCH_BYTES_PER_PEER = int(0.1 * GiB)  # NCCL and custom all-reduce buffers with TP > 1
CUDA_GRAPH_BASE_BYTES = int(0.4 * GiB)
CUDA_GRAPH_BYTES_PER_LAYER = 10 * MiB  # x3 for MoE layers (their workspaces are captured too)


def bytes_per_param(quantization: str, dtype: str) -> float:
    if quantization:
        try:
            return _BYTES_PER_PARAM[quantization]
        except KeyError:
            known = ", ".join(sorted(q for q in _BYTES_PER_PARAM if q))
            raise ValueError(
                later(
                    "quantization %(quantization)s is not one of: %(known)s",
                    quantization=repr(quantization),
                    known=known,
                )
            ) from None
    return 4.0 if dtype == "float32" else 2.0


@dataclass(frozen=True, kw_only=True)
class Measured:
    """Terms read from a real start-up log, in bytes; None where unknown."""

    weights: float | None = None  # "Model loading took X GiB"
    activation: float | None = None  # "torch peak memory increase"
    non_torch: float | None = None
    cuda_graphs: float | None = None  # "Estimated CUDA graph memory"


def weights_total(arch: Architecture, *, quantization: str, dtype: str) -> tuple[float, str]:
    """All weight bytes and how they were found."""
    if arch.weight_bytes or arch.weight_bytes_estimate:
        # An exact checkpoint size, or a quantized checkpoint's from its own quantization_config;
        # quantized or cast on the fly when loading.
        scale = bytes_per_param(quantization, dtype) / bytes_per_param(arch.quantization, arch.dtype)
        how = "safetensors total_size"
        if not arch.weight_bytes:
            how = f"{arch.quant_detail} (from config.json's quantization_config)"
        if scale != 1:
            how += f" x {scale:g} ({quantization or dtype} on load)"
        return (arch.weight_bytes or arch.weight_bytes_estimate or 0) * scale, how
    if not arch.params_total:
        raise ValueError(
            later("%(model)s: neither a parameter count nor the weights' size is known", model=arch.name)
        )
    per = bytes_per_param(quantization, dtype)
    return arch.params_total * per, f"{arch.params_total / 1e9:,.2f} B parameters x {per:g} bytes"


def activation_estimate(
    arch: Architecture, *, max_num_batched_tokens: int, max_num_seqs: int, tensor_parallel_size: int
) -> tuple[float, str]:
    """The profile run's torch peak: the forward pass over max_num_batched_tokens plus the
    sampler's transient over min(max_num_seqs, max_num_batched_tokens) vocabulary-wide rows."""
    if arch.is_moe:
        width = arch.experts_per_token * 2 * (arch.moe_intermediate_size or arch.intermediate_size)
    else:
        width = 2 * arch.intermediate_size
    per_token = ACTIVATION_WIDTH_HIDDEN * arch.hidden_size + width // tensor_parallel_size
    forward = max_num_batched_tokens * per_token * 2
    rows = min(max_num_seqs, max_num_batched_tokens)
    sampler = rows * arch.vocab_size * SAMPLER_BYTES_PER_LOGIT
    formula = (
        f"{max_num_batched_tokens:,} tokens x {per_token:,} values x 2 B + "
        f"{rows:,} rows x {arch.vocab_size:,} vocab x {SAMPLER_BYTES_PER_LOGIT} B"
    )
    return float(forward + sampler), formula


def non_torch_estimate(tensor_parallel_size: int) -> float:
    return float(NON_TORCH_BYTES + (NON_TORCH_BYTES_PER_PEER if tensor_parallel_size > 1 else 0))


def cuda_graph_estimate(arch: Architecture, layers_on_rank: int) -> float:
    per_layer = CUDA_GRAPH_BYTES_PER_LAYER * (3 if arch.is_moe else 1)
    return float(CUDA_GRAPH_BASE_BYTES + layers_on_rank * per_layer)


def requested(total: float, utilization: float, behaviour: VllmBehaviour) -> float:
    value = total * utilization
    return float(math.ceil(value)) if behaviour.rounds_request_up else value
