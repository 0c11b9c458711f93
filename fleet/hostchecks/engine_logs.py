"""The engine's last lines of log, bounded and with obvious secrets taken out.

The guide reads an engine's log with `docker logs --tail N vllm-server` or
`journalctl -u vllm`; a host agent does the same for one of three sources: a container (over
the Docker socket), a systemd unit (journalctl, run without a shell), or a log file under
one of the agent's log directories. The source names may come from the console; what may
be read is the agent's to decide: the journalctl executable, the Docker socket and the log
directories are the agent's settings, never part of a source. Files are read through `root`
(`/` on a host, a fixture tree in the tests), as in the other host checks.

`pull_engine_log` never raises for a source that cannot be read; its PulledLog says why.
"""

from __future__ import annotations

import grp
import os
import re
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from core.i18n import Message, later
from fleet.hostchecks.docker_api import DEFAULT_SOCKET, DockerClient
from fleet.hostchecks.docker_errors import DockerError
from fleet.hostchecks.docker_logs import last_lines
from fleet.hostchecks.processes import host_path, read_problem
from fleet.hostchecks.redaction import redact_secrets

LOG_BYTES = 256 * 1024
MAX_LINES = 10_000
JOURNALCTL_TIMEOUT_S = 10.0
LOG_DIRS = ("/var/log",)
MAX_TARGET_CHARS = 4096
# systemd.unit(5): letters, digits, ":", "-", "_", ".", "\"; one "@" before a template's
# instance; at most 255 characters. A leading "-" is refused too, so no name reads as an option.
UNIT_NAME_RE = re.compile(r"^[A-Za-z0-9:_.\\][A-Za-z0-9:_.\\-]*(@[A-Za-z0-9:_.\\-]*)?$")
UNIT_NAME_MAX = 255
_JOURNAL_READER_GROUPS = {"systemd-journal", "adm", "wheel"}


class LogSourceKind(StrEnum):
    CONTAINER = "container"
    JOURNALD = "journald"
    FILE = "file"


@dataclass(frozen=True)
class LogSource:
    """Where an engine logs: a container's id or name, a systemd unit, or a file's absolute
    path on the host."""

    kind: LogSourceKind
    target: str

    @classmethod
    def container(cls, id_or_name: str) -> LogSource:
        return cls(LogSourceKind.CONTAINER, id_or_name)

    @classmethod
    def unit(cls, name: str) -> LogSource:
        return cls(LogSourceKind.JOURNALD, name)

    @classmethod
    def file(cls, path: str) -> LogSource:
        return cls(LogSourceKind.FILE, path)

    @classmethod
    def from_dict(cls, data: object) -> LogSource:
        """A source as the console stores it, {"kind": ..., "target": ...}; ValueError if not one."""
        kind = data.get("kind") if isinstance(data, dict) else None
        target = data.get("target") if isinstance(data, dict) else None
        if kind not in set(LogSourceKind):
            raise ValueError(f"a log source's kind is one of {', '.join(LogSourceKind)}, not {kind!r}")
        if not isinstance(target, str) or not 0 < len(target) <= MAX_TARGET_CHARS:
            raise ValueError(f"a log source's target is a text of 1 to {MAX_TARGET_CHARS} characters")
        return cls(LogSourceKind(kind), target)

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}"

    def to_dict(self) -> dict[str, str]:
        return {"kind": str(self.kind), "target": self.target}


@dataclass(frozen=True)
class PulledLog:
    """The source's last lines (secrets redacted); truncated when the byte bound cut them
    short; error, when the source could not be read, says why."""

    source: LogSource
    text: str = ""
    truncated: bool = False
    error: Message | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        error = self.error.to_json() if self.error else None
        return {
            "source": self.source.to_dict(),
            "text": self.text,
            "truncated": self.truncated,
            "error": error,
        }


@dataclass(frozen=True)
class _Settings:
    lines: int
    max_bytes: int
    docker_socket: str
    journalctl: str
    root: Path
    log_dirs: tuple[str, ...]
    timeout: float


class LogUnavailable(Exception):
    def __init__(self, message: Message) -> None:
        super().__init__(message)
        self.message = message


def pull_engine_log(
    *,
    source: LogSource,
    lines: int = 200,
    max_bytes: int = LOG_BYTES,
    docker_socket: str = DEFAULT_SOCKET,
    journalctl: str = "journalctl",
    root: Path = Path("/"),
    log_dirs: Sequence[str] = LOG_DIRS,
    timeout: float = JOURNALCTL_TIMEOUT_S,
) -> PulledLog:
    """The last `lines` lines of the engine's log from `source`, at most max_bytes of them
    (the end is kept), with Bearer tokens, hf_ tokens and api_key-style values redacted."""
    settings = _Settings(
        lines=min(max(lines, 1), MAX_LINES),
        max_bytes=max(max_bytes, 1),
        docker_socket=docker_socket,
        journalctl=journalctl,
        root=Path(root),
        log_dirs=tuple(log_dirs),
        timeout=timeout,
    )
    reader = _READERS.get(source.kind)
    if reader is None:
        return PulledLog(source, error=later("%(kind)r is not a kind of log source.", kind=str(source.kind)))
    try:
        text, truncated = reader(source.target, settings)
    except LogUnavailable as exc:
        return PulledLog(source, error=exc.message)
    except DockerError as exc:
        return PulledLog(source, error=exc.message)
    return PulledLog(source, redact_secrets(text), truncated)


def _container_log(target: str, settings: _Settings) -> tuple[str, bool]:
    try:
        with DockerClient(settings.docker_socket) as docker:
            tail = docker.read_logs(target, tail=settings.lines, max_bytes=settings.max_bytes)
    except ValueError:
        raise LogUnavailable(later("%(name)r is not a container id or name.", name=target)) from None
    return tail.text, tail.truncated


# systemd units


def check_unit_name(name: str) -> str:
    """The unit name, if it has only the characters systemd allows in one; ValueError if not."""
    if not isinstance(name, str) or len(name) > UNIT_NAME_MAX or not UNIT_NAME_RE.match(name):
        raise ValueError(f"not a systemd unit name: {name!r}")
    return name


def journalctl_args(*, journalctl: str, unit: str, lines: int) -> list[str]:
    """The journalctl command line: the unit's last lines, message text only, no pager."""
    unit = check_unit_name(unit)
    return [journalctl, "--unit", unit, "--lines", str(lines), "--no-pager", "--output", "cat", "--quiet"]


def may_read_whole_journal(*, euid: int, group_names: set[str]) -> bool:
    """Whether journalctl shows this user the system's units: root, or a member of
    systemd-journal, adm or wheel. Others see only their own, without an error."""
    return euid == 0 or bool(group_names & _JOURNAL_READER_GROUPS)


def _journal_log(target: str, settings: _Settings) -> tuple[str, bool]:
    try:
        args = journalctl_args(journalctl=settings.journalctl, unit=target, lines=settings.lines)
    except ValueError:
        raise LogUnavailable(later("%(name)r is not a systemd unit name.", name=target)) from None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        _run(args, out=out, err=err, timeout=settings.timeout)
        text, truncated = _tail_of_file(out, lines=settings.lines, max_bytes=settings.max_bytes)
    if not text and not may_read_whole_journal(euid=os.geteuid(), group_names=_group_names()):
        raise LogUnavailable(
            later(
                "journalctl printed nothing for %(unit)s, and the agent's user is not in the "
                "systemd-journal group, so it may not see that unit's log.",
                unit=target,
            )
        )
    return text, truncated


def _run(args: list[str], *, out: BinaryIO, err: BinaryIO, timeout: float) -> None:
    """Run journalctl with its output in files, so a flood is bounded by the timeout and the
    disk, never by memory."""
    try:
        done = subprocess.run(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=err, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise LogUnavailable(later("%(program)s is not installed on this host.", program=args[0])) from None
    except PermissionError:
        raise LogUnavailable(later("The agent may not run %(program)s.", program=args[0])) from None
    except subprocess.TimeoutExpired:
        raise LogUnavailable(
            later("%(program)s did not finish within %(seconds)s s.", program=args[0], seconds=timeout)
        ) from None
    if done.returncode != 0:
        said, _ = _tail_of_file(err, lines=3, max_bytes=1024)
        raise LogUnavailable(
            later(
                "%(program)s exited with status %(status)s: %(said)s",
                program=args[0],
                status=done.returncode,
                said=redact_secrets(said.strip()) or "(no message)",
            )
        )


def _group_names() -> set[str]:
    names = set()
    for gid in {os.getegid(), *os.getgroups()}:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return names


# Log files


def _file_log(target: str, settings: _Settings) -> tuple[str, bool]:
    path = _log_file_path(target, settings)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the agent
    except OSError as exc:
        raise LogUnavailable(read_problem(path, exc, root=settings.root)) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            shown = host_path(settings.root, path)
            raise LogUnavailable(later("%(path)s is not a regular file.", path=shown))
        return _tail_of_file(f, lines=settings.lines, max_bytes=settings.max_bytes)


def _log_file_path(target: str, settings: _Settings) -> Path:
    """root/target with its symlinks resolved, if that lies in one of the log directories."""
    if not target.startswith("/") or "\0" in target:
        raise LogUnavailable(later("%(path)r is not an absolute path.", path=target))
    path = Path(os.path.realpath(settings.root / target.lstrip("/")))
    allowed = [Path(os.path.realpath(settings.root / d.lstrip("/"))) for d in settings.log_dirs]
    if not any(path.is_relative_to(directory) for directory in allowed):
        raise LogUnavailable(
            later(
                "%(path)s is not in a directory the agent reads logs from (%(dirs)s).",
                path=target,
                dirs=", ".join(settings.log_dirs),
            )
        )
    return path


def _tail_of_file(f: BinaryIO, *, lines: int, max_bytes: int) -> tuple[str, bool]:
    """The last `lines` lines of an open file, from at most its last max_bytes; truncated
    when the bound left fewer lines than asked for."""
    size = f.seek(0, os.SEEK_END)
    start = max(0, size - max_bytes)
    f.seek(start)
    text = last_lines(f.read(max_bytes), cut_front=start > 0, lines=lines)
    return text, start > 0 and text.count("\n") < lines


_READERS: dict[LogSourceKind, Callable[[str, _Settings], tuple[str, bool]]] = {
    LogSourceKind.CONTAINER: _container_log,
    LogSourceKind.JOURNALD: _journal_log,
    LogSourceKind.FILE: _file_log,
}
