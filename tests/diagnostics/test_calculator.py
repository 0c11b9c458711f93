"""The whole calculator: the budget, whether it starts (in vLLM's words), recommendations,
and properties that hold for every model of the shipped catalogue."""

from dataclasses import replace

import pytest

from diagnostics.sizing import catalog
from diagnostics.sizing.calculator import SizingSpec, SpecError, compute, size
from diagnostics.sizing.memory import Measured
from fleet import gpu_catalog

GiB = 1 << 30
H100, L4, RTX4090 = gpu_catalog.get("h100-80gb"), gpu_catalog.get("l4"), gpu_catalog.get("rtx-4090")
CATALOGUE = {entry.key: entry for entry in catalog.shipped()}


def model(key):
    return CATALOGUE[key].architecture()


def spec(key="llama-3.1-8b-instruct", **flags):
    flags.setdefault("gpu", H100)
    return SizingSpec(arch=model(key), **flags)


def test_available_kv_memory_is_the_request_less_weights_activation_non_torch_and_graphs():
    sized = compute(spec(max_model_len=8192, vllm_version="0.21"))
    terms = {f.key: f.value for f in sized.figures}
    expected = (
        terms["requested"]
        - terms["weights"]
        - terms["activation"]
        - terms["non_torch"]
        - terms["cuda_graphs"]
    )
    assert terms["available_kv"] == pytest.approx(expected)
    assert terms["requested"] == pytest.approx(terms["device_total"] * 0.92, abs=0.01)  # 0.21's default
    assert "15" in sized.figure("weights").formula or "14.96" in sized.figure("weights").formula


def test_versions_before_0_20_leave_cuda_graphs_outside_the_budget():
    sized = compute(spec(max_model_len=8192, vllm_version="0.11"))
    assert "cuda_graphs" not in {f.key for f in sized.figures}
    assert any("CUDA graphs" in note for note in sized.notes)
    assert sized.resolved.gpu_memory_utilization == 0.9


def test_measured_terms_replace_the_estimates():
    sized = compute(spec(max_model_len=8192, measured=Measured(activation=1.0 * GiB, non_torch=0.2 * GiB)))
    assert sized.figure("activation").value == 1.0 and "measured" in sized.figure("activation").formula


def test_every_figure_shows_its_formula_with_the_inputs_filled_in():
    sized = compute(spec(max_model_len=8192))
    assert all(figure.formula for figure in sized.figures)
    assert (
        sized.figure("kv_bytes_per_token").formula
        == "2 (K, V) x 32 layers x 8 KV heads per GPU x 128 head dim x 2 B"
    )


def test_a_model_too_big_for_the_gpu_fails_while_loading_the_weights():
    sized = compute(spec("llama-3.1-70b-instruct", gpu=L4))
    assert not sized.fits and sized.error.kind == "load_oom"
    assert any("--tensor-parallel-size" in fix for fix in sized.error.fixes)


def test_gpt_oss_120b_on_one_h100_runs_out_of_kv_memory_as_users_reported():
    # vllm#23278: default flags, "Available KV cache memory: -2.14 GiB", no cache blocks.
    sized = compute(spec("gpt-oss-120b", vllm_version="0.10"))
    assert sized.error.kind == "no_kv_memory"
    assert sized.error.message.startswith("No available memory for the cache blocks.")
    # vllm#27508: 0.95 and 1,024 batched tokens leave KV memory, too little for 131,072 tokens.
    tighter = compute(
        spec("gpt-oss-120b", vllm_version="0.10", gpu_memory_utilization=0.95, max_num_batched_tokens=1024)
    )
    assert tighter.error.kind == "kv_too_small"
    assert "To serve at least one request with the models's max seq len (131072)" in tighter.error.message


def test_too_long_a_context_gives_vllms_error_with_the_estimated_maximum_length():
    sized = compute(spec(gpu=RTX4090, max_model_len=131072, vllm_version="0.14"))
    assert sized.error.kind == "kv_too_small"
    assert "estimated maximum model length is" in sized.error.message
    assert sized.error.message.endswith("for more details.")  # 0.14 links the docs
    fix = next(f for f in sized.error.fixes if f.startswith("--max-model-len"))
    shorter = compute(spec(gpu=RTX4090, max_model_len=int(fix.split()[1]), vllm_version="0.14"))
    assert shorter.fits


def test_memory_held_by_other_processes_fails_the_free_memory_check_with_the_device_named():
    sized = compute(spec(other_used_bytes=20 * GiB, vllm_version="0.14"))
    assert sized.error.kind == "free_memory"
    assert sized.error.message.startswith("Free memory on device cuda:0 (")
    assert sized.error.fixes[0].startswith("--gpu-memory-utilization 0.")


def test_tensor_parallelism_must_divide_the_attention_heads():
    sized = compute(spec("qwen3-8b", gpus=3))
    assert sized.error.kind == "tp_heads"
    assert (
        sized.error.message
        == "Total number of attention heads (32) must be divisible by tensor parallel size (3)."
    )


def test_a_max_model_len_beyond_the_models_is_refused():
    sized = compute(spec("phi-3-mini-4k-instruct", max_model_len=8192))
    assert sized.error.kind == "max_model_len"


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"gpus": 2, "tensor_parallel_size": 4}, "needs 4 GPUs"),
        ({"gpus": 3, "tensor_parallel_size": 2}, "do not divide"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"vllm_version": "0.7.3"}, "V0 engine"),
        ({"vllm_version": "banana"}, "is not like 0.11.2"),
        ({"block_size": 24}, "block_size"),
        ({"quantization": "int3"}, "quantization 'int3'"),
    ],
)
def test_inputs_no_launch_could_have_are_refused_naming_the_input(flags, message):
    with pytest.raises(SpecError, match=message):
        compute(spec(**flags))


def test_more_gpus_than_one_replica_are_replicas():
    sized = compute(spec(gpus=4, tensor_parallel_size=2))
    assert sized.resolved.replicas == 2


def test_recommendations_cover_the_guides_scenarios_and_the_host():
    sized = size(spec(max_model_len=32768))
    rows = {row["key"]: row for row in sized.recommendations["scenarios"]}
    assert [rows[k]["max_num_batched_tokens"] for k in ("short_chat", "long_documents", "rag")] == [
        16384,
        32768,
        65536,
    ]
    for row in rows.values():
        assert row["fits"] and 1 <= row["max_num_seqs"] <= row["concurrency_at_context"]
    assert rows["short_chat"]["max_num_seqs"] > rows["long_documents"]["max_num_seqs"]
    host = sized.recommendations["host"]
    assert host["host_ram_gib"] == pytest.approx(1.5 * 14.96 + 8, abs=0.1)
    assert host["container_limit_gib"] == pytest.approx(host["host_ram_gib"] * 1.2, abs=0.1)
    assert host["shm_gib"] == 1
    assert size(spec("llama-3.1-70b-instruct", gpus=4)).recommendations["host"]["shm_gib"] == 8


def test_the_json_carries_the_documented_keys():
    result = size(spec(max_model_len=8192)).to_dict()
    documented = (
        "weights_gib_per_gpu", "kv_bytes_per_token", "kv_cache_gib", "kv_cache_tokens", "max_concurrency",
        "fits", "error", "recommendations",
    )  # fmt: skip
    assert set(documented) <= set(result)


# Properties, over every model of the shipped catalogue that fits on two H100s.
FITTING = [
    key for key in CATALOGUE
    if compute(spec(key, gpus=2, max_model_len=8192, quantization=None)).fits
]  # fmt: skip


def test_most_of_the_catalogue_fits_on_two_h100s_at_8k():
    assert len(FITTING) >= 15, FITTING


@pytest.mark.parametrize("key", FITTING)
def test_more_memory_never_gives_fewer_tokens(key):
    tokens = [
        compute(spec(key, gpus=2, max_model_len=8192, gpu_memory_utilization=u)).capacity.tokens
        for u in (0.8, 0.85, 0.9, 0.95)
    ]
    assert tokens == sorted(tokens)
    h100 = compute(spec(key, gpus=2, max_model_len=8192)).capacity.tokens
    h200 = compute(spec(key, gpus=2, max_model_len=8192, gpu=gpu_catalog.get("h200-141gb"))).capacity.tokens
    assert h200 > h100


@pytest.mark.parametrize("key", FITTING)
def test_fp8_kv_cache_doubles_capacity_up_to_block_rounding(key):
    base = spec(key, gpus=2, max_model_len=8192, kv_cache_memory_bytes=10 * GiB, vllm_version="0.11")
    bf16, fp8 = compute(base), compute(replace(base, kv_cache_dtype="fp8"))
    if fp8.kv.linear_state_bytes:
        # Linear layers keep their state in the model dtype, and a hybrid model's page is sized
        # to hold that state: fp8 attention fits more tokens in the same page (a larger block),
        # so capacity grows in tokens, whether or not the block count moves.
        assert fp8.capacity.tokens > bf16.capacity.tokens
        assert fp8.capacity.num_blocks >= bf16.capacity.num_blocks
    else:
        assert fp8.capacity.num_blocks == pytest.approx(2 * bf16.capacity.num_blocks, abs=2)


def test_dtype_float32_doubles_the_weights_and_the_kv_page_and_fp8_quantization_halves_the_weights():
    base = compute(spec(max_model_len=8192))
    wide = compute(spec(max_model_len=8192, dtype="float32"))
    assert wide.weights_bytes_per_gpu == pytest.approx(2 * base.weights_bytes_per_gpu)
    assert wide.kv.page_bytes == 2 * base.kv.page_bytes
    narrow = compute(spec(max_model_len=8192, quantization="fp8"))
    assert narrow.weights_bytes_per_gpu == pytest.approx(base.weights_bytes_per_gpu / 2)
    assert "x 0.5 (fp8 on load)" in narrow.figure("weights").formula
