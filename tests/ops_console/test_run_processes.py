"""`make run`'s `manage.py console`: web, worker and beat come up together on the embedded
default, and one Ctrl-C (SIGINT to the group) stops them all, leaving nothing behind, with
no traceback and exit status 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_with_env(marker: str) -> list[int]:
    """PIDs whose environment carries `marker`: every process the group started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def get_json(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.load(response)
    except (OSError, ValueError):
        return None


@pytest.fixture
def embedded_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        {"OPS_VAR_DIR": str(tmp_path), "PATH": f"{VENV_BIN}:{env['PATH']}", "OPS_RUN_MARKER": tmp_path.name}
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    subprocess.run(
        [sys.executable, "manage.py", "bootstrap"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return env


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_one_ctrl_c_stops_web_worker_and_beat(embedded_env, tmp_path):
    port = free_port()
    group = subprocess.Popen(
        [sys.executable, "manage.py", "console", "--port", str(port)],
        cwd=ROOT,
        env=embedded_env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        health = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health = get_json(f"http://127.0.0.1:{port}/healthz")
            if health and health["checks"]["worker"]["ok"]:
                break  # beat sent the heartbeat and the worker ran it
            time.sleep(0.5)
        started = len(processes_with_env(embedded_env["OPS_RUN_MARKER"]))
    finally:
        os.killpg(group.pid, signal.SIGINT)
        output = group.communicate(timeout=60)[0].decode(errors="replace")
    assert health and health["status"] == "ok", (health, output[-3000:])
    assert health["checks"]["worker"]["ok"], f"no heartbeat from beat and worker:\n{output[-3000:]}"
    assert started >= 4  # the console, gunicorn, the worker and beat (and their children)
    assert group.returncode == 0, output[-3000:]
    assert "Console stopped cleanly" in output and "Traceback" not in output, output[-3000:]
    deadline = time.monotonic() + 15
    while processes_with_env(embedded_env["OPS_RUN_MARKER"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with_env(embedded_env["OPS_RUN_MARKER"]) == [], output[-2000:]
