"""Instance specs: derived sizing, synthetic fleets, and specs from the inventory."""

from __future__ import annotations

from collections import Counter

import pytest

from fleet.simulator.model_sizes import guess_model_size
from fleet.simulator.spec import InstanceSpec, SpecError, specs_for, specs_from_inventory
from tests.factories import make_gpu, make_host, make_instance


def test_kv_blocks_come_from_memory_left_after_the_weights():
    spec = InstanceSpec(name="a")  # 8B in bf16 on an 80 GB H100 at 0.9
    kv_gib = spec.num_gpu_blocks * spec.block_size * spec.kv_bytes_per_token / 1024**3
    assert spec.weights_gib == pytest.approx(14.9, abs=0.1)
    assert 50 < kv_gib < 57  # 71.7 GiB usable - 14.9 GiB weights - activations
    assert spec.version == "0.11.2" and spec.enable_prefix_caching is True


def test_lower_utilization_leaves_less_kv_and_fp8_kv_doubles_the_tokens():
    base = InstanceSpec(name="a").num_gpu_blocks
    assert InstanceSpec(name="a", gpu_memory_utilization=0.5).num_gpu_blocks < base  # corrections #1
    assert InstanceSpec(name="a", kv_cache_dtype="fp8").num_gpu_blocks == pytest.approx(2 * base, rel=0.01)


def test_v0_engines_default_to_no_prefix_caching():
    assert InstanceSpec(name="a", version="0.7.3").enable_prefix_caching is False


def test_a_bad_spec_names_the_field():
    with pytest.raises(SpecError, match="engine: must be one of vllm, tgi, ollama"):
        InstanceSpec(name="a", engine="triton")
    with pytest.raises(SpecError, match="gpu_model: unknown GPU model 'h900'"):
        InstanceSpec(name="a", gpu_model="h900")
    with pytest.raises(SpecError, match="version: 'latest' is not a version"):
        InstanceSpec(name="a", version="latest")


def test_model_sizes_are_guessed_from_names():
    moe = guess_model_size(name="Qwen/Qwen3.5-35B-A3B-FP8")
    assert (moe.params_b, moe.active_params_b, moe.weight_bytes_per_param) == (35.0, 3.0, 1.0)
    assert guess_model_size(name="mistralai/Mistral-7B-Instruct-v0.3").params_b == 7.0
    assert guess_model_size(name="llama3.1:8b", quantization="gguf").weight_bytes_per_param == 0.56


def test_a_synthetic_fleet_is_mostly_vllm_across_the_version_generations():
    specs = specs_for(100, 9000)
    engines = Counter(s.engine for s in specs)
    assert engines == {"vllm": 80, "tgi": 10, "ollama": 10}
    assert [s.port for s in specs] == list(range(9000, 9100))
    assert {"0.7.3", "0.8.5", "0.10.1", "0.11.2", "0.12.0"} <= {s.version for s in specs}
    assert len({s.name for s in specs}) == 100


@pytest.mark.django_db
def test_inventory_instances_on_loopback_become_specs(monkeypatch):
    monkeypatch.setenv("SIM_TEST_KEY", "k-123")
    host = make_host(driver_version="550.127.05", cuda_version="12.4")
    gpus = [
        make_gpu(host, model="a100-80gb", uuid=f"GPU-0000000{i}-0000-0000-0000-000000000000")
        for i in range(2)
    ]
    make_instance(
        host,
        gpus=gpus,
        name="local-qwen",
        base_url="http://127.0.0.1:8101",
        served_model_name="Qwen/Qwen3-32B",
        tensor_parallel_size=2,
        engine_version="0.8.5",
        max_num_seqs=128,
        api_key_env="SIM_TEST_KEY",
    )
    make_instance(host, name="remote", base_url="http://10.0.0.9:8000")
    make_instance(
        host,
        name="local-ollama",
        engine="ollama",
        engine_version="0.12.3",
        base_url="http://localhost:8105",
        served_model_name="llama3.1:8b",
        max_num_seqs=None,
        quantization="gguf",
    )
    specs = {s.name: s for s in specs_from_inventory()}
    assert set(specs) == {"local-qwen", "local-ollama"}
    qwen = specs["local-qwen"]
    assert (qwen.port, qwen.version, qwen.gpu_model, qwen.gpu_count, qwen.params_b) == (
        8101,
        "0.8.5",
        "a100-80gb",
        2,
        32,
    )
    assert (qwen.api_key, qwen.driver_version, qwen.max_num_seqs) == ("k-123", "550.127.05", 128)
    assert qwen.gpus[1].uuid == gpus[1].uuid
    ollama = specs["local-ollama"]
    assert (ollama.port, ollama.engine, ollama.max_num_seqs, ollama.weight_bytes_per_param) == (
        8105,
        "ollama",
        4,
        0.56,
    )


def test_known_families_get_their_own_kv_layout_and_others_the_typical_one():
    from fleet.simulator.model_sizes import kv_bytes_per_token_guess

    # Qwen2.5-7B: 28 layers x 4 KV heads x 128 x (K, V) x 2 bytes, half the typical 8B layout.
    assert kv_bytes_per_token_guess(7, "Qwen/Qwen2.5-7B-Instruct") == 57344
    assert kv_bytes_per_token_guess(7, "Qwen/Qwen2.5-7B-Instruct-AWQ") == 57344
    assert kv_bytes_per_token_guess(8, "meta-llama/Llama-3.1-8B-Instruct") == 131072
    assert kv_bytes_per_token_guess(32, "Qwen/Qwen3-32B") == 262144
    assert InstanceSpec(name="q", served_model_name="Qwen/Qwen2.5-7B-Instruct").kv_bytes_per_token == 57344
