"""The process check finds the engines a host runs (`ps aux | grep vllm`, guide 2.2.4 and 2.5.5)."""

import json

import pytest

from fleet.hostchecks.processes import MAX_FILE_BYTES, container_id_of, parse_cpu_list, scan_processes
from tests.fleet.host_trees import (
    CONTAINER_ID,
    DOCKER_CGROUP,
    GIB_KIB,
    VLLM_ARGV,
    Proc,
    build_host_tree,
    call_unprivileged,
    world_traversable_tmp,
)

HEX = "ab" * 32


def test_the_vllm_server_is_found_with_its_flags_memory_cpus_and_container(tmp_path):
    scan = scan_processes(root=build_host_tree(tmp_path))

    (engine,) = scan.engines
    assert (engine.pid, engine.engine, engine.name, engine.ppid) == (2716, "vllm", "python3", 2690)
    assert engine.argv == VLLM_ARGV
    assert engine.rss_kib == 12 * GIB_KIB
    assert engine.cpus_allowed == tuple(range(128))
    assert engine.cgroup == DOCKER_CGROUP.removeprefix("0::")
    assert engine.container_id == CONTAINER_ID
    assert (scan.scanned, scan.truncated, scan.vanished, scan.unreadable) == (10, False, 0, None)


def test_the_engine_core_and_workers_are_listed_under_their_main_process(tmp_path):
    (engine,) = scan_processes(root=build_host_tree(tmp_path)).engines

    assert engine.child_pids == (2801, 2845, 2846, 2847, 2848)


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (("vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--port", "8001"), "vllm"),
        (("/usr/bin/python3", "/usr/local/bin/vllm", "serve", "/models/x"), "vllm"),  # a shebang script
        (("python3.12", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"), "vllm"),
        (("python", "-m", "vllm.entrypoints.cli.main", "serve", "x"), "vllm"),
        (("text-generation-launcher", "--model-id", "bigscience/bloom-560m", "--port", "8080"), "tgi"),
        (("/usr/local/bin/text-generation-router", "--port", "80"), "tgi"),
        (("/usr/bin/ollama", "serve"), "ollama"),
        (("python3", "-m", "sglang.launch_server", "--model-path", "x", "--port", "30000"), "sglang"),
        (("python3", "train.py", "--model", "vllm"), None),
        (("bash", "-c", "vllm serve x"), None),
        (("grep", "vllm"), None),
        (("/usr/bin/python3", "-m", "vllm_benchmarks.run"), None),
        (("ollama", "list"), None),
    ],
)
def test_each_engine_s_command_line_is_recognised_and_nothing_else(tmp_path, argv, engine):
    root = build_host_tree(tmp_path, processes=[Proc(4242, argv)], listening=[])

    found = [process.engine for process in scan_processes(root=root).engines]

    assert found == ([engine] if engine else [])


def test_two_servers_are_two_engines_each_with_its_own_helpers(tmp_path):
    processes = [
        Proc(100, ("vllm", "serve", "a", "--port", "8000")),
        Proc(101, ("VLLM::EngineCore",), ppid=100),
        Proc(200, ("vllm", "serve", "b", "--port", "8001")),
        Proc(201, ("VLLM::EngineCore",), ppid=200),
        Proc(300, ("text-generation-launcher", "--model-id", "m")),
        Proc(301, ("text-generation-router", "--port", "3000"), ppid=300),
        Proc(
            302,
            ("/opt/conda/bin/python3.11", "/opt/conda/bin/text-generation-server", "serve", "m"),
            ppid=300,
        ),
    ]

    engines = scan_processes(root=build_host_tree(tmp_path, processes=processes, listening=[])).engines

    assert [(e.pid, e.engine, e.child_pids) for e in engines] == [
        (100, "vllm", (101,)),
        (200, "vllm", (201,)),
        (300, "tgi", (301, 302)),
    ]


def test_a_helper_whose_main_is_gone_stands_as_an_engine_of_its_own(tmp_path):
    root = build_host_tree(tmp_path, processes=[Proc(101, ("VLLM::EngineCore",), ppid=1)], listening=[])

    assert [(e.pid, e.engine) for e in scan_processes(root=root).engines] == [(101, "vllm")]


def test_secrets_on_the_command_line_are_never_kept(tmp_path):
    argv = (
        "vllm",
        "serve",
        "s3://reader:hunter2@models.internal/qwen",
        "--api-key",
        "sk-live-1",
        "sk-live-2",
        "--hf-token=hf_abcdef",
        "--port",
        "8000",
    )
    root = build_host_tree(tmp_path, processes=[Proc(4242, argv)], listening=[])

    (engine,) = scan_processes(root=root).engines

    assert engine.argv == (
        "vllm",
        "serve",
        "s3://reader:<redacted>@models.internal/qwen",
        "--api-key",
        "<redacted>",
        "<redacted>",
        "--hf-token=<redacted>",
        "--port",
        "8000",
    )
    assert "hunter2" not in json.dumps(engine.to_dict())


@pytest.mark.parametrize(
    ("cgroup", "container"),
    [
        (f"/system.slice/docker-{HEX}.scope", HEX),
        (f"/docker/{HEX}", HEX),
        (
            f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b_3c.slice/cri-containerd-{HEX}.scope",
            HEX,
        ),
        (f"/kubepods/besteffort/pod5f0e-11aa/{HEX}", HEX),
        (f"/machine.slice/libpod-{HEX}.scope/container", HEX),
        (f"/kubepods.slice/kubepods-pod9.slice/crio-{HEX}.scope", HEX),
        ("/system.slice/vllm.service", ""),
        ("/", ""),
        (f"/user.slice/x{HEX}", ""),  # 64 hex inside another name is not an id
    ],
)
def test_the_container_id_is_read_from_each_runtime_s_cgroup_path(cgroup, container):
    assert container_id_of(cgroup) == container


def test_cgroup_v1_files_give_the_memory_controller_s_path(tmp_path):
    cgroup = f"12:memory:/docker/{HEX}\n11:cpu,cpuacct:/docker/{HEX}\n1:name=systemd:/docker/{HEX}"
    root = build_host_tree(tmp_path, processes=[Proc(4242, VLLM_ARGV, cgroup=cgroup)], listening=[])

    (engine,) = scan_processes(root=root).engines

    assert (engine.cgroup, engine.container_id) == (f"/docker/{HEX}", HEX)


def test_kernel_threads_vanished_processes_and_junk_are_passed_over(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "proc/2").mkdir()
    (root / "proc/2/cmdline").write_bytes(b"")  # a kernel thread
    (root / "proc/2/status").write_text("Name:\tkthreadd\n")
    (root / "proc/5000").mkdir()  # exited between listing and reading
    (root / "proc/5001").mkdir()
    (root / "proc/5001/cmdline").write_bytes(b"\xff\xfe\x00\x01junk\x00")
    (root / "proc/2716/status").write_bytes(
        b"\x00\xffNo colon here\nVmRSS:\tlots kB\nCpus_allowed_list:\t7-3\n"
    )
    (root / "proc/self").mkdir(exist_ok=True)

    scan = scan_processes(root=root)

    (engine,) = scan.engines
    assert (engine.pid, engine.rss_kib, engine.cpus_allowed, engine.name) == (2716, None, (), "")
    assert scan.vanished == 1 and scan.scanned == 13


def test_a_process_the_agent_may_not_read_is_counted_not_fatal():
    with world_traversable_tmp() as tmp:
        processes = [Proc(100, ("vllm", "serve", "a")), Proc(200, ("vllm", "serve", "b"))]
        root = build_host_tree(tmp, processes=processes, listening=[])
        (root / "proc/100/status").chmod(0)

        scan = call_unprivileged(scan_processes, root=root)

    assert [engine.pid for engine in scan.engines] == [200]
    assert scan.vanished == 1


def test_a_tree_without_proc_says_so(tmp_path):
    scan = scan_processes(root=tmp_path)

    assert str(scan.unreadable) == "/proc could not be read: it does not exist"


def test_the_scan_stops_at_its_process_limit(tmp_path):
    processes = [Proc(pid, ("vllm", "serve", f"m{pid}")) for pid in range(100, 110)]
    root = build_host_tree(tmp_path, processes=processes, listening=[])

    scan = scan_processes(root=root, limit=4)

    assert scan.truncated and scan.scanned == 4 and len(scan.engines) == 4


def test_a_10_mib_command_line_is_read_up_to_the_bound(tmp_path):
    root = build_host_tree(tmp_path, processes=[Proc(4242, VLLM_ARGV)], listening=[])
    huge = b"\0".join(arg.encode() for arg in VLLM_ARGV) + b"\0--extra\0" + b"y" * (10 << 20)
    (root / "proc/4242/cmdline").write_bytes(huge)

    (engine,) = scan_processes(root=root).engines

    assert engine.argv[:11] == VLLM_ARGV
    assert sum(len(arg) for arg in engine.argv) < MAX_FILE_BYTES


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8-9", (0, 1, 2, 3, 8, 9)), ("5", (5,)), ("0-1,1-2\n", (0, 1, 2)), ("", ())],
)
def test_cpu_lists_read_as_the_kernel_writes_them(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["3-1", "a-b", "0-99999999", "-1"])
def test_a_cpu_list_in_another_shape_is_refused(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_the_scan_is_json_ready(tmp_path):
    data = json.loads(json.dumps(scan_processes(root=build_host_tree(tmp_path)).to_dict()))

    assert data["engines"][0]["container_id"] == CONTAINER_ID


def test_python_s_own_options_before_the_module_are_stepped_over(tmp_path):
    argv = (
        "python3",
        "-W",
        "ignore",
        "-X",
        "faulthandler",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "m",
    )
    helper = (
        "python3",
        "-c",
        "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
        "--multiprocessing-fork",
    )
    root = build_host_tree(tmp_path, processes=[Proc(10, argv), Proc(11, helper, ppid=10)], listening=[])

    assert [(e.pid, e.engine, e.child_pids) for e in scan_processes(root=root).engines] == [(10, "vllm", ())]
