"""Pulling an engine's last lines of log from a container, a systemd unit or a file."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.hostchecks.engine_logs import (
    LogSource,
    check_unit_name,
    may_read_whole_journal,
    pull_engine_log,
)
from fleet.hostchecks.launch_flags import REDACTED
from fleet.hostchecks.redaction import redact_secrets
from tests.fleet.docker_engine_server import STDERR, STDOUT, DockerEngineServer, vllm_container

VLLM_LOG = [
    (STDOUT, "INFO 10-01 08:00:02 api_server.py:585] vLLM API server version 0.11.0"),
    (STDOUT, "INFO 10-01 08:00:02 api_server.py:586] Namespace(api_key='sk-1', max_num_batched_tokens=8192)"),
    (STDERR, "ERROR 10-01 11:02:01 engine.py:140] torch.OutOfMemoryError: CUDA out of memory."),
    (STDOUT, "INFO 10-01 11:02:02 logger.py:41] Received request: headers Authorization: Bearer sk-abc.def"),
]  # fmt: skip


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="el", dir="/tmp"))  # AF_UNIX paths are short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def docker(socket_dir: Path) -> Iterator[DockerEngineServer]:
    with DockerEngineServer(socket_dir / "docker.sock", [vllm_container(log=VLLM_LOG)]) as server:
        yield server


def fake_journalctl(tmp_path: Path, body: str) -> str:
    """An executable standing in for journalctl: it writes the arguments it was given to
    argv.txt beside itself, then runs `body`."""
    script = tmp_path / "journalctl"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/argv.txt"\n{body}\n')
    script.chmod(0o755)
    return str(script)


# From a container


def test_it_pulls_the_containers_last_lines_with_their_secrets_redacted(docker):
    pulled = pull_engine_log(
        source=LogSource.container("vllm-server"), lines=3, docker_socket=docker.socket_path
    )

    assert pulled.ok and not pulled.truncated
    lines = pulled.text.splitlines()
    assert len(lines) == 3 and lines[1].endswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert f"api_key='{REDACTED}'" in lines[0] and "max_num_batched_tokens=8192" in lines[0]
    assert lines[2].endswith(f"Authorization: Bearer {REDACTED}")
    assert "sk-" not in pulled.text


def test_an_unknown_container_is_an_error_not_an_exception(docker):
    pulled = pull_engine_log(source=LogSource.container("vllm-old"), docker_socket=docker.socket_path)

    assert not pulled.ok and pulled.text == ""
    assert str(pulled.error) == "Docker says: No such container: vllm-old"


def test_a_host_without_docker_says_so(socket_dir):
    pulled = pull_engine_log(
        source=LogSource.container("vllm-server"), docker_socket=str(socket_dir / "no.sock")
    )

    assert "does not exist" in str(pulled.error)


def test_a_container_name_with_a_path_in_it_is_refused(docker):
    pulled = pull_engine_log(source=LogSource.container("../images/json"), docker_socket=docker.socket_path)

    assert str(pulled.error) == "'../images/json' is not a container id or name."
    assert docker.requests == []


# From a systemd unit


def test_it_runs_journalctl_with_a_fixed_argument_list_and_no_shell(tmp_path):
    journalctl = fake_journalctl(tmp_path, "printf 'starting\\nloading\\nready api_key=abc\\n'")

    pulled = pull_engine_log(source=LogSource.unit("vllm.service"), lines=3, journalctl=journalctl)

    assert (tmp_path / "argv.txt").read_text().splitlines() == [
        "--unit", "vllm.service", "--lines", "3", "--no-pager", "--output", "cat", "--quiet",
    ]  # fmt: skip
    assert pulled.ok and pulled.text == f"starting\nloading\nready api_key={REDACTED}\n"


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="journalctl is not installed here")
def test_the_real_journalctl_accepts_the_arguments():
    pulled = pull_engine_log(source=LogSource.unit("no-such-engine-unit.service"), lines=5)

    if may_read_whole_journal(euid=os.geteuid(), group_names=set()):
        assert pulled.ok  # no entries is an empty log, not a failure
    else:
        assert "systemd-journal" in str(pulled.error)


@pytest.mark.parametrize(
    "name", ["vllm; rm -rf /", "--help", "-u", "vllm*", "vllm service", "../vllm", "x" * 256, ""]
)
def test_a_unit_name_systemd_would_not_accept_is_never_passed_on(tmp_path, name):
    journalctl = fake_journalctl(tmp_path, "echo ran")

    pulled = pull_engine_log(source=LogSource.unit(name), journalctl=journalctl)

    assert "is not a systemd unit name" in str(pulled.error)
    assert not (tmp_path / "argv.txt").exists()


@pytest.mark.parametrize("name", ["vllm", "vllm.service", "vllm@gpu0.service", "vllm-70b_tp4.service"])
def test_unit_names_systemd_accepts_pass(name):
    assert check_unit_name(name) == name


def test_a_host_without_journalctl_says_so(tmp_path):
    pulled = pull_engine_log(source=LogSource.unit("vllm"), journalctl=str(tmp_path / "journalctl"))

    assert "is not installed" in str(pulled.error)


def test_a_failing_journalctl_says_what_it_printed(tmp_path):
    journalctl = fake_journalctl(tmp_path, "echo 'Failed to open journal: Bad message' >&2; exit 1")

    pulled = pull_engine_log(source=LogSource.unit("vllm"), journalctl=journalctl)

    assert str(pulled.error).endswith("exited with status 1: Failed to open journal: Bad message")


def test_a_journalctl_that_hangs_is_stopped(tmp_path):
    journalctl = fake_journalctl(tmp_path, "exec sleep 60")

    pulled = pull_engine_log(source=LogSource.unit("vllm"), journalctl=journalctl, timeout=0.3)

    assert "did not finish within 0.3 s" in str(pulled.error)


def test_a_flood_from_journalctl_keeps_only_the_end_within_the_byte_bound(tmp_path):
    journalctl = fake_journalctl(tmp_path, "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo last line")

    pulled = pull_engine_log(source=LogSource.unit("vllm"), lines=5, max_bytes=4096, journalctl=journalctl)

    assert pulled.ok and pulled.truncated
    assert pulled.text == "last line\n"  # the 3 MB line, cut by the bound, is dropped


def test_only_root_and_the_journal_groups_see_every_units_log():
    assert may_read_whole_journal(euid=0, group_names=set())
    assert may_read_whole_journal(euid=1000, group_names={"vllm", "systemd-journal"})
    assert not may_read_whole_journal(euid=1000, group_names={"vllm", "docker"})


# From a file


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A host tree with /var/log/vllm in it; files are named by their path on the host."""
    (tmp_path / "host" / "var" / "log" / "vllm").mkdir(parents=True)
    return tmp_path / "host"


def test_it_tails_a_log_file_in_the_agents_log_directories(root):
    (root / "var/log/vllm/server.log").write_text("".join(f"line {i}\n" for i in range(1000)))

    pulled = pull_engine_log(source=LogSource.file("/var/log/vllm/server.log"), lines=2, root=root)

    assert pulled.ok and pulled.text == "line 998\nline 999\n" and not pulled.truncated


def test_a_log_file_larger_than_the_bound_keeps_its_end_in_whole_lines(root):
    (root / "var/log/vllm/server.log").write_text("".join(f"line {i:05d}\n" for i in range(100_000)))
    source = LogSource.file("/var/log/vllm/server.log")

    pulled = pull_engine_log(source=source, lines=500, max_bytes=110, root=root)

    assert pulled.truncated and pulled.text == "".join(f"line {i:05d}\n" for i in range(99_991, 100_000))


def test_other_directories_are_read_only_when_the_agent_lists_them(root):
    (root / "opt/vllm").mkdir(parents=True)
    (root / "opt/vllm/nohup.out").write_text("INFO ready\n")
    source = LogSource.file("/opt/vllm/nohup.out")

    refused = pull_engine_log(source=source, root=root)
    allowed = pull_engine_log(source=source, root=root, log_dirs=["/var/log", "/opt/vllm"])

    said = "/opt/vllm/nohup.out is not in a directory the agent reads logs from (/var/log)."
    assert str(refused.error) == said
    assert allowed.text == "INFO ready\n"


@pytest.mark.parametrize("path", ["/etc/shadow", "/var/log/../../etc/shadow", "/var/log/vllm/escape.log"])
def test_a_path_outside_the_log_directories_is_refused(root, path):
    (root / "etc").mkdir()
    (root / "etc/shadow").write_text("root:$6$hash\n")
    (root / "var/log/vllm/escape.log").symlink_to("../../../etc/shadow")

    pulled = pull_engine_log(source=LogSource.file(path), root=root)

    assert not pulled.ok and pulled.text == ""
    assert "is not in a directory the agent reads logs from" in str(pulled.error)


def test_a_relative_path_is_refused(root):
    pulled = pull_engine_log(source=LogSource.file("var/log/vllm/server.log"), root=root)

    assert str(pulled.error) == "'var/log/vllm/server.log' is not an absolute path."


def test_a_missing_log_file_says_so_by_its_host_path(root):
    pulled = pull_engine_log(source=LogSource.file("/var/log/vllm/gone.log"), root=root)

    assert str(pulled.error) == "/var/log/vllm/gone.log could not be read: it does not exist"


def test_a_fifo_is_not_read_and_does_not_hang_the_agent(root):
    os.mkfifo(root / "var/log/vllm/pipe.log")

    pulled = pull_engine_log(source=LogSource.file("/var/log/vllm/pipe.log"), root=root)

    assert str(pulled.error) == "/var/log/vllm/pipe.log is not a regular file."


def test_a_pulled_log_is_json_ready(root):
    pulled = pull_engine_log(source=LogSource.file("/var/log/vllm/gone.log"), root=root)

    shown = json.loads(json.dumps(pulled.to_dict()))

    assert shown["source"] == {"kind": "file", "target": "/var/log/vllm/gone.log"}
    assert shown["error"]["msgid"] == "%(path)s could not be read: %(reason)s"


def test_a_source_as_the_console_stores_it_is_checked():
    source = LogSource.unit("vllm.service")

    assert LogSource.from_dict(json.loads(json.dumps(source.to_dict()))) == source
    with pytest.raises(ValueError, match="kind is one of container, journald, file, not 'ftp'"):
        LogSource.from_dict({"kind": "ftp", "target": "x"})
    with pytest.raises(ValueError, match="target is a text"):
        LogSource.from_dict({"kind": "file", "target": None})
    with pytest.raises(ValueError, match="kind is one of"):
        LogSource.from_dict(["file", "/var/log/x"])


def test_an_unknown_kind_of_source_is_an_error():
    pulled = pull_engine_log(source=LogSource("ftp", "x"))  # type: ignore[arg-type]

    assert str(pulled.error) == "'ftp' is not a kind of log source."


# Redaction


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Authorization: Bearer eyJhbGciOi.x-y_z", f"Authorization: Bearer {REDACTED}"),
        ("token hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 loaded", f"token {REDACTED} loaded"),
        ("api_key=sk-123 next", f"api_key={REDACTED} next"),
        (
            "{'api_key': ['sk-1'], 'hf_token': 'abc'}",
            f"{{'api_key': ['{REDACTED}'], 'hf_token': '{REDACTED}'}}",
        ),
        ('"password": "p4ss"', f'"password": "{REDACTED}"'),
        (
            "pulling https://user:s3cret@registry.example/x",
            f"pulling https://user:{REDACTED}@registry.example/x",
        ),
        ("--api-key sk-9 --port 8000", f"--api-key {REDACTED} --port 8000"),
        ("api_key=None", "api_key=None"),
    ],
)
def test_obvious_secrets_are_redacted(text, shown):
    assert redact_secrets(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "max_num_batched_tokens=8192, max_tokens=16",
        "prompt_token_ids: [1, 2, 3]",
        "Avg prompt throughput: 812.3 tokens/s",
        "--tokenizer meta-llama/Llama-3.1-8B-Instruct --max-num-batched-tokens 8192",
    ],
)
def test_words_that_only_look_like_secrets_are_kept(text):
    assert redact_secrets(text) == text
