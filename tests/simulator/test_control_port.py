"""The fleet's control port: every fault posted and cleared for an instance, even one whose own
port is closed (a crash, refused connections), over real sockets."""

from __future__ import annotations

import httpx
import pytest

from fleet.simulator.faults import FaultKind
from fleet.simulator.spec import GpuSlot, InstanceSpec, specs_from_inventory
from tests.factories import make_gpu, make_host, make_instance
from tests.simulator.conftest import free_port_pair, health_status, wait_for

NAME = "vllm-a"


@pytest.fixture
def sim(simulate):
    return simulate(InstanceSpec(name=NAME), InstanceSpec(name="tgi-b", engine="tgi"), control_port=0)


def _control(sim, path: str = "") -> str:
    return f"{sim.control_url}/_sim/instances{path}"


def _health(sim) -> int | str | None:
    return health_status(sim.url(NAME))


def test_a_crash_closes_the_port_and_clearing_it_restarts_the_instance_there(sim):
    port = sim.port(NAME)
    response = httpx.post(_control(sim, f"/{NAME}/faults"), json={"kind": "crash", "exit_code": 139})
    assert response.status_code == 201
    wait_for(lambda: _health(sim) is None, what="the port to refuse connections")
    state = httpx.get(_control(sim, f"/{NAME}/state")).json()
    assert (state["listening"], state["exit_code"]) == (False, 139)

    assert httpx.delete(_control(sim, f"/{NAME}/faults"), params={"kind": "crash"}).status_code == 200
    wait_for(lambda: _health(sim) == 200, what="/health 200 on the same port")
    state = httpx.get(_control(sim, f"/{NAME}/state")).json()
    assert (state["port"], state["listening"], state["exit_code"], state["restarts"]) == (port, True, None, 1)


def test_refused_connections_end_when_the_fault_is_cleared(sim):
    assert (
        httpx.post(_control(sim, f"/{NAME}/faults"), json={"kind": "refuse_connections"}).status_code == 201
    )
    wait_for(lambda: _health(sim) is None, what="the port to refuse connections")
    state = httpx.get(_control(sim, f"/{NAME}/state")).json()
    assert (state["listening"], state["exit_code"]) == (False, None)

    assert httpx.delete(_control(sim, f"/{NAME}/faults")).json() == {"faults": []}
    wait_for(lambda: _health(sim) == 200, what="/health 200 again")
    assert httpx.get(_control(sim, f"/{NAME}/state")).json()["restarts"] == 0  # the process never died


@pytest.mark.parametrize("kind", list(FaultKind))
def test_every_fault_kind_can_be_posted_and_cleared_through_the_control_port(sim, kind):
    posted = httpx.post(_control(sim, f"/{NAME}/faults"), json={"kind": kind})
    assert posted.status_code == 201, posted.text
    assert [f["kind"] for f in posted.json()["faults"]] == [kind]

    cleared = httpx.delete(_control(sim, f"/{NAME}/faults"), params={"kind": kind})
    assert cleared.json() == {"faults": []}
    sim.wait_listening(NAME, True)
    assert _health(sim) == 200


def test_the_list_shows_each_instance_with_its_port_state_gpus_and_faults(sim):
    httpx.post(_control(sim, f"/{NAME}/faults"), json={"kind": "crash"})
    sim.wait_listening(NAME, False)
    rows = {row["name"]: row for row in httpx.get(_control(sim)).json()["instances"]}
    assert (rows[NAME]["listening"], rows[NAME]["exit_code"], rows[NAME]["gpus"]) == (False, 137, [0])
    assert [f["kind"] for f in rows[NAME]["faults"]] == ["crash"]
    assert (rows["tgi-b"]["listening"], rows["tgi-b"]["faults"]) == (True, [])


def test_an_unknown_instance_is_a_404_naming_it(sim):
    for response in (
        httpx.get(_control(sim, "/nope/state")),
        httpx.post(_control(sim, "/nope/faults"), json={"kind": "hang"}),
        httpx.delete(_control(sim, "/nope/faults")),
    ):
        assert response.status_code == 404
        assert "no simulated instance 'nope'" in response.json()["error"]


@pytest.mark.parametrize(
    ("fault", "field", "message"),
    [
        ({"kind": "tps_drop", "factor": "fast"}, "factor", "factor must be a number, got 'fast'"),
        ({"kind": "crash", "exit_code": 0}, "exit_code", "exit_code must be between 1 and 255"),
        ({"kind": "hang", "delay_s": 3}, "delay_s", "unknown parameter 'delay_s' for hang"),
        ({"kind": "oom"}, "kind", "unknown fault kind 'oom'"),
    ],
)
def test_a_malformed_fault_is_a_400_naming_the_field(sim, fault, field, message):
    response = httpx.post(_control(sim, f"/{NAME}/faults"), json=fault)
    assert response.status_code == 400
    assert response.json()["field"] == field and message in response.json()["error"]
    assert httpx.get(_control(sim, f"/{NAME}/state")).json()["faults"] == []


def test_a_gpu_fault_on_a_gpu_the_instance_lacks_is_refused_on_the_control_port(simulate):
    sim = simulate(InstanceSpec(name=NAME, gpus=(GpuSlot(index=2),)), control_port=0)
    response = httpx.post(_control(sim, f"/{NAME}/faults"), json={"kind": "gpu_xid", "gpu": 0})
    assert response.status_code == 400
    assert response.json()["field"] == "gpu"
    assert "gpu 0 is not one of vllm-a's GPUs; its GPU indices: 2" in response.json()["error"]
    assert httpx.post(_control(sim, f"/{NAME}/faults"), json={"kind": "gpu_xid"}).status_code == 201
    assert httpx.get(_control(sim, f"/{NAME}/nvml")).json()["gpus"][0]["xid_errors"] == [79]


def test_load_and_the_access_log_are_reachable_through_the_control_port(sim):
    response = httpx.post(
        _control(sim, f"/{NAME}/load"),
        json={"stream": "batch", "requests_per_s": 20, "mean_output_tokens": 5, "clients": ["10.0.2.77"]},
    )
    assert response.status_code == 200
    wait_for(
        lambda: "10.0.2.77 - - [" in httpx.get(_control(sim, f"/{NAME}/access_log")).text,
        what="a logged request",
    )
    assert httpx.post(_control(sim, f"/{NAME}/load"), json={"requests_per_s": -1}).status_code == 400


@pytest.mark.django_db
def test_an_inventory_instance_on_gpu_2_shows_a_default_xid_on_gpu_2(simulate):
    host = make_host()
    gpus = [make_gpu(host, index=i) for i in range(3)]
    port = free_port_pair()
    make_instance(host, gpus=[gpus[2]], name="on-gpu-2", base_url=f"http://127.0.0.1:{port}")
    specs = [s for s in specs_from_inventory() if s.name == "on-gpu-2"]
    sim = simulate(*specs, control_port=0)
    faults = _control(sim, "/on-gpu-2/faults")
    assert httpx.post(faults, json={"kind": "gpu_xid"}).status_code == 201
    gpus_seen = httpx.get(_control(sim, "/on-gpu-2/nvml")).json()["gpus"]
    assert [(g["index"], g["xid_errors"]) for g in gpus_seen] == [(2, [79])]
    refused = httpx.post(faults, json={"kind": "gpu_xid", "gpu": 0})
    assert refused.status_code == 400 and "its GPU indices: 2" in refused.json()["error"]
