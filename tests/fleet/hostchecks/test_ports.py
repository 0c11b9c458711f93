"""The port check says who listens on a TCP port (`ss -tlnp | grep 8000`, guide 2.2.4)."""

import json

import pytest

from fleet.hostchecks.ports import listener, listeners
from tests.fleet.host_trees import (
    Proc,
    Socket,
    build_host_tree,
    call_unprivileged,
    world_traversable_tmp,
)


def test_the_engine_s_port_is_held_by_its_process(tmp_path):
    found = listener(8000, root=build_host_tree(tmp_path))

    assert (found.address, found.port, found.pid, found.process) == ("0.0.0.0", 8000, 2716, "python3")


def test_every_listening_socket_is_listed_with_its_owner(tmp_path):
    scan = listeners(root=build_host_tree(tmp_path))

    assert sorted((item.address, item.port, item.pid, item.process) for item in scan.listeners) == [
        ("0.0.0.0", 22, 1203, "sshd"),
        ("0.0.0.0", 8000, 2716, "python3"),
        ("::", 22, 1203, "sshd"),
        ("::", 9100, 3100, "node_exporter"),
    ]  # the established and TIME_WAIT rows on 8000 are not listeners
    assert (scan.malformed, scan.owners_incomplete, scan.unreadable) == (0, False, None)


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.0.0.5", "::1", "::ffff:127.0.0.1", "fd00:1234::5", "::"]
)
def test_addresses_read_back_from_the_kernel_s_byte_order(tmp_path, address):
    root = build_host_tree(
        tmp_path, processes=[Proc(77, ("vllm", "serve", "m"))], listening=[Socket(8001, 77, address)]
    )

    found = listener(8001, root=root)

    assert (found.address, found.pid) == (address, 77)


def test_nobody_listening_is_none(tmp_path):
    assert listener(8080, root=build_host_tree(tmp_path)) is None


def test_a_socket_no_visible_process_holds_has_no_pid(tmp_path):
    root = build_host_tree(tmp_path, listening=[Socket(8000, None)])  # another namespace's, say

    found = listener(8000, root=root)

    assert (found.port, found.pid, found.process) == (8000, None, "")


def test_a_listener_with_a_known_process_is_preferred(tmp_path):
    root = build_host_tree(tmp_path, listening=[Socket(8000, None, "::"), Socket(8000, 2716)])

    assert listener(8000, root=root).pid == 2716


def test_junk_and_truncated_rows_are_counted_not_raised(tmp_path):
    root = build_host_tree(tmp_path)
    table = (root / "proc/net/tcp").read_bytes()
    (root / "proc/net/tcp").write_bytes(
        table + b"\x00\xff garbage\n"
        b"   9: 0100007F:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1\n"
        b"  10: 0100007F:1F90 00000000:0000 0A 00000000:0000"
    )

    scan = listeners(root=root)

    assert scan.malformed == 3
    assert listener(8000, root=root).pid == 2716


def test_a_10_mib_table_is_read_up_to_the_bound(tmp_path):
    root = build_host_tree(tmp_path)
    row = (
        "{:4d}: 0500000A:{:04X} 0900000A:C822 01 00000000:00000000 00:00000000 00000000     0        0 0 1 "
        "0 20 4 30 10 -1"
    )
    rows = "\n".join(row.format(i % 10000, 1024 + i % 60000).ljust(149) for i in range(70_000))
    (root / "proc/net/tcp").write_text((root / "proc/net/tcp").read_text() + rows + "\n")

    scan = listeners(root=root)

    assert listener(8000, root=root).pid == 2716
    assert scan.malformed <= 1  # the row cut at the bound


def test_unreadable_tables_say_so(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "proc/net/tcp").unlink()
    (root / "proc/net/tcp6").unlink()

    scan = listeners(root=root)

    assert scan.listeners == ()
    assert str(scan.unreadable) == "/proc/net/tcp could not be read: it does not exist"
    assert listener(8000, root=root) is None


def test_a_host_without_ipv6_still_reads_its_ipv4_table(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "proc/net/tcp6").unlink()

    scan = listeners(root=root)

    assert scan.unreadable is None and [item.port for item in scan.on_port(8000)] == [8000]


def test_a_process_whose_descriptors_the_agent_may_not_read_leaves_the_owner_unknown():
    with world_traversable_tmp() as tmp:
        root = build_host_tree(tmp)
        (root / "proc/2716/fd").chmod(0)

        found = call_unprivileged(listener, 8000, root=root)

    assert (found.port, found.pid) == (8000, None)


def test_the_scan_is_json_ready(tmp_path):
    data = json.loads(json.dumps(listeners(root=build_host_tree(tmp_path), port=8000).to_dict()))

    assert data["listeners"] == [
        {
            "address": "0.0.0.0",
            "port": 8000,
            "inode": data["listeners"][0]["inode"],
            "pid": 2716,
            "process": "python3",
        }
    ]
