"""vLLM launches rendered as a command, docker run, Kubernetes manifests and a systemd unit
with a watchdog: only flags each version accepts, accepted by the real tools, and safe."""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import kubernetes_validate
import pytest
import yaml

from diagnostics.configgen import docker, kubernetes, launch, systemd, vllm_flags, vllm_serve
from diagnostics.configgen.base import SpecErrors
from fleet.simulator.spec import InstanceSpec

GENERATORS = [vllm_serve.GENERATOR, docker.GENERATOR, kubernetes.GENERATOR, systemd.GENERATOR]
VERSIONS = vllm_flags.SUPPORTED_VERSIONS
K8S_VERSION = kubernetes_validate.utils.latest_version()


def spec(preset="", **values):
    return vllm_serve.GENERATOR.spec(values, preset=preset)


def flags_in(args):
    return [a for a in args if a.startswith("--")]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("preset", ["", *launch.PRESETS])
def test_every_flag_written_exists_in_its_version(version, preset):
    args, _ = launch.serve_args(
        spec(preset, vllm_version=version, enable_prefix_caching="off", log_requests="on")
    )
    parsed = vllm_flags.parse(version)
    for name in flags_in(args):
        assert vllm_flags.FLAGS[name].exists_in(parsed), (name, version)
        assert name not in vllm_flags.NOT_FLAGS


def test_the_flags_follow_the_version():
    old, v1, new = (launch.serve_args(spec(vllm_version=v))[0] for v in ("0.7", "0.11", "0.20"))
    assert "--disable-log-requests" in old and "--enable-chunked-prefill" in old  # V0 defaults
    assert "--disable-log-requests" not in new and "--enable-chunked-prefill" not in v1  # V1 defaults
    off = launch.serve_args(spec(vllm_version="0.11", enable_prefix_caching="off"))[0]
    assert "--no-enable-prefix-caching" in off
    assert "--enable-log-requests" in launch.serve_args(spec(vllm_version="0.20", log_requests="on"))[0]


def test_the_guides_invented_flags_are_never_written():
    rendered = "".join(f.content for g in GENERATORS for f in g.render(spec("balanced")))
    for name in ("--request-timeout", "--enable-metrics", "--max-paddings", "--swap-space"):
        assert name not in rendered


@pytest.mark.parametrize("generator", [vllm_serve.GENERATOR, docker.GENERATOR, systemd.GENERATOR])
@pytest.mark.parametrize("preset", ["", *launch.PRESETS])
def test_the_shell_scripts_parse(generator, preset, tmp_path):
    for file in generator.render(spec(preset)):
        if file.language == "bash":
            path = tmp_path / file.name
            path.write_text(file.content)
            result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            assert result.returncode == 0, result.stderr


def test_the_command_keeps_the_key_out_of_the_command_line():
    text = vllm_serve.render(spec(api_key_env="LLM_KEY"))[0].content
    assert 'export VLLM_API_KEY="${LLM_KEY:?' in text and "--api-key" not in text


def test_docker_can_share_the_hosts_ipc_namespace_instead():
    text = docker.render(spec("large_model", docker_ipc="host"))[0].content
    assert "--ipc=host" in text and "--shm-size" not in text


def test_docker_run_gives_gpus_shared_memory_and_a_memory_limit_without_swap():
    text = docker.render(spec("large_model", memory_limit_gib="96"))[0].content
    assert "--gpus '\"device=0,1\"'" in text and "--shm-size=8g" in text
    assert "--memory=96g" in text and "--memory-swap=96g" in text
    assert "vllm/vllm-openai:v0.11.0 \\\n  --model Qwen/Qwen3-8B" in text


@pytest.mark.parametrize("preset", ["", *launch.PRESETS])
def test_every_kubernetes_manifest_validates_against_the_api_schemas(preset):
    text = kubernetes.render(spec(preset, api_key_secret="vllm-key"))[0].content
    for document in yaml.safe_load_all(text):
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_the_deployment_probes_health_allows_for_loading_and_mounts_shm_for_multi_gpu():
    deployment, service = yaml.safe_load_all(
        kubernetes.render(spec("large_model", startup_minutes="20"))[0].content
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["startupProbe"]["httpGet"]["path"] == "/health"
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] == 1200
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert service["spec"]["ports"][0]["port"] == 8000
    single = list(yaml.safe_load_all(kubernetes.render(spec())[0].content))
    assert "dshm" not in json.dumps(single)


def test_the_systemd_units_have_what_systemd_needs():
    unit, _, watchdog_unit = systemd.render(spec(alert_webhook="https://hooks.example.com/x"))
    for file in (unit, watchdog_unit):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.read_string(file.content)
        assert parser.has_option("Service", "ExecStart") and parser.has_option("Install", "WantedBy")
    assert "/opt/vllm/venv/bin/vllm serve Qwen/Qwen3-8B" in unit.content
    assert "TimeoutStartSec=900" in unit.content


class _Hook(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802
        length = int(self.headers["Content-Length"])
        _Hook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook():
    _Hook.received = []
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", _Hook.received
    server.shutdown()


def run_watchdog(tmp_path, health_url, hook_url, **env):
    script = tmp_path / "watchdog.sh"
    script.write_text(systemd.render(spec(alert_webhook=hook_url))[1].content)
    restarts = tmp_path / "restart-calls"
    restart = tmp_path / "restart.sh"
    restart.write_text(f"#!/bin/sh\necho restarted >> {restarts}\n")
    restart.chmod(0o755)
    settings = {
        "PATH": "/usr/bin:/bin", "HEALTH_URL": health_url, "INTERVAL": "0.1",
        "FAILURES_BEFORE_RESTART": "2", "COOLDOWN": "0", "BUDGET_PER_HOUR": "2",
        "STATE_DIR": str(tmp_path / "state"), "RESTART_CMD": str(restart),
        "MAX_CHECKS": "12", **env,
    }  # fmt: skip
    result = subprocess.run(["bash", str(script)], env=settings, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return (restarts.read_text().count("restarted") if restarts.exists() else 0), result.stdout


def test_the_watchdog_restarts_a_dead_engine_within_its_budget_and_alerts(simulate, tmp_path, webhook):
    assert shutil.which("curl"), "the watchdog uses curl"
    hook_url, received = webhook
    sim = simulate(InstanceSpec(name="target", version="0.11.2", max_model_len=8192))
    health = sim.url("target") + "/health"
    assert httpx.post(sim.url("target") + "/_sim/faults", json={"kind": "engine_dead"}).status_code < 300
    assert httpx.get(health).status_code == 503

    restarts, log = run_watchdog(tmp_path, health, hook_url)
    assert restarts == 2  # the budget, then it leaves it to a person
    events = [alert["event"] for alert in received]
    assert events.count("restart") == 2 and events.count("restart_budget_spent") == 1
    assert "restart budget spent" in log


def test_the_watchdog_waits_out_its_cooldown_and_leaves_a_healthy_engine_alone(simulate, tmp_path, webhook):
    hook_url, received = webhook
    sim = simulate(InstanceSpec(name="target", version="0.11.2", max_model_len=8192))
    restarts, _ = run_watchdog(tmp_path, sim.url("target") + "/health", hook_url)
    assert restarts == 0 and received == []

    httpx.post(sim.url("target") + "/_sim/faults", json={"kind": "engine_dead"})
    restarts, log = run_watchdog(tmp_path, sim.url("target") + "/health", hook_url, COOLDOWN="3600")
    assert restarts == 1 and "waiting for it to load" in log


PAYLOADS = ["x\nExecStartPre=/bin/evil", "a; rm -rf /", "{evil}", 'a"b', "$(id)", "`id`", "a'b", "a\\b"]


@pytest.mark.parametrize(
    "field", [f.name for f in launch.LAUNCH_FIELDS if f.kind in ("text", "int", "float")]
)
def test_injection_payloads_are_refused_in_every_field_naming_it(field):
    for payload in PAYLOADS:
        with pytest.raises(SpecErrors) as caught:
            spec(**{field: payload})
        assert field in caught.value.errors, (field, payload)


def test_a_device_list_that_does_not_match_the_parallelism_is_refused():
    with pytest.raises(SpecErrors, match="gpu_devices: 1 device"):
        spec(tensor_parallel_size="2")
