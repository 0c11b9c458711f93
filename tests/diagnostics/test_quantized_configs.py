"""A quantized checkpoint is sized from its own quantization_config: each format's estimate lands
within a stated tolerance of a real checkpoint's size, ignored modules stay at the dtype, and a
config that contradicts itself is refused naming the field."""

import copy
import json
from pathlib import Path

import pytest
from django.utils import translation

from core.i18n import shown
from diagnostics.sizing import memory, quantization
from diagnostics.sizing.architecture import ConfigError, from_hf_config
from diagnostics.sizing.parameters import tensors

GiB = 1 << 30
CONFIGS = Path(__file__).resolve().parents[2] / "diagnostics" / "sizing" / "research" / "configs"


def _config(name):
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


# Qwen3-14B's config.json as published: https://github.com/citsjtu2020/LLM-Prof sglang/Model_Config.md
QWEN3_14B = {
    "model_type": "qwen3", "num_hidden_layers": 40, "hidden_size": 5120, "intermediate_size": 17408,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip
# Mistral 7B v0.2: v0.3's shapes with the 32,000-token vocabulary.
MISTRAL_7B_V02 = {
    "model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False,
}  # fmt: skip


def _with(config, quant):
    return {**copy.deepcopy(config), "quantization_config": quant}


def _close(estimate, real, tolerance):
    assert abs(estimate - real) / real <= tolerance, f"{estimate:,} vs {real:,}"


def test_the_parameter_count_from_config_matches_bf16_checkpoints_exactly():
    # safetensors total_size / 2 of the BF16 checkpoints in the shipped catalogue (sources there).
    for name, total_size in (("Qwen3-8B", 16_381_470_720), ("Qwen3-32B", 65_524_246_528)):
        assert sum(t.elements for t in tensors(_config(name))) * 2 == total_size


def test_fp8_block_scaled_deepseek_is_within_half_a_percent_of_its_safetensors_size():
    # DeepSeek-V3 (revision afb92e1f): 688,586,727,753 bytes of safetensors, cited by the search
    # index's file 59118868630 (a course's model ledger) and file 59417515851.
    e = quantization.estimate(_config("DeepSeek-V3"))
    _close(e.total, 688_586_727_753, 0.005)


def test_gptq_int4_mistral_is_within_two_percent_of_what_vllm_loads():
    # TheBloke/Mistral-7B-Instruct-v0.2-GPTQ, 4 bits, group 128, desc_act: vLLM 0.11 logged
    # "Model loading took 3.8844 GiB" (https://github.com/ArmDeveloperEcosystem/arm-learning-paths,
    # content/learning-paths/laptops-and-desktops/dgx_spark_voicechatbot/4_vllm.md).
    config = _with(MISTRAL_7B_V02, {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True})
    _close(quantization.estimate(config).total, 3.8844 * GiB, 0.02)


def test_awq_int4_qwen3_14b_is_within_three_percent_of_what_vllm_loads():
    # Qwen/Qwen3-14B-AWQ: vLLM 0.28 on an L40S logged "Model loading took 9.44 GiB" (a Korean blog
    # post, search-index file 60168338778; see research/vllm_startup_cases.json).
    config = _with(QWEN3_14B, {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    _close(quantization.estimate(config).total, 9.44 * GiB, 0.03)


def test_compressed_tensors_fp8_channel_qwen35_is_within_four_percent_of_its_card():
    # xega-ai/Qwen3.5-35B-A3B-FP8-Dynamic: 32.61 GB of FP8 tensors + 4.16 GB of BF16 ones, text
    # model only; lm_head, router gates and the Gated DeltaNet layers ignored
    # (https://huggingface.co/xega-ai/Qwen3.5-35B-A3B-FP8-Dynamic, read via huface.ru).
    config = _config("Qwen3.5-35B-A3B")
    config.pop("vision_config")
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            },
        },
        "ignore": ["lm_head", "re:.*mlp.gate$", "re:.*shared_expert_gate$", "re:.*linear_attn.*"],
    }  # fmt: skip
    _close(quantization.estimate(config).total, 36.77e9, 0.04)


def test_mxfp4_gpt_oss_is_within_ten_percent_of_what_vllm_loads():
    # The catalogue's gpt-oss figures are vLLM's loaded sizes (13.72 GiB and 65.9651 GiB, sources in
    # models.json); vLLM pads MXFP4 expert weights for its kernels, so it loads more than the
    # checkpoint's 4.25 bits a weight.
    for name, loaded in (("gpt-oss-20b", 14_731_737_825), ("gpt-oss-120b", 70_829_486_794)):
        estimate = quantization.estimate(_config(name)).total
        assert 0.9 * loaded <= estimate < loaded


def test_nvfp4_stores_four_and_a_half_bits_a_weight_plus_the_unquantized_rest():
    config = _config("Qwen3-235B-A22B-NVFP4")
    e = quantization.estimate(config)
    bits = (e.total - 2 * e.unquantized_elements) * 8 / e.quantized_elements
    assert 4.5 <= bits < 4.51
    assert quantization.scheme(config).key == "nvfp4"


def test_modelopt_mixed_precision_quantizes_each_layer_by_its_own_algorithm():
    config = _config("Qwen3.6-35B-A3B-NVFP4")
    s = quantization.scheme(config)
    assert s.key == "nvfp4" and {r.format.bits for r in s.rules} == {4, 8}
    fp8_only = _with(config, {"quant_method": "fp8", "weight_block_size": [128, 128]})
    assert quantization.estimate(config).total < quantization.estimate(fp8_only).total


def test_ignored_modules_are_counted_at_the_dtype():
    base = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    plain = quantization.estimate(_with(QWEN3_14B, base))
    skipped = quantization.estimate(_with(QWEN3_14B, {**base, "modules_to_not_convert": ["mlp.down_proj"]}))
    down = 40 * 5120 * 17408
    assert skipped.unquantized_elements - plain.unquantized_elements == down
    assert skipped.total - plain.total == pytest.approx(down, rel=0.001)  # 2 bytes instead of 1


def test_the_lm_head_and_embeddings_stay_at_the_dtype_unless_the_config_targets_them():
    head = 151936 * 5120
    awq = quantization.estimate(_with(QWEN3_14B, {"quant_method": "awq", "bits": 4, "group_size": 128}))
    assert awq.unquantized_elements > 2 * head
    ct = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "group_size": 128, "strategy": "group"},
            },
        },
    }  # fmt: skip
    # compressed-tensors' "Linear" target takes in the LM head too; the embeddings stay.
    assert awq.unquantized_elements - quantization.estimate(_with(QWEN3_14B, ct)).unquantized_elements == head


def test_the_architecture_keeps_a_key_the_memory_budget_knows_and_sizes_from_the_config():
    arch = from_hf_config(_config("Qwen3-235B-A22B-NVFP4"), params_total=235e9)
    assert arch.quantization == "nvfp4" and arch.weight_bytes_estimate
    weights, how = memory.weights_total(arch, quantization=arch.quantization, dtype=arch.dtype)
    assert weights == arch.weight_bytes_estimate and "modelopt NVFP4" in how
    # More than 4.5 bits x the card's parameters: the embeddings, head and routers stay BF16.
    assert weights > 235e9 * memory.bytes_per_param("nvfp4", "bfloat16")


@pytest.mark.parametrize(
    "quant, field",
    [
        ({"quant_method": "fp8", "bits": 4}, "'bits'"),
        ({"quant_method": "fp8", "weight_block_size": [128]}, "'weight_block_size'"),
        ({"quant_method": "awq", "bits": 5}, "'bits'"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 0}, "'group_size'"),
        ({"quant_method": "compressed-tensors", "config_groups": {}}, "'config_groups'"),
        (
            {
                "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "'format'",
        ),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32}, "'group_size'"),
        ({"quant_method": "modelopt", "quant_algo": "INT3"}, "'quant_algo'"),
        ({"quant_method": "awq", "bits": 4, "modules_to_not_convert": "lm_head"}, "'modules_to_not_convert'"),
        ({"quant_method": "int3"}, "'quant_method'"),
    ],
)  # fmt: skip
def test_a_contradictory_quantization_config_is_refused_naming_the_field(quant, field):
    with pytest.raises(ConfigError, match=field):
        from_hf_config(_with(QWEN3_14B, quant))


def test_the_refusal_reads_in_the_readers_language_whole():
    with pytest.raises(ConfigError) as refused:
        from_hf_config(_with(QWEN3_14B, {"quant_method": "fp8", "bits": 4}))
    message = refused.value.args[0]
    assert (
        str(message) == "config.json quantization_config 'bits' is 4; quant_method 'fp8' stores 8-bit weights"
    )
    with translation.override("zh-hans"):
        assert (
            shown(message)
            == "config.json 的 quantization_config 中 'bits' 为 4；quant_method 'fp8' 存储的是 8 位权重"
        )


def test_compressed_tensors_names_integer_and_float_eight_bit_weights_apart():
    def key(kind: str, symmetric: bool) -> str:
        weights = {"num_bits": 8, "type": kind, "strategy": "channel", "symmetric": symmetric}
        ct = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": weights}}}
        return quantization.scheme({"quantization_config": ct}).key

    assert key("int", symmetric=True) == "int8"  # W8A8 integer checkpoints
    assert key("int", symmetric=False) == "int8"
    assert key("float", symmetric=True) == "fp8"
