"""The NUMA check says whether an engine runs on the CPUs of its GPUs' socket (`numactl -s`,
`nvidia-smi topo -m`, guide 2.2.3)."""

import json

import pytest

from fleet.hostchecks.numa import NumaTopology, binding_check, gpu_node, read_topology, sysfs_bus_id
from fleet.hostchecks.processes import scan_processes
from tests.fleet.host_trees import VLLM_ARGV, Proc, build_host_tree, call_unprivileged, world_traversable_tmp

NODE0 = tuple(range(0, 32)) + tuple(range(64, 96))
NODE1 = tuple(range(32, 64)) + tuple(range(96, 128))
TWO_SOCKETS = NumaTopology(cpus_by_node={0: NODE0, 1: NODE1})


def test_each_node_s_cpus_come_from_sysfs(tmp_path):
    topology = read_topology(root=build_host_tree(tmp_path))

    assert topology.cpus_by_node == {0: NODE0, 1: NODE1}
    assert (topology.node_of_cpu(70), topology.node_of_cpu(100), topology.node_of_cpu(500)) == (0, 1, None)


@pytest.mark.parametrize(
    ("bus_id", "node"),
    [("00000000:3B:00.0", 0), ("0000:9a:00.0", 1), ("0000:db:00", 1), ("00000000:AF:00.0", None)],
)
def test_a_gpu_s_node_is_read_by_its_pci_address_in_any_spelling(tmp_path, bus_id, node):
    assert gpu_node(bus_id, root=build_host_tree(tmp_path)) == node


def test_a_gpu_whose_firmware_names_no_node_is_unknown(tmp_path):
    root = build_host_tree(tmp_path, gpus={"0000:3b:00.0": -1, "0000:5d:00.0": 0})
    (root / "sys/bus/pci/devices/0000:5d:00.0/numa_node").write_bytes(b"\xff\x00junk")

    assert gpu_node("0000:3b:00.0", root=root) is None
    assert gpu_node("0000:5d:00.0", root=root) is None


def test_nvml_s_bus_id_is_spelled_the_sysfs_way():
    assert sysfs_bus_id("00000000:3B:00.0") == sysfs_bus_id("0000:3b:00") == "0000:3b:00.0"


def test_a_process_bound_to_its_gpus_node_is_fine():
    binding = binding_check(cpus_allowed=NODE0, gpu_nodes=[0, 0, 0, 0], topology=TWO_SOCKETS)

    assert (binding.verdict, binding.ok, binding.message) == ("ok", True, None)


def test_an_unbound_process_whose_gpus_sit_on_one_node_may_cross_the_socket_link(tmp_path):
    root = build_host_tree(tmp_path)
    (engine,) = scan_processes(root=root).engines
    nodes = [
        gpu_node(bus, root=root) for bus in ("0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0", "0000:5d:00.0")
    ]

    binding = binding_check(
        cpus_allowed=engine.cpus_allowed, gpu_nodes=nodes, topology=read_topology(root=root)
    )

    assert (binding.verdict, binding.cpu_nodes, binding.gpu_nodes) == ("unbound", (0, 1), (0,))
    assert str(binding.message) == (
        "the process may run on NUMA nodes 0,1 but its GPUs sit on node 0: when it runs on the other node, "
        "host-to-GPU copies cross the socket link (guide 2.2.3); start it under "
        "numactl --cpunodebind=0 --membind=0"
    )


def test_a_process_bound_to_the_other_socket_crosses_it_on_every_copy(tmp_path):
    root = build_host_tree(tmp_path, processes=[Proc(2716, VLLM_ARGV, cpus="32-63,96-127")], listening=[])
    (engine,) = scan_processes(root=root).engines

    binding = binding_check(
        cpus_allowed=engine.cpus_allowed, gpu_nodes=[0, 0], topology=read_topology(root=root)
    )

    assert (binding.verdict, binding.ok) == ("wrong_node", False)
    assert str(binding.message).startswith("the process is bound to NUMA node 1 but its GPUs sit on node 0")


def test_an_unbound_process_with_gpus_on_both_nodes_is_fine():
    assert binding_check(cpus_allowed=range(128), gpu_nodes=[0, 1], topology=TWO_SOCKETS).verdict == "ok"


def test_a_single_node_host_has_nothing_to_cross(tmp_path):
    root = build_host_tree(tmp_path, numa={0: "0-63"})

    binding = binding_check(cpus_allowed=range(64), gpu_nodes=[0], topology=read_topology(root=root))

    assert binding.verdict == "ok"


def test_without_the_gpus_nodes_the_binding_is_unknown():
    binding = binding_check(cpus_allowed=NODE1, gpu_nodes=[None, None], topology=TWO_SOCKETS)

    assert (binding.verdict, binding.ok, binding.message) == ("unknown", None, None)


def test_a_kernel_without_numa_reads_as_no_nodes(tmp_path):
    root = build_host_tree(tmp_path, numa={})

    topology = read_topology(root=root)

    assert (topology.cpus_by_node, topology.unreadable) == ({}, None)


def test_a_cpulist_in_another_shape_says_which_file(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "sys/devices/system/node/node1/cpulist").write_bytes(b"\x00\xffjunk")

    assert (
        str(read_topology(root=root).unreadable) == "/sys/devices/system/node/node1/cpulist is not a CPU list"
    )


def test_a_cpulist_the_agent_may_not_read_says_so():
    with world_traversable_tmp() as tmp:
        root = build_host_tree(tmp)
        (root / "sys/devices/system/node/node0/cpulist").chmod(0)

        topology = call_unprivileged(read_topology, root=root)

    assert str(topology.unreadable) == (
        "/sys/devices/system/node/node0/cpulist could not be read: "
        "permission denied (the agent needs to run as root)"
    )


def test_results_are_json_ready(tmp_path):
    binding = binding_check(cpus_allowed=NODE1, gpu_nodes=[0], topology=TWO_SOCKETS)

    assert json.loads(json.dumps(binding.to_dict()))["verdict"] == "wrong_node"
    assert json.loads(json.dumps(TWO_SOCKETS.to_dict()))["cpus_by_node"]["1"][0] == 32
