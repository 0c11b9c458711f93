"""Every fix the calculator offers is sized again before it is shown: only changes of flags
with which vLLM starts, ranked, each with the KV capacity it gives; when none does, it says
so rather than offer flags that fail too."""

from __future__ import annotations

from dataclasses import replace

from diagnostics.sizing import catalog
from diagnostics.sizing.calculator import SizingSpec, compute, size
from diagnostics.sizing.fixes import verified_fixes
from fleet import gpu_catalog

GiB = 1 << 30
MODELS = {entry.key: entry for entry in catalog.shipped()}


def spec(key: str, gpu: str, **flags) -> SizingSpec:
    return SizingSpec(arch=MODELS[key].architecture(), gpu=gpu_catalog.get(gpu), **flags)


def offered(setup: SizingSpec) -> list[tuple[str, ...]]:
    fixes = verified_fixes(compute(setup), compute)
    for fix in fixes:  # each one starts when applied
        assert compute(fix.change.applied(setup)).fits, fix.change.flags
    return [fix.change.flags for fix in fixes]


def test_a_70b_model_on_one_l40s_is_offered_only_changes_that_start_it():
    setup = spec("llama-3.1-70b-instruct", "l40s")
    assert not compute(setup).fits
    flags = offered(setup)
    assert flags and ("--quantization fp8",) not in flags and ("--tensor-parallel-size 2",) not in flags
    # Why: each of those still fails on its own.
    assert not compute(replace(setup, quantization="fp8")).fits
    assert not compute(replace(setup, tensor_parallel_size=2, gpus=2)).fits


def test_memory_held_by_other_processes_is_fixed_by_a_lower_share_that_still_leaves_kv_cache():
    setup = spec("llama-3.1-8b-instruct", "h100-80gb", other_used_bytes=20 * GiB, vllm_version="0.14")
    flags = offered(setup)
    assert flags[0][0].startswith("--gpu-memory-utilization 0.7")


def test_fewer_gpus_come_first_and_a_shorter_context_is_the_nearest_that_fits():
    setup = spec("llama-3.1-8b-instruct", "rtx-4090", max_model_len=131072, vllm_version="0.14")
    fixes = verified_fixes(compute(setup), compute)
    assert all(a.gpus <= b.gpus for a, b in zip(fixes, fixes[1:], strict=False))
    flags = offered(setup)
    assert flags[0][0].startswith("--max-model-len")  # on the one GPU it has
    length = next(int(f[0].split()[1]) for f in flags if f[0].startswith("--max-model-len"))
    assert not compute(
        spec("llama-3.1-8b-instruct", "rtx-4090", max_model_len=length + 1024, vllm_version="0.14")
    ).fits


def test_the_public_sizing_shows_the_checked_fixes_with_their_kv_capacity():
    sized = size(spec("llama-3.1-70b-instruct", "l40s"))
    assert sized.error and all("vLLM starts, with" in fix for fix in sized.error.fixes)
    assert "tokens of KV cache" in sized.error.fixes[0]


def test_when_no_change_of_flags_starts_it_the_answer_says_so():
    sized = size(spec("deepseek-v3", "l4", tensor_parallel_size=1))
    assert not sized.fits
    assert sized.error.fixes == (
        "no change of flags on 1 GPU(s) starts it (each candidate was sized again): more or bigger GPUs, "
        "or a smaller or quantized checkpoint",
    )
