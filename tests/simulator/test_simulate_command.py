"""manage.py simulate as a process: it prints its ports, serves them, and stops on a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.simulator.conftest import free_port_pair

ROOT = Path(__file__).resolve().parents[2]


def _start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "manage.py", "simulate", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _lines_until_running(process: subprocess.Popen) -> list[str]:
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if "running; Ctrl-C stops them." in line:
            return lines
    raise AssertionError("simulate exited early:\n" + "\n".join(lines))


def test_it_listens_on_the_ports_it_prints_and_stops_on_sigint():
    port = free_port_pair()
    process = _start("--instances", "2", "--base-port", str(port))
    try:
        lines = _lines_until_running(process)
        assert f"listening on http://127.0.0.1:{port}" in lines[0]
        assert f"listening on http://127.0.0.1:{port + 1}" in lines[1]
        assert httpx.get(f"http://127.0.0.1:{port + 1}/health").status_code == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
        assert "Simulator stopped." in process.stdout.read()
    finally:
        process.kill()


def test_a_single_crashed_instance_exits_with_its_exit_code():
    port = free_port_pair()
    process = _start("--instances", "1", "--base-port", str(port))
    try:
        _lines_until_running(process)
        httpx.post(f"http://127.0.0.1:{port}/_sim/faults", json={"kind": "crash"})
        assert process.wait(timeout=10) == 137
    finally:
        process.kill()


def test_a_bad_scenario_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ninstances: [{name: a, engine: lmdeploy}]\n")
    result = subprocess.run(
        [sys.executable, "manage.py", "simulate", "--scenario", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "bad.yaml: instances[0].engine: must be one of vllm, tgi, ollama, sglang" in result.stderr
