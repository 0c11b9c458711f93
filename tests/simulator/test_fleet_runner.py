"""Many instances in one loop: fast start, shared ticker, clean stop."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import InstanceSpec, specs_for


def test_a_few_hundred_instances_start_quickly_answer_and_stop_cleanly():
    threads_before = set(threading.enumerate())
    specs = specs_for(300, 0, requests_per_s=0.2)
    started = time.monotonic()
    with SimulatorThread(specs) as sim:
        assert time.monotonic() - started < 5
        with httpx.Client() as client:
            for spec in specs[::37]:
                path = "/api/version" if spec.engine == "ollama" else "/health"
                assert client.get(sim.url(spec.name) + path).status_code == 200
        ports = [sim.port(s.name) for s in specs]
        assert (
            sim.runner._ticker is not None and len(sim.runner._tasks) == 0
        )  # one ticker, no task per instance
    assert not sim._thread.is_alive() and sim.loop.is_closed()
    assert set(threading.enumerate()) <= threads_before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", ports[0]), timeout=1).close()


def test_a_port_in_use_is_reported_with_the_instance_name():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"clash cannot listen on 127.0.0.1:{port}"):
            SimulatorThread([InstanceSpec(name="clash", port=port)]).__enter__()


def test_names_must_be_unique():
    with pytest.raises(ValueError, match="instance names must be unique"):
        SimulatorThread([InstanceSpec(name="a"), InstanceSpec(name="a")]).__enter__()


def test_the_control_port_reaches_a_crashed_instance_and_restarts_it(simulate):
    sim = simulate(InstanceSpec(name="a"), InstanceSpec(name="b", engine="tgi"), control_port=0)
    control = sim.control_url + "/_sim/instances"
    assert [row["name"] for row in httpx.get(control).json()["instances"]] == ["a", "b"]
    crashed = httpx.post(control + "/a/faults", json={"kind": "crash", "exit_code": 139})
    assert crashed.status_code == 201
    sim.wait_listening("a", False)
    assert httpx.get(control + "/a/state").json()["exit_code"] == 139
    assert httpx.get(control + "/a/nvml").json()["gpus"][0]["memory_used_mib"] == 0
    assert httpx.post(control + "/a/faults", json={"kind": "nope"}).status_code == 400
    assert httpx.get(control + "/zz/state").status_code == 404
    httpx.delete(control + "/a/faults")
    sim.wait_listening("a", True)
    assert httpx.get(sim.url("a") + "/health").status_code == 200
    assert httpx.get(control + "/a/state").json()["restarts"] == 1
