"""The host agent's read-only Docker Engine client, against a real Unix-socket stand-in."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleet.hostchecks.container_state import (
    ImageRef,
    container_id_from_cgroup,
    container_state,
    parse_image_ref,
)
from fleet.hostchecks.docker_api import PREFERRED_API_VERSION, DockerClient
from fleet.hostchecks.docker_errors import DockerError, DockerFault
from fleet.hostchecks.launch_flags import REDACTED
from fleet.hostchecks.redaction import redact_command
from tests.fleet.docker_engine_server import (
    STDERR,
    STDOUT,
    DockerEngineServer,
    GiB,
    MiB,
    frame,
    oom_killed_container,
    vllm_container,
)
from tests.fleet.host_trees import (
    CONTAINER_ID,
    DOCKER_CGROUP,
    build_host_tree,
    call_unprivileged,
    world_traversable_tmp,
)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A short directory for sockets (AF_UNIX paths are limited to about 107 bytes), which an
    unprivileged user may enter."""
    with world_traversable_tmp() as path:
        yield path


@pytest.fixture
def engine(socket_dir: Path) -> Iterator[Callable[..., DockerEngineServer]]:
    started: list[DockerEngineServer] = []

    def start(*containers, **options) -> DockerEngineServer:
        server = DockerEngineServer(socket_dir / f"d{len(started)}.sock", containers, **options).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def client_for(server: DockerEngineServer, **options) -> DockerClient:
    return DockerClient(server.socket_path, **options)


def fault_of(call: Callable[[], object]) -> DockerError:
    with pytest.raises(DockerError) as caught:
        call()
    return caught.value


# What `docker inspect` answers


def test_it_reads_the_guides_oom_checks_from_a_killed_vllm_container(engine):
    server = engine(oom_killed_container())

    state = client_for(server).inspect("vllm-server")

    assert (state.status, state.running, state.oom_killed) == ("exited", False, True)
    assert (state.exit_code, state.restart_count, state.pid) == (137, 3, 0)
    assert state.finished_at == "2025-10-01T11:02:03.4Z"
    assert state.memory_bytes == 64 * GiB and state.memory_limited


def test_a_running_container_has_its_pid_and_no_memory_limit_reads_as_zero(engine):
    server = engine(vllm_container(memory=0, memory_swap=0))

    state = client_for(server).inspect("vllm-server")

    assert state.running and state.pid == 4242 and state.started_at == "2025-10-01T08:00:01.5Z"
    assert state.memory_bytes == 0 and not state.memory_limited


def test_it_reads_the_shared_memory_a_tensor_parallel_server_was_given(engine):
    server = engine(
        vllm_container(name="default-shm"), vllm_container(id="9" * 64, name="tp", shm_size=16 * GiB)
    )

    with client_for(server) as docker:
        assert docker.inspect("default-shm").shm_size_bytes == 64 * MiB
        assert docker.inspect("tp").shm_size_bytes == 16 * GiB


def test_it_says_which_gpus_the_container_was_given(engine):
    server = engine(vllm_container(runtime="nvidia", ipc_mode="host"))

    state = client_for(server).inspect("vllm-server")

    assert state.runtime == "nvidia" and state.ipc_mode == "host"
    assert [(g.count, g.capabilities) for g in state.gpu_requests] == [(-1, (("gpu",),))]


def test_it_splits_the_image_tag_out_of_config_image(engine):
    server = engine(vllm_container())

    state = client_for(server).inspect("vllm-server")

    assert state.image == "vllm/vllm-openai:v0.11.0"
    assert state.image_ref == ImageRef(registry="", repository="vllm/vllm-openai", tag="v0.11.0", digest="")


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("vllm/vllm-openai:v0.11.0", ImageRef("", "vllm/vllm-openai", "v0.11.0", "")),
        ("ghcr.io/x/y@sha256:" + "a" * 64, ImageRef("ghcr.io", "x/y", "", "sha256:" + "a" * 64)),
        ("localhost:5000/img", ImageRef("localhost:5000", "img", "", "")),
        ("localhost:5000/img:v2", ImageRef("localhost:5000", "img", "v2", "")),
        ("nvcr.io/nvidia/tritonserver:24.08-py3@sha256:" + "b" * 64,
         ImageRef("nvcr.io", "nvidia/tritonserver", "24.08-py3", "sha256:" + "b" * 64)),
        ("ubuntu", ImageRef("", "ubuntu", "", "")),
        ("sha256:" + "c" * 64, ImageRef("", "", "", "sha256:" + "c" * 64)),
    ],
)  # fmt: skip
def test_an_image_reference_splits_into_registry_repository_tag_and_digest(ref, expected):
    assert parse_image_ref(ref) == expected


def test_it_never_returns_the_containers_environment(engine):
    server = engine(vllm_container(env=["HF_TOKEN=hf_envsecretenvsecretenvsecret", "VLLM_API_KEY=sk-env"]))

    state = client_for(server).inspect("vllm-server")

    assert "envsecret" not in repr(state) and "sk-env" not in repr(state)


def test_it_redacts_secret_flag_values_but_keeps_the_rest_of_the_command_line(engine):
    server = engine(vllm_container())

    command = client_for(server).inspect("vllm-server").command

    assert command[:3] == ("python3", "-m", "vllm.entrypoints.openai.api_server")
    assert command[7:9] == ("--max-num-batched-tokens", "8192")
    assert command[9:11] == ("--api-key", REDACTED)
    assert command[11] == f"--hf-token={REDACTED}"
    assert "sk-live" not in " ".join(command) and "hf_abc" not in " ".join(command)


def test_a_shell_wrapped_command_line_is_redacted_as_text():
    R = REDACTED
    script = "vllm serve m --api-key 'abc def' --hf-token=hf_x --tokenizer t --max-num-batched-tokens 8192"

    shown = redact_command(["sh", "-c", script])

    assert shown[:2] == ("sh", "-c")
    assert shown[2] == (
        f"vllm serve m --api-key {R} --hf-token={R} --tokenizer t --max-num-batched-tokens 8192"
    )


def test_what_inspect_says_is_json_ready(engine):
    server = engine(oom_killed_container())

    shown = json.loads(json.dumps(client_for(server).inspect("vllm-server").to_dict()))

    assert (shown["oom_killed"], shown["exit_code"], shown["image_ref"]["tag"]) == (True, 137, "v0.11.0")


def test_an_inspect_answer_with_missing_or_mistyped_fields_reads_as_defaults():
    state = container_state(
        {"Id": "c" * 64, "State": {"OOMKilled": "yes", "ExitCode": "137"}, "HostConfig": []}
    )

    assert (state.oom_killed, state.exit_code, state.memory_bytes, state.command) == (False, 0, 0, ("",))


@pytest.mark.parametrize("answer", [[], {"Name": "/x"}, {"Id": 5}, None])
def test_an_inspect_answer_without_a_container_id_is_a_bad_answer(answer):
    assert fault_of(lambda: container_state(answer)).fault == DockerFault.BAD_ANSWER


# Listing, versions and finding the engine's container


def test_it_lists_stopped_containers_too(engine):
    server = engine(vllm_container(), oom_killed_container(id="e" * 64, name="old-vllm"))

    listed = client_for(server).containers()

    assert [(c.names, c.state) for c in listed] == [(("vllm-server",), "running"), (("old-vllm",), "exited")]
    assert ("GET", f"/v{PREFERRED_API_VERSION}/containers/json", "all=1") in server.requests


def test_it_reports_the_engine_version_for_the_pre_deploy_checklist(engine):
    server = engine(engine_version="27.3.1", api_version="1.47", min_api_version="1.24")

    version = client_for(server).version()

    assert (version.version, version.api_version, version.min_api_version) == ("27.3.1", "1.47", "1.24")
    assert (version.os, version.arch) == ("linux", "amd64")


@pytest.mark.parametrize(
    ("daemon_range", "spoken"),
    [
        (("1.24", "1.47"), PREFERRED_API_VERSION),  # Docker 27
        (("1.44", "1.52"), PREFERRED_API_VERSION),  # Docker 29.0, which refuses anything older than 1.44
        (("1.12", "1.41"), "1.41"),  # Docker 20.10, which refuses anything newer than 1.41
        (("1.50", "1.60"), "1.50"),  # a future Docker whose minimum passed ours: it names it, we speak it
    ],
)
def test_it_speaks_an_api_version_the_daemon_accepts(engine, daemon_range, spoken):
    server = engine(vllm_container(), min_api_version=daemon_range[0], api_version=daemon_range[1])

    with client_for(server) as docker:
        assert docker.inspect("vllm-server").oom_killed is False
        assert docker.api_version() == spoken
    assert server.requests[-1][1] == f"/v{spoken}/containers/vllm-server/json"


def test_the_client_only_ever_sends_get_and_offers_no_call_that_writes(engine, tmp_path):
    server = engine(vllm_container(log=[(STDOUT, "ready")]))

    with client_for(server) as docker:
        docker.ping(), docker.version(), docker.containers(), docker.logs("vllm-server")
        docker.container_for(pid=4242, root=build_host_tree(tmp_path))

    assert {method for method, _, _ in server.requests} == {"GET"}
    public = {name for name in dir(DockerClient) if not name.startswith("_")}
    assert public == {"ping", "api_version", "version", "containers", "inspect", "container_for", "logs",
                      "read_logs", "close"}  # fmt: skip


def test_it_finds_the_container_of_an_engine_process_by_its_cgroup(engine, tmp_path):
    root = build_host_tree(tmp_path)  # vLLM, pid 2716, in the container DOCKER_CGROUP names
    server = engine(vllm_container(id=CONTAINER_ID, pid=1))  # the engine is not the container's pid 1

    found = client_for(server).container_for(pid=2716, root=root)

    assert found is not None and found.name == "vllm-server"
    assert DOCKER_CGROUP.endswith(f"docker-{found.id}.scope")


def test_it_finds_the_container_of_an_engine_process_by_its_pid(engine, tmp_path):
    root = tmp_path / "host"
    (root / "proc" / "4242").mkdir(parents=True)
    (root / "proc" / "4242" / "cgroup").write_text("0::/user.slice/user-1000.slice/session-3.scope\n")
    server = engine(oom_killed_container(id="e" * 64, name="old"), vllm_container(pid=4242))

    with client_for(server) as docker:
        assert docker.container_for(pid=4242, root=root).name == "vllm-server"
        assert docker.container_for(pid=999, root=root) is None
        assert docker.container_for(container_id="f" * 64) is None


@pytest.mark.parametrize(
    "line",
    [
        "0::/system.slice/docker-{id}.scope",  # systemd cgroup driver, cgroup v2
        "12:memory:/docker/{id}",  # cgroupfs driver, cgroup v1
    ],
)
def test_the_container_id_is_read_from_either_cgroup_layout(line):
    container_id = "ab12" * 16

    assert container_id_from_cgroup(line.format(id=container_id) + "\n") == container_id
    assert container_id_from_cgroup("0::/system.slice/vllm.service\n") == ""


def test_a_container_name_that_is_not_one_is_refused_before_asking(engine):
    server = engine(vllm_container())

    with pytest.raises(ValueError, match="not a container id or name"):
        client_for(server).inspect("../../images/json")
    with pytest.raises(ValueError, match="exactly one"):
        client_for(server).container_for()
    assert server.requests == []


# Logs


def test_logs_undo_dockers_stream_framing_and_keep_stdout_and_stderr_in_order(engine):
    log = [(STDOUT, "INFO: Started server process"), (STDERR, "WARNING: ignoring"), (STDOUT, "INFO: ready")]
    server = engine(vllm_container(log=log), write_size=5)  # frame headers split across reads

    text = client_for(server).logs("vllm-server", tail=200)

    assert text == "INFO: Started server process\nWARNING: ignoring\nINFO: ready\n"
    assert server.requests[-1][2] == "stdout=1&stderr=1&tail=200&timestamps=0"


def test_logs_ask_for_the_last_lines_only(engine):
    server = engine(vllm_container(log=[(STDOUT, f"line {i}") for i in range(50)]))

    assert client_for(server).logs("vllm-server", tail=2) == "line 48\nline 49\n"


def test_logs_of_a_container_with_a_tty_are_read_raw(engine):
    server = engine(vllm_container(tty=True, log=[(STDOUT, "a"), (STDOUT, "b")]))

    assert client_for(server).logs("vllm-server") == "a\r\nb\r\n"


def test_logs_larger_than_the_byte_bound_keep_their_end_in_whole_lines(engine):
    server = engine(vllm_container(log=[(STDOUT, f"line {i:04d} " + "x" * 90) for i in range(1000)]))

    tail = client_for(server).read_logs("vllm-server", tail=1000, max_bytes=1000)

    assert tail.truncated
    assert tail.text.endswith("line 0999 " + "x" * 90 + "\n")
    assert tail.text.startswith("line 09") and len(tail.text) <= 1000


def test_logs_with_a_frame_header_docker_does_not_write_are_a_bad_answer(engine):
    server = engine(vllm_container(raw_log=b"plain text, not framed\n"))

    assert fault_of(lambda: client_for(server).logs("vllm-server")).fault == DockerFault.BAD_ANSWER


def test_logs_cut_off_inside_a_frame_keep_what_came_and_say_so(engine):
    server = engine(
        vllm_container(raw_log=frame(STDOUT, b"whole line\n") + frame(STDOUT, b"half a line")[:12])
    )

    tail = client_for(server).read_logs("vllm-server")

    assert tail.text == "whole line\nhalf" and tail.truncated


def test_a_frame_that_claims_gigabytes_passes_on_what_came_without_waiting_for_the_rest(engine):
    server = engine(vllm_container(raw_log=bytes([STDERR, 0, 0, 0, 255, 255, 255, 255]) + b"Traceback"))

    tail = client_for(server).read_logs("vllm-server")

    assert tail.text == "Traceback" and tail.truncated


def test_logs_of_an_unknown_container_say_docker_has_none(engine):
    server = engine(vllm_container())

    error = fault_of(lambda: client_for(server).logs("vllm-serverr"))

    assert error.fault == DockerFault.NOT_FOUND
    assert str(error) == "Docker says: No such container: vllm-serverr"


# When Docker cannot be asked


def test_a_missing_socket_says_docker_is_not_there(socket_dir):
    error = fault_of(lambda: DockerClient(str(socket_dir / "none.sock")).ping())

    assert error.fault == DockerFault.SOCKET_MISSING
    assert "does not exist" in str(error)


def test_a_socket_nobody_listens_on_says_so(socket_dir):
    path = socket_dir / "dead.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # bound, never listening: as a socket left by a daemon that died

    error = fault_of(lambda: DockerClient(str(path)).ping())

    assert error.fault == DockerFault.UNREACHABLE and "Docker daemon running" in str(error)


def _ping_fault(socket_path: str) -> str:
    try:
        DockerClient(socket_path).ping()
    except DockerError as exc:
        return f"{exc.fault}: {exc.message.msgid}"
    return "answered"


def test_a_socket_the_agent_may_not_open_says_to_join_the_docker_group(engine):
    server = engine(vllm_container())
    Path(server.socket_path).chmod(0o660 if os.geteuid() == 0 else 0o000)  # root:root, as root:docker
    _ping_fault(server.socket_path)  # loads what the call needs before a child drops root

    fault, _, message = call_unprivileged(_ping_fault, server.socket_path).partition(": ")

    assert fault == DockerFault.PERMISSION_DENIED
    assert "needs to be in the docker group" in message


def test_a_hung_daemon_times_out(engine):
    server = engine(vllm_container(), misbehave="hang")

    error = fault_of(lambda: client_for(server, timeout=0.3).inspect("vllm-server"))

    assert error.fault == DockerFault.TIMEOUT and "may be hung" in str(error)


def test_a_daemon_that_trickles_its_answer_hits_the_deadline(engine):
    server = engine(vllm_container(), misbehave="trickle")

    error = fault_of(lambda: client_for(server, timeout=2.0, deadline=0.3).inspect("vllm-server"))

    assert error.fault == DockerFault.TIMEOUT


@pytest.mark.parametrize(
    ("misbehave", "fault", "said"),
    [
        ("garbage", DockerFault.BAD_ANSWER, "is not JSON"),
        ("huge", DockerFault.TOO_LARGE, "larger than 4194304 bytes"),
        ("error500", DockerFault.HTTP_ERROR, "HTTP 500: Internal server error: containerd is not running"),
        ("cut", DockerFault.BAD_ANSWER, "broke off"),
    ],
)
def test_a_daemon_answer_that_cannot_be_used_says_why(engine, misbehave, fault, said):
    server = engine(vllm_container(), misbehave=misbehave)

    error = fault_of(lambda: client_for(server).inspect("vllm-server"))

    assert error.fault == fault and said in str(error)
