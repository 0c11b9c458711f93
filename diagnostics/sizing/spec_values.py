"""The calculator's input from named values, as the sizing form, the API, the CLI and an
inventory instance name them: one mapping, so a form and an instance are sized alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnostics.sizing.architecture import Architecture
from diagnostics.sizing.calculator import SizingSpec
from diagnostics.sizing.figures import GiB
from diagnostics.sizing.versions import DEFAULT_VERSION
from fleet import gpu_catalog


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def gpu_from_values(values: Mapping[str, Any]) -> gpu_catalog.GpuModel:
    """The catalogue card named by `gpu`, or a custom GPU from `gpu_memory_mib` or
    `gpu_memory_gib` (either one given means custom, whatever `gpu` says)."""
    mib = values.get("gpu_memory_mib")
    gib = values.get("gpu_memory_gib")
    if mib is None and gib is not None:
        mib = round(gib * 1024)
    if mib is not None:
        return gpu_catalog.custom(memory_mib=int(mib))
    return gpu_catalog.get(values["gpu"])


def spec_from_values(values: Mapping[str, Any], *, arch: Architecture) -> SizingSpec:
    """`values` by the sizing form's field names; missing optional ones take the
    calculator's defaults; the GPU as gpu_from_values() reads it. quantization "none" is
    the explicit "no quantization" ("")."""
    quantization = values.get("quantization") or None
    return SizingSpec(
        arch=arch,
        gpu=gpu_from_values(values),
        gpus=values["gpus"],
        tensor_parallel_size=values.get("tensor_parallel_size"),
        pipeline_parallel_size=values.get("pipeline_parallel_size") or 1,
        gpu_memory_utilization=values.get("gpu_memory_utilization"),
        max_model_len=values.get("max_model_len"),
        max_num_seqs=values.get("max_num_seqs"),
        max_num_batched_tokens=values.get("max_num_batched_tokens"),
        dtype=values.get("dtype") or "auto",
        quantization="" if quantization == "none" else quantization,
        kv_cache_dtype=values.get("kv_cache_dtype") or "auto",
        block_size=values.get("block_size"),
        avg_prompt_tokens=_or(values.get("avg_prompt_tokens"), 1500),
        avg_output_tokens=_or(values.get("avg_output_tokens"), 500),
        vllm_version=values.get("vllm_version") or DEFAULT_VERSION,
        other_used_bytes=(values.get("other_used_gib") or 0) * GiB,
        enforce_eager=bool(values.get("enforce_eager")),
    )
