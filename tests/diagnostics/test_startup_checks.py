"""The calculator against real vLLM start-ups: from the KV memory a log printed, the same
"GPU KV cache size" and "Maximum concurrency" within 5 % (most to the block); from the
logged budget terms, the same available KV memory."""

import json
from pathlib import Path

import pytest

from diagnostics.sizing import kv_cache
from diagnostics.sizing.architecture import from_hf_config
from diagnostics.sizing.calculator import SizingSpec, compute
from diagnostics.sizing.memory import Measured
from diagnostics.sizing.versions import behaviour

GiB = 1 << 30
CHECKS = json.loads((Path("diagnostics/sizing/data/startup_checks.json")).read_text())["cases"]


def _predict(case):
    beh = behaviour(case["vllm_version"])
    kv = kv_cache.layout(
        from_hf_config(case["architecture"]),
        behaviour=beh,
        tensor_parallel_size=case["tensor_parallel_size"],
        pipeline_parallel_size=case["pipeline_parallel_size"],
        kv_cache_dtype=case["kv_cache_dtype"],
        max_num_batched_tokens=2048,
    )
    available = case["logged"]["available_kv_cache_gib"] * GiB
    return kv_cache.capacity(kv, available, max_model_len=case["max_model_len"], behaviour=beh)


@pytest.mark.parametrize("case", CHECKS, ids=[c["id"] for c in CHECKS])
def test_kv_capacity_matches_the_logged_figures_within_five_percent(case):
    predicted, logged = _predict(case), case["logged"]
    assert predicted.tokens == pytest.approx(logged["gpu_kv_cache_tokens"], rel=0.05)
    if logged["max_concurrency"]:
        assert predicted.max_concurrency == pytest.approx(logged["max_concurrency"], rel=0.05)


def test_most_start_ups_are_reproduced_to_the_block():
    # The log prints memory to 0.01 GiB, so a block or two either way is rounding.
    exact = [
        c["id"]
        for c in CHECKS
        if _predict(c).tokens == pytest.approx(c["logged"]["gpu_kv_cache_tokens"], rel=0.001)
    ]
    assert len(exact) >= 14, exact


def test_the_engine_takes_the_logged_block_count_where_the_log_gives_one():
    for case in (c for c in CHECKS if c["logged"]["num_gpu_blocks"]):
        assert _predict(case).num_blocks == pytest.approx(case["logged"]["num_gpu_blocks"], abs=3)


@pytest.mark.parametrize("case", [c for c in CHECKS if "budget" in c], ids=lambda c: c["id"])
def test_the_budget_terms_of_a_log_add_up_to_its_available_kv_memory(case):
    budget = case["budget"]
    arch = from_hf_config(case["architecture"], params_total=1e9)
    sized = compute(
        SizingSpec(
            arch=arch,
            device_total_bytes=budget["device_total_gib"] * GiB,
            gpus=case["tensor_parallel_size"],
            gpu_memory_utilization=budget["gpu_memory_utilization"],
            max_model_len=case["max_model_len"],
            vllm_version=case["vllm_version"],
            measured=Measured(
                weights=budget["weights_gib"] * GiB,
                activation=budget["activation_gib"] * GiB,
                non_torch=budget["non_torch_gib"] * GiB,
            ),
        )
    )
    assert sized.available_kv_bytes / GiB == pytest.approx(case["logged"]["available_kv_cache_gib"], abs=0.05)
    assert sized.capacity.tokens == pytest.approx(case["logged"]["gpu_kv_cache_tokens"], rel=0.01)
