"""The kernel log check finds XIDs and OOM kills (`dmesg | grep -i oom`, guide 2.4.2 and 2.4.3)."""

import json
import os
import stat

import pytest

from fleet.hostchecks.kernel_log import MAX_LOG_BYTES, parse_dmesg_text, read_kernel_log
from tests.fleet.host_trees import CONTAINER_ID, build_host_tree, call_unprivileged, world_traversable_tmp

SCOPE = f"/system.slice/docker-{CONTAINER_ID}.scope"

# One OOM kill of a container as a 6.x kernel logs it (mm/oom_kill.c: dump_header,
# dump_oom_victim, __oom_kill_process), with some of the lines in between.
CONTAINER_OOM = [
    (90000.101, "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"),
    (90000.102, "CPU: 17 PID: 2716 Comm: python3 Tainted: P           OE      6.8.0-45-generic #45-Ubuntu"),
    (90000.103, "Call Trace:"),
    (90000.104, "memory: usage 75497472kB, limit 75497472kB, failcnt 1234"),
    (90000.105, "Tasks state (memory values in pages):"),
    (
        90000.106,
        "[   2716]     0  2716 39197253 18350080 18350080        0         0 150253568        0 0 python3",
    ),
    (
        90000.107,
        f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-{CONTAINER_ID}.scope,"
        f"mems_allowed=0-1,oom_memcg={SCOPE},task_memcg={SCOPE},task=python3,pid=2716,uid=0",
    ),
    (
        90000.108,
        "Memory cgroup out of memory: Killed process 2716 (python3) total-vm:156789012kB, "
        "anon-rss:73400320kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:152340kB oom_score_adj:0",
    ),
]
HOST_OOM = [
    (
        50.0,
        "sshd invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, "
        "oom_score_adj=0",
    ),
    (
        50.1,
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,"
        "task_memcg=/system.slice/vllm.service,task=vllm,pid=4100,uid=1000",
    ),
    (
        50.2,
        "Out of memory: Killed process 4100 (vllm) total-vm:98765432kB, anon-rss:65432100kB, "
        "file-rss:1234kB, shmem-rss:0kB, UID:1000 pgtables:130000kB oom_score_adj:0",
    ),
]


def log_of(tmp_path, lines):
    return read_kernel_log(root=build_host_tree(tmp_path, kmsg_lines=lines))


def test_a_container_s_oom_kill_merges_its_lines_into_one_event(tmp_path):
    log = log_of(tmp_path, CONTAINER_OOM)

    (kill,) = log.oom_kills
    assert (kill.pid, kill.process) == (2716, "python3")
    assert (kill.anon_rss_kib, kill.total_vm_kib) == (73_400_320, 156_789_012)
    assert kill.constraint == "memcg" and kill.container_limit
    assert kill.memcg == kill.task_memcg == SCOPE
    assert kill.container_id == CONTAINER_ID
    assert kill.invoked_by == "python3"
    assert kill.at_s == pytest.approx(90000.107)
    assert log.malformed == 0 and not log.truncated


def test_a_host_oom_kill_is_a_kill_for_want_of_host_ram(tmp_path):
    (kill,) = log_of(tmp_path, HOST_OOM).oom_kills

    assert kill.constraint == "none" and not kill.container_limit
    assert kill.memcg == ""  # global_oom: no cgroup hit its limit
    assert kill.task_memcg == "/system.slice/vllm.service" and kill.container_id == ""
    assert (kill.pid, kill.process, kill.invoked_by) == (4100, "vllm", "sshd")


def test_the_kill_line_alone_takes_its_constraint_from_its_prefix():
    log = parse_dmesg_text(
        "[123456.789012] Memory cgroup out of memory: Killed process 28456 (python) total-vm:156789012kB, "
        "anon-rss:73400320kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1234kB oom_score_adj:0\n"
        "[123999.000001] Out of memory: Killed process 12345 (python) total-vm:98765432kB, "
        "anon-rss:65432100kB, file-rss:1234kB\n"
    )

    assert [(k.pid, k.constraint, k.anon_rss_kib) for k in log.oom_kills] == [
        (28456, "memcg", 73_400_320),
        (12345, "none", 65_432_100),
    ]
    assert log.oom_kills[0].at_s == pytest.approx(123456.789012)


def test_the_kills_of_the_engine_s_processes_are_picked_out(tmp_path):
    log = log_of(tmp_path, CONTAINER_OOM + HOST_OOM)

    assert [kill.pid for kill in log.matched_to([2716, 2801, 2845])] == [2716]
    assert log.matched_to({9999}) == ()


def test_an_xid_keeps_the_gpu_the_process_and_the_driver_s_words(tmp_path):
    log = log_of(
        tmp_path,
        [
            (100.5, "NVRM: Xid (PCI:0000:3b:00): 79, pid=2716, name=python3, GPU has fallen off the bus."),
            (
                101.0,
                "NVRM: Xid (PCI:0000:86:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception",
            ),
            (102.0, "NVRM: Xid (PCI:0001:C1:00): 31, Ch 00000008, intr 10000000. MMU Fault"),
        ],
    )

    first, second, third = log.xids
    assert (first.pci, first.xid, first.pid, first.process) == ("0000:3b:00", 79, 2716, "python3")
    assert first.message == "GPU has fallen off the bus." and first.at_s == pytest.approx(100.5)
    assert (second.pid, second.process, second.message) == (None, "", "Graphics SM Warp Exception")
    assert (third.pci, third.xid, third.pid) == ("0001:c1:00", 31, None)
    assert third.message.startswith("Ch 00000008")


def test_pasted_dmesg_T_and_journalctl_lines_are_read_with_their_clock_time():
    log = parse_dmesg_text(
        "[Sat Feb 15 02:58:32 2026] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
        "cpuset=docker-1.scope,mems_allowed=0-1,oom_memcg=/docker/abc,task_memcg=/docker/abc,task=python,pid=28456,uid=0\n"
        "[Sat Feb 15 02:58:32 2026] Memory cgroup out of memory: Killed process 28456 (python) "
        "total-vm:156789012kB, anon-rss:73400320kB, file-rss:0kB, shmem-rss:0kB\n"
        "Feb 15 03:01:07 gpu-server-03 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=99, name=vllm, DBE\n"
        "kern  :err   : [  500.000001] NVRM: Xid (PCI:0000:3b:00): 94, pid=99, name=vllm, Contained\n"
    )

    (kill,) = log.oom_kills
    assert (kill.pid, kill.memcg, kill.logged_at, kill.at_s) == (
        28456,
        "/docker/abc",
        "Sat Feb 15 02:58:32 2026",
        None,
    )
    assert [(x.xid, x.logged_at, x.at_s) for x in log.xids] == [
        (48, "Feb 15 03:01:07", None),
        (94, "", 500.000001),
    ]


def test_events_before_a_time_can_be_left_out(tmp_path):
    log = log_of(tmp_path, HOST_OOM + CONTAINER_OOM)

    assert [kill.pid for kill in log.since(1000.0).oom_kills] == [2716]


def test_a_summary_whose_kill_line_was_cut_off_is_still_a_kill(tmp_path):
    log = log_of(tmp_path, CONTAINER_OOM[:-1])

    (kill,) = log.oom_kills
    assert (kill.pid, kill.constraint, kill.anon_rss_kib) == (2716, "memcg", None)


def test_binary_junk_and_truncated_records_are_counted_not_raised(tmp_path):
    root = build_host_tree(tmp_path, kmsg_lines=[])
    (root / "dev/kmsg").write_bytes(
        b"\x00\xff\xfe garbage without a prefix\n"
        b"6,1,notanumber,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, lost\n"
        b"6,2,2000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=2716, name=python3, GPU has fallen off the bus.\n"
        b" SUBSYSTEM=pci\n"
        b"3,3,3000000,-;Out of memory: Killed process 2716 (pyth\n"
        b"3,4,4000000,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(nu"  # cut mid-record, no newline
    )

    log = read_kernel_log(root=root)

    assert log.malformed == 2 and log.records == 3
    assert [(x.xid, x.pid) for x in log.xids] == [(79, 2716)]
    assert [(k.pid, k.anon_rss_kib) for k in log.oom_kills] == [(2716, None)]


def test_a_10_mib_log_is_read_from_its_newest_megabyte(tmp_path):
    root = build_host_tree(tmp_path, kmsg_lines=[])
    filler = b"".join(b"6,%d,%d,-;%s\n" % (i, i, b"x" * 200) for i in range(50_000))
    oom = "".join(f"3,{i},{round(t * 1e6)},-;{text}\n" for i, (t, text) in enumerate(CONTAINER_OOM))
    early = "".join(f"3,{i},{round(t * 1e6)},-;{text}\n" for i, (t, text) in enumerate(HOST_OOM))
    (root / "dev/kmsg").write_bytes(early.encode() + filler + oom.encode())
    assert (root / "dev/kmsg").stat().st_size > 10 * 1_000_000

    log = read_kernel_log(root=root)

    assert log.truncated
    assert [kill.pid for kill in log.oom_kills] == [2716]  # the early kill is past the bound
    assert log.records * 200 < MAX_LOG_BYTES


def test_pasted_text_is_bounded_too():
    text = (
        "x" * (2 * MAX_LOG_BYTES)
        + "\n[ 5.000000] Out of memory: Killed process 7 (a) total-vm:1kB, anon-rss:1kB\n"
    )

    log = parse_dmesg_text(text)

    assert log.truncated and [kill.pid for kill in log.oom_kills] == [7]


def test_a_character_device_is_read_until_it_has_no_more_records(tmp_path):
    root = build_host_tree(tmp_path, kmsg_lines=[])
    (root / "dev/kmsg").unlink()
    try:
        os.mknod(root / "dev/kmsg", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
    except PermissionError:
        pytest.skip("this sandbox may not make device nodes")

    log = read_kernel_log(root=root)

    assert (log.records, log.unreadable) == (0, None)


def test_a_missing_log_says_so(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "dev/kmsg").unlink()

    log = read_kernel_log(root=root)

    assert str(log.unreadable) == "/dev/kmsg could not be read: it does not exist"
    assert log.oom_kills == ()


def test_a_log_the_agent_may_not_read_says_so():
    with world_traversable_tmp() as tmp:
        root = build_host_tree(tmp, kmsg_lines=CONTAINER_OOM)
        (root / "dev/kmsg").chmod(0)

        log = call_unprivileged(read_kernel_log, root=root)

    assert str(log.unreadable) == (
        "/dev/kmsg could not be read: permission denied (the agent needs to run as root)"
    )


def test_the_result_is_json_ready(tmp_path):
    data = json.loads(json.dumps(log_of(tmp_path, CONTAINER_OOM).to_dict()))

    assert data["oom_kills"][0]["container_limit"] is True
    assert data["oom_kills"][0]["anon_rss_kib"] == 73_400_320
