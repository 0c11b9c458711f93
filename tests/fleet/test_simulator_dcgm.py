"""The simulator as a dcgm-exporter: GET /_sim/hosts/{host}/dcgm on the control port and
GET /_sim/dcgm on an instance's port, read through the console's dcgm backend, agree with
what /_sim/nvml reports, faults included."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from fleet.nvml.base import NvmlReading
from fleet.nvml.dcgm import DcgmExporterBackend, reading_from_dcgm
from fleet.nvml.simulated_backend import SimulatedNvmlBackend
from fleet.probes.findings import Thresholds
from fleet.probes.gpu import read_gpus
from fleet.probes.gpu_rules import gpu_findings
from fleet.simulator.fleet_runner import SimulatorThread
from fleet.simulator.spec import GpuSlot, InstanceSpec, LoadProfile, specs_from_inventory
from tests.factories import make_gpu, make_host, make_instance
from tests.fleet.probing import free_ports

IDLE = LoadProfile(requests_per_s=0.0)  # no traffic: the GPUs' readings hold still between reads


def _spec(name: str, host: str, *indices: int, **fields) -> InstanceSpec:
    return InstanceSpec(
        name=name,
        gpu_host=host,
        gpu_count=len(indices),
        gpus=tuple(GpuSlot(index=i) for i in indices),
        load=IDLE,
        **fields,
    )


@pytest.fixture
def fleet() -> Iterator[SimulatorThread]:
    """node-a runs vllm-tp2 on GPUs 0 and 1 and, sharing GPU 1, ollama-small; node-b runs vllm-b."""
    specs = [
        _spec("vllm-tp2", "node-a", 0, 1),
        _spec("ollama-small", "node-a", 1, engine="ollama", served_model_name="llama3.1:8b"),
        _spec("vllm-b", "node-b", 0),
    ]
    with SimulatorThread(specs, control_port=0) as sim:
        yield sim


def _host_url(sim: SimulatorThread, host: str) -> str:
    return f"{sim.control_url}/_sim/hosts/{host}/dcgm"


def test_the_control_port_serves_a_host_s_gpus_each_once_as_exporter_text(fleet):
    response = httpx.get(_host_url(fleet, "node-a"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert response.text.startswith(
        "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
    )
    reading = reading_from_dcgm(response.text)
    assert [g.index for g in reading.gpus] == [0, 1]
    assert (reading.hostname, reading.driver_version) == ("node-a", "570.133.20")
    assert [g.index for g in reading_from_dcgm(httpx.get(_host_url(fleet, "node-b")).text).gpus] == [0]


def test_a_shared_gpu_holds_the_memory_of_both_instances(fleet):
    by_nvml = {
        name: NvmlReading.from_dict(httpx.get(f"{fleet.url(name)}/_sim/nvml").json()).gpus
        for name in ("vllm-tp2", "ollama-small")
    }
    shared = reading_from_dcgm(httpx.get(_host_url(fleet, "node-a")).text).gpus[1]
    both = by_nvml["vllm-tp2"][1].memory_used_mib + by_nvml["ollama-small"][0].memory_used_mib
    assert shared.memory_used_mib == min(shared.memory_total_mib, both)


def test_an_unknown_host_is_a_404_naming_it_and_the_known_ones(fleet):
    response = httpx.get(_host_url(fleet, "node-z"))
    assert response.status_code == 404
    assert response.json() == {"error": "no simulated instance runs on host 'node-z'; hosts: node-a, node-b"}


def test_an_instance_s_own_port_serves_the_same_gpus_as_its_nvml_reading(fleet):
    url = fleet.url("vllm-tp2")
    text = httpx.get(f"{url}/_sim/dcgm").text
    assert 'Hostname="node-a",DCGM_FI_DRIVER_VERSION="570.133.20"' in text
    nvml = NvmlReading.from_dict(httpx.get(f"{url}/_sim/nvml").json())
    # the exporter shows neither the processes nor the NUMA node
    assert reading_from_dcgm(text).gpus == tuple(replace(g, processes=(), numa_node=None) for g in nvml.gpus)


def _findings(backend, indices):
    return [
        (f.code, f.severity, str(f.evidence))
        for f in gpu_findings(read_gpus(backend=backend), indices, Thresholds())
    ]


@pytest.mark.parametrize(
    ("fault", "code"),
    [({"kind": "gpu_xid", "gpu": 1}, "gpu.xid"), ({"kind": "tps_drop"}, "gpu.thermal")],
    ids=["gpu_xid", "tps_drop"],
)
def test_a_gpu_fault_gives_the_same_finding_through_the_exporter_as_through_nvml(fleet, fault, code):
    fleet.inject("vllm-tp2", fault)
    dcgm = DcgmExporterBackend(_host_url(fleet, "node-a"), timeout=2.0)
    nvml = SimulatedNvmlBackend(f"{fleet.url('vllm-tp2')}/_sim/nvml", 2.0)
    through_dcgm, through_nvml = _findings(dcgm, [0, 1]), _findings(nvml, [0, 1])
    assert through_dcgm == through_nvml
    assert code in [c for c, _, _ in through_dcgm]


def test_a_gpu_xid_shows_with_its_code_and_the_exporter_s_message(fleet):
    fleet.inject("vllm-b", {"kind": "gpu_xid", "xid": 48})
    text = httpx.get(_host_url(fleet, "node-b")).text
    assert 'err_code="48",err_msg="Double Bit ECC Error"} 48\n' in text
    gpu = DcgmExporterBackend(_host_url(fleet, "node-b"), timeout=2.0).read().gpus[0]
    assert (gpu.xid_errors, gpu.xid_messages, gpu.ecc_uncorrected_volatile) == (
        (48,),
        ("Double Bit ECC Error",),
        1,
    )


@pytest.mark.django_db
def test_inventory_instances_are_served_under_their_host_s_name():
    host = make_host(name="gpu-node-07")
    gpus = [make_gpu(host, index=i, uuid=f"GPU-0000000{i}-aaaa-bbbb-cccc-000000000000") for i in range(2)]
    for gpu, port in zip(gpus, free_ports(2), strict=True):
        make_instance(host, gpus=[gpu], name=f"vllm-{gpu.index}", base_url=f"http://127.0.0.1:{port}")
    specs = specs_from_inventory(load=IDLE)
    assert {s.gpu_host for s in specs} == {"gpu-node-07"}
    with SimulatorThread(specs, control_port=0) as sim:
        reading = DcgmExporterBackend(_host_url(sim, "gpu-node-07"), timeout=2.0).read()
    assert [(g.index, g.uuid) for g in reading.gpus] == [(g.index, g.uuid) for g in gpus]
