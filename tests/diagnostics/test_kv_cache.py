"""The KV cache layout and capacity, against cases worked by hand for each layer kind."""

import pytest

from diagnostics.sizing import kv_cache
from diagnostics.sizing.architecture import LayerKind, from_hf_config
from diagnostics.sizing.versions import behaviour

GiB = 1 << 30
V011, V021 = behaviour("0.11"), behaviour("0.21")

LLAMA_8B = {
    "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 131072,
}  # fmt: skip
GPT_OSS_20B = {
    "num_hidden_layers": 24, "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
    "head_dim": 64, "vocab_size": 201088, "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
}  # fmt: skip
DEEPSEEK_V3 = {
    "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128,
    "vocab_size": 129280, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "n_routed_experts": 256,
}  # fmt: skip
QWEN3_NEXT = {
    "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "vocab_size": 151936, "full_attention_interval": 4, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
}  # fmt: skip


def _layout(config, version=V011, **flags):
    flags.setdefault("max_num_batched_tokens", 2048)
    return kv_cache.layout(from_hf_config(config), behaviour=version, **flags)


def test_full_attention_costs_two_times_layers_heads_and_head_dim_per_token():
    kv = _layout(LLAMA_8B)
    assert kv.page_bytes == 2 * 16 * 8 * 128 * 2 == 65_536
    assert kv.bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072
    cap = kv_cache.capacity(kv, 10 * GiB, max_model_len=8192, behaviour=V011)
    assert cap.num_blocks == 10 * GiB // 65_536 // 32 == 5120
    assert cap.tokens == 5120 * 16
    assert cap.max_concurrency == 5120 / 512


def test_tensor_parallelism_splits_kv_heads_until_one_head_is_left_per_gpu():
    assert _layout(LLAMA_8B, tensor_parallel_size=2).kv_heads_per_rank == 4
    replicated = _layout(LLAMA_8B, tensor_parallel_size=16)
    assert replicated.kv_heads_per_rank == 1
    assert "does not shrink" in replicated.notes[0]


def test_pipeline_parallelism_gives_each_stage_its_share_of_the_layers():
    assert _layout(LLAMA_8B, pipeline_parallel_size=2).kinds == {LayerKind.FULL: 16}


def test_fp8_kv_cache_halves_the_page():
    assert _layout(LLAMA_8B, kv_cache_dtype="fp8").page_bytes * 2 == _layout(LLAMA_8B).page_bytes


def test_sliding_window_layers_hold_the_window_plus_the_batched_tokens():
    kv = _layout(GPT_OSS_20B)
    assert kv.kinds == {LayerKind.SLIDING: 12, LayerKind.FULL: 12}
    assert kv.page_bytes == 2 * 16 * 8 * 64 * 2 == 32_768
    assert kv.group_size == 12 and kv.num_groups == 2
    # full: cdiv(8192, 16) = 512; sliding: cdiv(min(128 - 1 + 2048, 8192), 16) + 1 = 137
    assert kv.blocks_per_request(8192) == 512 + 137
    cap = kv_cache.capacity(kv, 10 * GiB, max_model_len=8192, behaviour=V011)
    assert cap.num_blocks == 10 * GiB // 32_768 // 12 == 27_306
    assert cap.tokens == 27_306 // 2 * 16  # 0.10-0.20 divide by every group
    assert cap.max_concurrency == pytest.approx(27_306 / 649)
    newer = kv_cache.capacity(kv, 10 * GiB, max_model_len=8192, behaviour=V021)
    assert newer.tokens == int(27_306 / 649 * 8192)  # 0.21 counts what the requests can use


def test_sliding_layers_count_as_full_attention_without_the_hybrid_manager():
    kv = _layout(GPT_OSS_20B, disable_hybrid=True)
    assert kv.kinds == {LayerKind.FULL: 24} and not kv.hybrid


def test_mla_stores_one_latent_per_token_not_split_across_gpus():
    kv = _layout(DEEPSEEK_V3, tensor_parallel_size=8)
    assert kv.kinds == {LayerKind.MLA: 61}
    assert kv.block_size == 64
    assert kv.page_bytes == 64 * (512 + 64) * 2
    assert kv.bytes_per_token == 61 * 576 * 2 == 70_272
    assert _layout(DEEPSEEK_V3, tensor_parallel_size=1).page_bytes == kv.page_bytes


def test_linear_attention_keeps_one_state_per_sequence_and_widens_the_attention_block():
    kv = _layout(QWEN3_NEXT, tensor_parallel_size=4)
    # state per GPU: conv 3 x (2*16*128 + 32*128) / 4 + recurrent 32*128*128 / 4, in bf16
    assert kv.linear_state_bytes == (3 * 8192 // 4 + 32 * 128 * 128 // 4) * 2 == 274_432
    # attention per token per layer on a GPU: 2 x max(1, 2 // 4) heads x 256 x 2 B = 1,024 B
    assert kv.block_size == 16 * -(-274_432 // (16 * 1024)) == 272
    assert kv.page_bytes == 272 * 1024
    assert kv.group_size == 12 and kv.groups == {LayerKind.LINEAR: 3, LayerKind.FULL: 1}
    assert kv.blocks_per_request(262_144) == -(-262_144 // 272) + 3
    assert kv.bytes_per_token_growing == 12 * 1024


def test_a_request_needs_its_blocks_in_every_group():
    kv = _layout(GPT_OSS_20B)
    assert kv_cache.needed_for_one_request(kv, 8192, behaviour("0.14")) == 649 * 32_768 * 12


def test_the_estimated_maximum_length_is_the_longest_that_fits():
    kv = _layout(LLAMA_8B)
    available = 2 * GiB
    longest = kv_cache.estimate_max_model_len(kv, available, V011, 131_072)
    assert kv_cache.needed_for_one_request(kv, longest, V011) <= available
    assert kv_cache.needed_for_one_request(kv, longest + 1, V011) > available
    assert longest == 2 * GiB // 131_072  # 16,384 tokens of 128 KiB
