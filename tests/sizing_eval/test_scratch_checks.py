"""The scratch check set: real start-ups sized from their flags alone. Every case must be
usable as it stands, the evaluation must size all of them, and the errors it reaches are
guarded so that a change to the estimates cannot quietly make them worse."""

import math
import re

import pytest

from diagnostics.sizing.versions import behaviour
from fleet import gpu_catalog
from tests.sizing_eval import scratch_eval

CASES = scratch_eval.load()
FLAGS = {
    "gpu_memory_utilization", "max_model_len", "tensor_parallel_size", "pipeline_parallel_size",
    "kv_cache_dtype", "quantization", "enforce_eager", "max_num_seqs", "max_num_batched_tokens", "block_size",
}  # fmt: skip


@pytest.fixture(scope="module")
def results():
    return {case["id"]: scratch_eval.predict(case) for case in CASES}


def test_case_ids_are_unique():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_case_names_a_public_source_a_version_a_gpu_and_every_flag(case):
    assert re.match(r"^https://[\w.-]+/\S+$", case["source"]), case["source"]
    assert behaviour(case["vllm_version"]).version >= (0, 10)
    assert gpu_catalog.get(case["gpu_key"]).memory_mib > 0
    assert set(case["flags"]) == FLAGS
    assert case["half"] in scratch_eval.HALVES


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_model_resolves_from_the_catalogue_or_its_own_cited_config(case):
    arch = scratch_eval.architecture(case)
    assert arch.num_layers > 0 and (arch.params_total or arch.weight_bytes)
    if "config" in case:
        assert case["config_source"].startswith("https://huggingface.co/")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_case_carries_the_logged_figures_it_is_scored_on(case):
    logged = case["logged"]
    assert logged["available_kv_cache_gib"] > 0
    assert logged["gpu_kv_cache_tokens"] is None or logged["gpu_kv_cache_tokens"] > 0
    assert logged["model_loading_gib"] or logged["gpu_kv_cache_tokens"]


def test_no_source_thread_straddles_the_two_halves():
    halves = {}
    for case in CASES:
        halves.setdefault(scratch_eval.thread_of(case["source"]), set()).add(case["half"])
    assert all(len(found) == 1 for found in halves.values()), halves


def test_a_new_thread_goes_to_the_smaller_half_and_a_known_thread_keeps_its_half():
    cases = [
        {"source": "https://example.org/a", "half": "test"},
        {"source": "https://example.org/a#another-comment"},
        {"source": "https://example.org/b"},
    ]
    assert scratch_eval.assign_halves(cases) == 2
    assert [c["half"] for c in cases] == ["test", "test", "dev"]


def test_the_evaluation_sizes_every_case_with_no_measured_term(results):
    for case in CASES:
        sized = results[case["id"]]  # a figure for each case, even one predicted to leave no room
        assert math.isfinite(sized.available_gib) and sized.tokens >= 0, case["id"]
        m = scratch_eval.scratch_spec(case).measured
        assert (m.weights, m.activation, m.non_torch, m.cuda_graphs) == (None, None, None, None)


def test_the_report_has_a_row_per_case_and_both_halves_scores():
    text = scratch_eval.report(CASES)
    assert all(case["id"][:44] in text for case in CASES)
    assert "dev half" in text and "test half" in text and "median" in text


def test_a_prediction_of_the_logged_figures_scores_zero():
    case = CASES[0]
    exact = scratch_eval.Result(
        case=case,
        available_gib=case["logged"]["available_kv_cache_gib"],
        tokens=case["logged"]["gpu_kv_cache_tokens"] or 0,
    )
    assert exact.available_error == 0


# The figures reached so far (docs/sizing-estimates.md, "Scratch check"): the aims (median 3 %, worst
# 10 %) are met by the median of the available KV memory, not yet by the worst case; these
# bounds only stop the estimates from getting worse.
def test_the_median_error_of_the_available_kv_memory_stays_within_the_aim(results):
    assert scratch_eval.score(results.values()).available_median <= 2.1


def test_the_median_token_error_stays_where_it_is(results):
    assert scratch_eval.score(results.values()).tokens_median <= 3.5


def test_the_worst_errors_stay_where_they_are(results):
    both = scratch_eval.score(results.values())
    assert both.tokens_worst <= 19.0
    # gpt-oss-120b on one H100 at utilization 0.95: 3.33 GiB left of 75.22 GiB; a 1 % error in
    # the other terms is 23 % of what is left.
    assert both.available_worst <= 26.0
    # Next worst: Llama 3.3 70B FP8 on one H100 with an FP8 KV cache, 5.11 GiB left of 75.2 GiB
    # (+18.3 %), and Qwen2.5-7B-AWQ on an RTX 4080 under WSL2 (-16.9 %).
    without_it = [r for r in results.values() if r.case["id"] != "llmd-gpt-oss-120b-h100"]
    assert scratch_eval.score(without_it).available_worst <= 19.0
