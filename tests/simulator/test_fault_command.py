"""manage.py fault: inject, clear and list faults through a real simulator's control port."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.core.management import CommandError, call_command

from fleet.management.commands.fault import parse_assignments
from fleet.simulator.spec import GpuSlot, InstanceSpec
from tests.simulator.conftest import free_port_pair, health_status, wait_for

ROOT = Path(__file__).resolve().parents[2]
NAME = "vllm-a"


@pytest.fixture
def sim(simulate):
    spec = InstanceSpec(name=NAME, gpu_count=2, params_b=32, gpus=(GpuSlot(index=2), GpuSlot(index=3)))
    return simulate(spec, InstanceSpec(name="tgi-b", engine="tgi"), control_port=0)


def fault(sim, *args: str) -> str:
    out = io.StringIO()
    call_command("fault", *args, "--control-url", sim.control_url, stdout=out)
    return out.getvalue()


def _health(sim) -> int | str | None:
    return health_status(sim.url(NAME))


def test_it_crashes_an_instance_and_clearing_the_crash_restarts_it_on_its_port(sim):
    out = fault(sim, NAME, "crash", "--set", "exit_code=139")
    assert out.startswith(f"{NAME}: crash exit_code=139 oom_killed=false (until cleared)")
    assert f"`manage.py fault {NAME} --clear crash` restarts it" in out
    wait_for(lambda: _health(sim) is None, what="the port to close")
    assert "exited with code 139" in fault(sim, NAME)

    assert fault(sim, NAME, "--clear", "crash") == f"{NAME}: cleared crash; active: none\n"
    wait_for(lambda: _health(sim) == 200, what="/health 200 again")
    assert sim.state(NAME)["restarts"] == 1


def test_refused_connections_end_when_cleared(sim):
    fault(sim, NAME, "refuse_connections", "--duration", "600")
    wait_for(lambda: _health(sim) is None, what="the port to refuse connections")
    assert f"{NAME}: cleared every fault; active: none" in fault(sim, NAME, "--clear")
    wait_for(lambda: _health(sim) == 200, what="/health 200 again")


def test_set_values_are_json_when_they_parse_and_text_otherwise(sim):
    assert parse_assignments(["n=3", "f=0.5", "on=true", "gpu=null", 'paths=["/v1"]', "name=fast"]) == {
        "n": 3,
        "f": 0.5,
        "on": True,
        "gpu": None,
        "paths": ["/v1"],
        "name": "fast",
    }
    fault(sim, NAME, "http_503", "--set", "fraction=0.5", "--set", 'paths=["/v1"]', "--duration", "60")
    active = sim.state(NAME)["faults"][0]
    assert (active["fraction"], active["paths"]) == (0.5, ["/v1"]) and 0 < active["remaining_s"] <= 60
    with pytest.raises(CommandError, match="--set takes KEY=VALUE, got 'fraction'"):
        fault(sim, NAME, "http_503", "--set", "fraction")


def test_a_gpu_fault_without_an_index_lands_on_the_instances_own_gpus(sim):
    fault(sim, NAME, "gpu_xid", "--set", "xid=48")
    gpus = httpx.get(f"{sim.control_url}/_sim/instances/{NAME}/nvml").json()["gpus"]
    assert [(g["index"], g["xid_errors"]) for g in gpus] == [(2, [48]), (3, [48])]
    with pytest.raises(
        CommandError, match=re.escape("gpu 0 is not one of vllm-a's GPUs; its GPU indices: 2, 3")
    ):
        fault(sim, NAME, "gpu_xid", "--set", "gpu=0")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((NAME, "tps_drop", "--set", "factor=fast"), "factor must be a number, got 'fast'"),
        ((NAME, "oom"), "unknown fault kind 'oom'; known kinds: slow_prefill"),
        ((NAME, "--clear", "oom"), "unknown fault kind 'oom'"),
        (("nope", "hang"), "no simulated instance 'nope'"),
        ((), "name an instance (manage.py fault INSTANCE KIND), or use --list"),
    ],
)
def test_the_simulators_refusal_is_the_commands_error(sim, args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        fault(sim, *args)


def test_the_list_reads_the_control_url_setting(sim, settings):
    fault(sim, NAME, "tps_drop", "--set", "factor=3")
    settings.SIMULATOR_CONTROL_URL = sim.control_url
    out = io.StringIO()
    call_command("fault", "--list", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(
        f"{NAME}  vllm 0.11.2  listening on {sim.port(NAME)}  GPUs 2, 3  faults: tps_drop"
    )
    assert lines[1].endswith("faults: none")


def test_an_unreachable_control_port_says_how_to_start_one():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(CommandError) as caught:
            call_command("fault", "--list", "--control-url", f"http://127.0.0.1:{port}")
    message = str(caught.value)
    assert f"no simulator control port answers at http://127.0.0.1:{port}" in message
    assert f"`manage.py simulate --from-inventory --control-port {port}` or `make run`" in message


def test_make_run_serves_the_control_port_the_command_uses_by_default():
    sim_line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("sim:"))
    assert "--control-port ${SIM_CONTROL_PORT:-8199}" in sim_line
    if "SIMULATOR_CONTROL_URL" not in os.environ and "SIM_CONTROL_PORT" not in os.environ:
        from ops_console import settings as module

        assert module.SIMULATOR_CONTROL_URL == "http://127.0.0.1:8199"


def test_a_lone_simulated_instance_with_a_control_port_survives_its_crash():
    port = free_port_pair()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "simulate", "--instances", "1", "--base-port", str(port)]
        + ["--control-port", str(port + 1)],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for line in process.stdout:
            if "running; Ctrl-C stops them." in line:
                break
        control = ["--control-url", f"http://127.0.0.1:{port + 1}"]
        call_command("fault", "sim-vllm-0000", "crash", *control, stdout=io.StringIO())
        wait_for(lambda: not _answers(port), what="the crash")
        assert process.poll() is None  # still running: the crash can be cleared
        call_command("fault", "sim-vllm-0000", "--clear", *control, stdout=io.StringIO())
        wait_for(lambda: _answers(port), what="the restart")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
