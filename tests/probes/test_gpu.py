from fleet.nvml.base import NvmlError
from fleet.probes.gpu import numa_findings, read_gpus
from fleet.probes.outcomes import Outcome
from tests.probes.gpus import FixedBackend, gpu, reading


def test_a_reading_comes_back_ok():
    result = read_gpus(backend=FixedBackend(reading(gpu(0))))
    assert result.outcome == Outcome.OK
    assert result.reading.gpus[0].name == "NVIDIA H200"
    assert result.to_dict()["reading"]["gpus"][0]["index"] == 0


def test_an_nvml_error_is_an_error_result_with_its_message():
    result = read_gpus(backend=FixedBackend(NvmlError("NVML Shared Library Not Found")))
    assert (result.outcome, result.error, result.reading) == (
        Outcome.ERROR,
        "NVML Shared Library Not Found",
        None,
    )


def test_a_backend_bug_is_an_error_result_too():
    result = read_gpus(backend=FixedBackend(KeyError("uuid")))
    assert result.outcome == Outcome.ERROR
    assert "KeyError" in result.error


def test_gpus_on_two_numa_nodes_are_reported():
    found = numa_findings(
        instance_gpus=[{"index": 0, "numa_node": 0}, {"index": 1, "numa_node": 1}],
        reading=reading(gpu(0, numa_node=0), gpu(1, numa_node=1)),
    )
    assert found == [
        "The instance's GPUs span NUMA nodes 0, 1 (NVML: GPU 0 on node 0, GPU 1 on node 1): PCIe traffic "
        "crosses sockets, so TPS can drop (guide 2.2.3)"
    ]


def test_an_inventory_numa_node_that_disagrees_with_nvml_is_reported():
    found = numa_findings(
        instance_gpus=[{"index": 0, "numa_node": 0}, {"index": 1, "numa_node": 0}],
        reading=reading(gpu(0, numa_node=1), gpu(1, numa_node=1)),
    )
    fix = "fix the inventory (and any numactl binding taken from it)"
    assert found == [
        f"GPU 0: the inventory says NUMA node 0, NVML says 1; {fix}",
        f"GPU 1: the inventory says NUMA node 0, NVML says 1; {fix}",
    ]


def test_without_a_reading_the_inventory_alone_can_show_a_split():
    found = numa_findings(
        instance_gpus=[{"index": 2, "numa_node": 0}, {"index": 5, "numa_node": 1}], reading=None
    )
    assert len(found) == 1 and "(inventory: GPU 2 on node 0, GPU 5 on node 1)" in found[0]


def test_one_numa_node_and_agreement_give_no_findings():
    found = numa_findings(
        instance_gpus=[{"index": 0, "numa_node": 1}, {"index": 1, "numa_node": None}],
        reading=reading(gpu(0, numa_node=1), gpu(1, numa_node=1)),
    )
    assert found == []
