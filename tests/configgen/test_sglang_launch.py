"""The SGLang launch generator: every command it writes (script, docker run, systemd unit)
parses with a parser built from the flags recorded from SGLang's own server_args.py, the
values land where they should, the ranges follow server_args.py, the files are valid for
their tools, and no value changes the shell."""

from __future__ import annotations

import argparse
import configparser
import io
import itertools
import shlex
import subprocess

import pytest
from django.core.management import call_command
from django.urls import reverse

from diagnostics.configgen import registry, sglang_launch
from diagnostics.configgen.base import SpecErrors
from tests.configgen.test_alert_rules import PAYLOADS

GENERATOR = sglang_launch.GENERATOR
TYPES = {"int": int, "float": float, "str": str}


def spec(**values):
    return GENERATOR.spec(values)


def files(**values):
    return {f.name: f for f in GENERATOR.render(spec(**values))}


def sglang_parser() -> argparse.ArgumentParser:
    """SGLang's argument parser as recorded: the flags, their aliases, types and choices.
    No abbreviations, so a flag is accepted only by a name server_args.py defines."""
    recorded = sglang_launch.server_args()
    parser = argparse.ArgumentParser(prog="sglang.launch_server", allow_abbrev=False, exit_on_error=False)
    for name, info in recorded["flags"].items():
        names = [name, *info.get("aliases", [])]
        if info["type"] == "switch":
            parser.add_argument(*names, action="store_true")
            continue
        options = {
            "type": TYPES[info["type"]],
            "required": info.get("required", False),
            "default": info.get("default"),
        }
        if "choices" in info:
            options["choices"] = info["choices"]
        parser.add_argument(*names, **options)
    return parser


def accepted(args: list[str]) -> argparse.Namespace:
    """What SGLang's parser makes of `args`; fails the test on an unknown flag or a bad value."""
    parser = sglang_parser()
    try:
        namespace, unknown = parser.parse_known_args(args)
    except (argparse.ArgumentError, SystemExit) as exc:
        pytest.fail(f"SGLang's parser refuses {args}: {exc}")
    assert unknown == [], f"flags server_args.py does not define: {unknown}"
    return namespace


def joined(text: str, start: str) -> list[str]:
    """The words of the continued command that begins with `start` (a line prefix)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    command = []
    for line in lines[first:]:
        command.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    return shlex.split(" ".join(command))


def launch_args(words: list[str], program: tuple[str, ...]) -> list[str]:
    for i in range(len(words)):
        if tuple(words[i : i + len(program)]) == program:
            return words[i + len(program) :]
    raise AssertionError(f"{program} not in {words}")


def every_command(**values) -> dict[str, list[str]]:
    """The launch arguments of each rendered file, as the shell or systemd would pass them."""
    out = files(**values)
    name = spec(**values).name
    script = out[f"{name}-sglang.sh"].content
    docker = out[f"{name}-sglang-docker.sh"].content
    unit = out[f"sglang-{name}.service"].content
    venv = spec(**values).venv
    return {
        "script": launch_args(joined(script, "exec "), sglang_launch.PROGRAM),
        "docker": launch_args(joined(docker, "docker run"), sglang_launch.PROGRAM),
        "systemd": launch_args(
            joined(unit, "ExecStart="), (f"ExecStart={venv}/bin/python", "-m", "sglang.launch_server")
        ),
    }


VARIED = [
    {},
    {
        "mem_fraction_static": "0.85",
        "max_running_requests": "128",
        "context_length": "16384",
        "chunked_prefill_size": "4096",
        "tensor_parallel_size": "2",
        "dp_size": "2",
        "gpu_devices": "4,5,6,7",
        "served_model_name": "chat",
        "quantization": "fp8",
        "kv_dtype": "fp8_e4m3",
        "dtype": "bfloat16",
        "trust_remote_code": "on",
        "schedule_conservativeness": "0.3",
        "disable_radix_cache": "on",
        "log_requests": "on",
        "port": "8011",
        "host": "10.0.0.7",
    },
    {"chunked_prefill_size": "-1", "api_key_env": "", "enable_metrics": "off"},
    {"model": "meta-llama/Llama-3.1-70B-Instruct", "tensor_parallel_size": "4", "api_key_env": "CHAT_KEY"},
]


def test_the_recorded_flags_name_their_source_and_version():
    recorded = sglang_launch.server_args()
    assert recorded["source"].startswith("https://github.com/sgl-project/sglang/blob/")
    assert recorded["source"].endswith("/python/sglang/srt/server_args.py")
    assert "commit" in recorded["source_version"] and recorded["docs"].startswith("https://")
    assert {
        "--mem-fraction-static",
        "--max-running-requests",
        "--context-length",
        "--tp-size",
        "--chunked-prefill-size",
        "--enable-metrics",
        "--api-key",
    } <= set(recorded["flags"])


@pytest.mark.parametrize("values", VARIED, ids=range(len(VARIED)))
def test_every_generated_command_is_accepted_by_sglangs_parser(values):
    for where, args in every_command(**values).items():
        namespace = accepted(args)
        assert namespace.model_path == spec(**values).model, where


@pytest.mark.parametrize(
    ("field", "flag_name"),
    [("quantization", "--quantization"), ("kv_dtype", "--kv-cache-dtype"), ("dtype", "--dtype")],
)
def test_every_choice_of_the_form_is_a_choice_sglang_accepts(field, flag_name):
    (choices,) = [f.choices for f in GENERATOR.fields if f.name == field]
    for value, _label in choices:
        args = every_command(**{field: value})["script"]
        accepted(args)
        if value and value != "auto":
            assert args[args.index(flag_name) + 1] == value


def test_the_values_reach_the_flags_sglang_reads():
    namespace = accepted(every_command(**VARIED[1])["script"])
    assert namespace.mem_fraction_static == 0.85 and namespace.max_running_requests == 128
    assert namespace.context_length == 16384 and namespace.chunked_prefill_size == 4096
    assert namespace.tp_size == 2 and namespace.dp_size == 2 and namespace.port == 8011
    assert namespace.kv_cache_dtype == "fp8_e4m3" and namespace.quantization == "fp8"
    assert namespace.schedule_conservativeness == 0.3 and namespace.disable_radix_cache
    assert namespace.enable_metrics and namespace.trust_remote_code and namespace.log_requests
    assert namespace.served_model_name == "chat" and namespace.host == "10.0.0.7"
    assert "export CUDA_VISIBLE_DEVICES=4,5,6,7" in files(**VARIED[1])["sglang-sglang.sh"].content


def test_sglangs_defaults_are_left_to_sglang():
    args = every_command()["script"]
    assert args[:2] == ["--model-path", "Qwen/Qwen3-8B"]
    for name in (
        "--mem-fraction-static",
        "--max-running-requests",
        "--context-length",
        "--chunked-prefill-size",
        "--tp-size",
        "--dp-size",
        "--kv-cache-dtype",
        "--schedule-conservativeness",
    ):
        assert name not in args
    assert "--enable-metrics" in args and accepted(args).port == 30000


def test_chunked_prefill_can_be_turned_off_with_minus_one():
    assert accepted(every_command(chunked_prefill_size="-1")["script"]).chunked_prefill_size == -1


def test_the_api_key_comes_from_the_environment_and_is_in_no_file():
    out = files(api_key_env="CHAT_KEY")
    script, docker, unit = (f.content for f in out.values())
    assert ': "${CHAT_KEY:?set CHAT_KEY to the API key}"' in script and '--api-key "$CHAT_KEY"' in script
    assert '--api-key "$CHAT_KEY"' in docker
    assert '--api-key "${CHAT_KEY}"' in unit and "EnvironmentFile=-/etc/sglang/sglang.env" in unit
    assert every_command(api_key_env="CHAT_KEY")["script"][-3:-1] == ["--api-key", "$CHAT_KEY"]
    assert all("--api-key" not in f.content for f in GENERATOR.render(spec(api_key_env="")))


@pytest.mark.parametrize("values", VARIED, ids=range(len(VARIED)))
def test_the_shell_scripts_parse(values, tmp_path):
    for file in GENERATOR.render(spec(**values)):
        if file.language == "bash":
            path = tmp_path / file.name
            path.write_text(file.content)
            result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            assert result.returncode == 0, result.stderr


def test_the_systemd_unit_has_what_systemd_needs():
    unit = files(startup_minutes="20")["sglang-sglang.service"].content
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    assert parser.has_option("Service", "ExecStart") and parser.has_option("Install", "WantedBy")
    assert "/opt/sglang/venv/bin/python -m sglang.launch_server" in unit and "TimeoutStartSec=1200" in unit


def test_docker_listens_on_every_interface_inside_and_gives_gpus_and_shared_memory():
    docker = files(host="127.0.0.1", tensor_parallel_size="2", gpu_devices="2,3")[
        "sglang-sglang-docker.sh"
    ].content
    assert "--gpus '\"device=2,3\"'" in docker and "--shm-size=8g" in docker and "-p 30000:30000" in docker
    assert "lmsysorg/sglang:latest \\\n  python3 -m sglang.launch_server" in docker
    assert "--host 0.0.0.0" in docker
    host_ipc = files(docker_ipc="host")["sglang-sglang-docker.sh"].content
    assert "--ipc=host" in host_ipc and "--shm-size" not in host_ipc


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.1", "x", "0.9; id"])
def test_mem_fraction_static_is_a_share_strictly_between_0_and_1(value):
    with pytest.raises(SpecErrors) as caught:
        spec(mem_fraction_static=value)
    assert "mem_fraction_static" in caught.value.errors


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("chunked_prefill_size", "0"),
        ("chunked_prefill_size", "-2"),
        ("max_running_requests", "0"),
        ("context_length", "8"),
        ("tensor_parallel_size", "0"),
        ("dp_size", "65"),
        ("schedule_conservativeness", "0"),
        ("port", "70000"),
        ("api_key_env", "bad key"),
        ("name", "Bad_Name"),
    ],
)
def test_out_of_range_values_are_refused(field, value):
    with pytest.raises(SpecErrors) as caught:
        spec(**{field: value})
    assert field in caught.value.errors


def test_the_gpu_devices_must_match_tp_times_dp_and_default_to_the_first():
    with pytest.raises(SpecErrors) as caught:
        spec(tensor_parallel_size="2", dp_size="2", gpu_devices="0,1")
    assert "gpu_devices" in caught.value.errors and "TP 2" in caught.value.errors["gpu_devices"]
    assert spec(tensor_parallel_size="2", dp_size="2").gpu_devices == (0, 1, 2, 3)


@pytest.mark.parametrize("field", [f.name for f in GENERATOR.fields])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_every_field_refuses_injection_payloads(field, payload):
    with pytest.raises(SpecErrors) as caught:
        GENERATOR.spec({field: payload})
    assert field in caught.value.errors


def titles(severity: str, **values) -> list[str]:
    return [c.title for c in GENERATOR.checks(spec(**values)) if c.severity == severity]


def test_the_defaults_raise_no_warning():
    assert titles("warning") == [] and titles("error") == []
    assert any("server_args.py" in t for t in titles("ok"))


def test_it_warns_without_metrics_without_a_key_and_without_chunking():
    found = titles("warning", enable_metrics="off", api_key_env="", chunked_prefill_size="-1")
    assert any("--enable-metrics" in t for t in found)
    assert any("No API key" in t for t in found)
    assert any("Chunked prefill is off" in t for t in found)


def test_a_fraction_near_1_leaves_nothing_for_activations():
    assert any("leaves little" in t for t in titles("warning", mem_fraction_static="0.97"))


def test_tp_must_divide_the_attention_heads_of_a_known_model():
    assert any(
        "does not divide" in t and "32" in t
        for t in titles("error", tensor_parallel_size="3", gpu_devices="0,1,2")
    )
    assert titles("error", tensor_parallel_size="4") == []


def test_weights_larger_than_the_static_pool_are_the_not_enough_memory_error():
    errors = titles("error", gpu_model="a100-80gb", mem_fraction_static="0.1")
    assert any("Not enough memory" in t for t in errors)
    fits = titles("ok", gpu_model="a100-80gb", mem_fraction_static="0.88")
    assert any("KV cache pool" in t for t in fits)


def test_a_context_longer_than_the_model_is_flagged():
    assert any("--context-length" in t for t in titles("warning", context_length="1000000"))


def test_sglang_is_registered_but_not_part_of_the_vllm_deployment_bundle():
    assert registry.get("sglang") is GENERATOR
    assert "sglang" not in registry.DEPLOYMENT


def test_genconfig_prints_the_command(capsys):
    out, err = io.StringIO(), io.StringIO()
    call_command("genconfig", "sglang", "--set", "max_running_requests=64", stdout=out, stderr=err)
    assert (
        "--max-running-requests 64" in out.getvalue() and "python3 -m sglang.launch_server" in out.getvalue()
    )


@pytest.mark.django_db
def test_the_page_renders_the_three_files(engineer):
    content = engineer.get(reverse("diagnostics:config-generator", args=["sglang"])).content.decode()
    assert "python3 -m sglang.launch_server" in content and "sglang-sglang.service" in content
    assert "Fix these first" not in content


def test_combinations_of_parallelism_render_a_command_sglang_accepts():
    for tp, dp in itertools.product((1, 2, 4), (1, 2)):
        args = every_command(tensor_parallel_size=str(tp), dp_size=str(dp))["systemd"]
        namespace = accepted(args)
        assert (namespace.tp_size, namespace.dp_size) == (tp, dp)


@pytest.mark.django_db
def test_fill_from_an_instance_takes_its_model_parallelism_gpus_and_port(engineer):
    from tests.factories import make_gpu, make_host, make_instance

    host = make_host()
    gpus = [make_gpu(host, index=2), make_gpu(host, index=3)]
    instance = make_instance(
        host, gpus=gpus, name="chat-sg", tensor_parallel_size=2, base_url="http://10.0.0.9:30011"
    )
    url = reverse("diagnostics:config-generator", args=["sglang"])
    content = engineer.get(url, {"from_instance": instance.pk}).content.decode()
    assert "Fix these first" not in content
    assert "export CUDA_VISIBLE_DEVICES=2,3" in content and "--tp-size 2" in content
    assert "--port 30011" in content and "chat-sg-sglang.sh" in content
