"""The launch-flag check reads the flags an engine really runs with and compares them with the
inventory (guide 2.5.5: `ps aux | grep vllm`, appendix B)."""

import json

import pytest

from fleet.hostchecks.launch_flags import drift, parse_launch_flags, recognise, redact_argv
from tests.fleet.host_trees import VLLM_ARGV

INVENTORY = {
    "served_model_name": "/models/Qwen2.5-72B-Instruct",
    "max_model_len": 16384,
    "gpu_memory_utilization": 0.9,
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
    "tensor_parallel_size": 4,
    "pipeline_parallel_size": 1,
    "dtype": "auto",
    "quantization": "",
    "kv_cache_dtype": "auto",
    "enable_prefix_caching": True,
    "port": 8000,
}


def flags(*words):
    return parse_launch_flags(("vllm", "serve", *words))


def test_the_default_host_s_vllm_command_line_reads_as_its_flags():
    assert parse_launch_flags(VLLM_ARGV) == {
        "model": "/models/Qwen2.5-72B-Instruct",
        "tensor-parallel-size": "4",
        "max-model-len": "16384",
        "port": "8000",
    }


def test_flags_are_read_with_a_space_an_equals_sign_or_underscores():
    assert flags(
        "m", "--max-model-len", "16384", "--gpu-memory-utilization=0.85", "--max_num_seqs", "128"
    ) == {
        "model": "m",
        "max-model-len": "16384",
        "gpu-memory-utilization": "0.85",
        "max-num-seqs": "128",
    }


def test_vllm_s_short_aliases_read_as_their_long_names():
    assert flags("m", "-tp", "2", "-pp=2", "-q", "awq", "-O3", "-dp", "2", "-ep") == {
        "model": "m",
        "tensor-parallel-size": "2",
        "pipeline-parallel-size": "2",
        "quantization": "awq",
        "compilation-config": "3",
        "data-parallel-size": "2",
        "enable-expert-parallel": True,
    }


def test_booleans_take_no_value_and_their_no_form_turns_them_off():
    assert flags("--trust-remote-code", "m", "--no-enable-prefix-caching", "--enforce-eager") == {
        "trust-remote-code": True,
        "model": "m",
        "enable-prefix-caching": False,
        "enforce-eager": True,
    }


def test_the_positional_model_of_vllm_serve_wins_over_the_model_flag():
    assert flags("positional/model", "--model", "flag/model")["model"] == "positional/model"
    assert (
        parse_launch_flags(("python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"))["model"]
        == "m"
    )


def test_several_served_model_names_are_kept_as_a_list():
    assert flags("m", "--served-model-name", "qwen", "qwen-72b", "--port", "8001")["served-model-name"] == [
        "qwen",
        "qwen-72b",
    ]
    assert flags("m", "--served-model-name", "qwen")["served-model-name"] == "qwen"


def test_a_negative_number_is_a_value_not_a_flag():
    assert flags("m", "--max-model-len", "-1")["max-model-len"] == "-1"


def test_tgi_and_sglang_name_their_model_with_their_own_flags():
    tgi = parse_launch_flags(
        ("text-generation-launcher", "--model-id", "bigscience/bloom", "--num-shard", "2")
    )
    sglang = parse_launch_flags(("python3", "-m", "sglang.launch_server", "--model-path", "x", "--tp", "2"))

    assert (tgi["model"], tgi["num-shard"]) == ("bigscience/bloom", "2")
    assert (sglang["model"], sglang["tp"]) == ("x", "2")


def test_words_no_flag_takes_are_kept_as_positional():
    assert flags("m", "--", "extra", "--not-a-flag")["positional"] == ["extra", "--not-a-flag"]


def test_a_helper_title_is_vllm_without_flags():
    assert recognise(("VLLM::Worker_TP0",)).engine == "vllm"
    assert parse_launch_flags(("VLLM::Worker_TP0",)) == {}


def test_secret_values_are_redacted_whichever_way_they_are_written():
    assert redact_argv(
        ("vllm", "serve", "m", "--api-key", "a", "b", "--hf_token", "hf_x", "--port", "8000", "--hf-token")
    ) == (
        "vllm",
        "serve",
        "m",
        "--api-key",
        "<redacted>",
        "<redacted>",
        "--hf_token",
        "<redacted>",
        "--port",
        "8000",
        "--hf-token",
    )
    assert redact_argv(
        ("x", "--api_key=k", "--max-num-batched-tokens", "8192", "--ssl-keyfile", "/k.pem")
    ) == (
        "x",
        "--api-key=<redacted>",
        "--max-num-batched-tokens",
        "8192",
        "--ssl-keyfile",
        "/k.pem",
    )


def test_the_inventory_example_of_the_brief_is_one_drift():
    (found,) = drift(inventory={**INVENTORY, "max_model_len": 32768}, running=parse_launch_flags(VLLM_ARGV))

    assert (found.flag, found.inventory, found.running, found.running_is_default) == (
        "max-model-len",
        32768,
        "16384",
        False,
    )
    assert str(found.message) == "inventory says --max-model-len 32768, the process runs 16384"


def test_a_process_that_runs_as_the_inventory_says_has_no_drift():
    assert drift(inventory=INVENTORY, running=parse_launch_flags(VLLM_ARGV)) == []


@pytest.mark.parametrize(
    ("field", "wanted", "words"),
    [
        ("gpu_memory_utilization", 0.90, ("--gpu-memory-utilization", "0.9")),
        ("gpu_memory_utilization", 0.9, ("--gpu-memory-utilization", ".90")),
        ("max_model_len", 16000, ("--max-model-len", "16k")),
        ("max_model_len", 16384, ("--max-model-len", "16K")),
        ("max_num_batched_tokens", 8192, ("--max-num-batched-tokens", "8192")),
        ("dtype", "float16", ("--dtype", "half")),
        ("dtype", "bfloat16", ("--dtype", "BFloat16")),
        ("enable_prefix_caching", True, ("--enable-prefix-caching",)),
    ],
)
def test_values_compare_as_vllm_reads_them(field, wanted, words):
    assert drift(inventory={field: wanted}, running=flags("m", *words)) == []


def test_a_left_out_flag_counts_as_vllm_s_default():
    (found,) = drift(
        inventory={"gpu_memory_utilization": 0.85, "tensor_parallel_size": 1, "port": 8000},
        running=flags("m"),
    )

    assert (found.flag, found.running, found.running_is_default) == ("gpu-memory-utilization", 0.9, True)
    assert str(found.message) == (
        "inventory says --gpu-memory-utilization 0.85, the process runs vLLM's default 0.9"
    )


def test_a_left_out_flag_whose_default_depends_on_the_model_is_not_a_drift():
    inventory = {
        "max_model_len": 32768,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "quantization": "fp8",
    }

    assert drift(inventory=inventory, running=flags("m")) == []


def test_a_flag_the_inventory_leaves_at_the_default_is_a_drift_when_the_process_sets_it():
    (seqs, quantization) = drift(
        inventory={"max_num_seqs": None, "quantization": ""},
        running=flags("m", "--max-num-seqs", "512", "-q", "awq"),
    )

    assert (seqs.flag, seqs.inventory, seqs.running) == ("max-num-seqs", None, "512")
    assert str(seqs.message) == "inventory leaves --max-num-seqs at vLLM's default, the process runs 512"
    assert (quantization.flag, quantization.running) == ("quantization", "awq")


def test_prefix_caching_turned_off_is_worded_as_on_and_off():
    (found,) = drift(
        inventory={"enable_prefix_caching": True}, running=flags("m", "--no-enable-prefix-caching")
    )

    assert str(found.message) == "inventory says --enable-prefix-caching on, the process runs off"


def test_the_served_name_defaults_to_the_model_and_may_be_any_of_several():
    (found,) = drift(inventory={"served_model_name": "qwen"}, running=flags("/models/qwen"))
    assert (found.running, found.running_is_default) == ("/models/qwen", True)

    assert (
        drift(inventory={"served_model_name": "qwen"}, running=flags("m", "--served-model-name", "q", "qwen"))
        == []
    )


def test_flags_from_a_config_file_are_not_guessed():
    assert (
        drift(inventory={"gpu_memory_utilization": 0.8}, running=flags("m", "--config", "/etc/vllm.yaml"))
        == []
    )


def test_a_value_that_is_not_a_number_is_compared_as_text():
    (found,) = drift(inventory={"max_model_len": 32768}, running=flags("m", "--max-model-len", "auto"))

    assert found.running == "auto"


def test_a_drift_is_json_ready():
    (found,) = drift(
        inventory={"enable_prefix_caching": True}, running=flags("m", "--no-enable-prefix-caching")
    )

    data = json.loads(json.dumps(found.to_dict()))

    assert data["message"]["msgid"].startswith("inventory says --%(flag)s")
    assert data["message"]["params"]["inventory"] == {"msgid": "on", "params": {}}
