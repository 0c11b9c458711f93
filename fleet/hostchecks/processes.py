"""The inference engines running on a host, from /proc (`ps aux | grep vllm`, guide 2.2.4, 2.5.5).

Each /proc/<pid>/ gives the command line (NUL-separated), the status file (Name, PPid, VmRSS,
Cpus_allowed_list) and the cgroup, which names the container a process runs in. An engine
forks helpers (vLLM's "VLLM::EngineCore" and "VLLM::Worker_TP0", TGI's router and shards,
Ollama's runners); a helper whose parent belongs to the same engine is listed under its main
process, not as an engine of its own. Environment variables (where tokens live) are never read,
and secret flag values are redacted before the command line is kept.

This module also holds the bounded readers the other host checks share.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.i18n import Message, later
from fleet.hostchecks.launch_flags import recognise, redact_argv

MAX_FILE_BYTES = 1 << 20
MAX_PROCESSES = 4096
MAX_CPUS = 8192  # the kernel's largest NR_CPUS
_PARENT_HOPS = 16

# A container's 64-hex id as the runtimes spell it in cgroup paths: docker-<id>.scope (systemd
# driver), /docker/<id> (cgroupfs driver), cri-containerd-<id>.scope, crio-<id>.scope,
# libpod-<id>.scope, /kubepods/<qos>/pod<uid>/<id>.
_CONTAINER_RE = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?(?=/|$)")


# -- bounded reading, shared by the host checks ------------------------------------------------


def read_bounded(path: Path, *, limit: int = MAX_FILE_BYTES) -> tuple[bytes, bool]:
    """The first `limit` bytes of a file and whether it had more; raises OSError."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    return data[:limit], len(data) > limit


def read_text(path: Path, *, limit: int = MAX_FILE_BYTES) -> tuple[str, bool]:
    data, truncated = read_bounded(path, limit=limit)
    return data.decode("utf-8", errors="replace"), truncated


def host_path(root: Path, path: Path) -> str:
    """How the host spells a path under root: root/proc/meminfo is /proc/meminfo."""
    try:
        return "/" + path.relative_to(root).as_posix().lstrip("/")
    except ValueError:
        return str(path)


def read_problem(path: Path, exc: OSError, *, root: Path) -> Message:
    """Why a file could not be read, for the reader of the result."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        reason: Message | str = later("permission denied (the agent needs to run as root)")
    elif exc.errno == errno.ENOENT:
        reason = later("it does not exist")
    elif exc.errno == errno.EISDIR:
        reason = later("it is a directory")
    else:
        reason = exc.strerror or exc.__class__.__name__
    return later("%(path)s could not be read: %(reason)s", path=host_path(root, path), reason=reason)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """CPU ids of a kernel CPU list such as "0-31,64-95"; ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, dash, last = part.partition("-")
        low, high = int(first), int(last) if dash else int(first)
        if low < 0 or high < low or high >= MAX_CPUS:
            raise ValueError(f"not a CPU range: {part!r}")
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))


def container_id_of(cgroup_path: str) -> str:
    """The container id a cgroup path names, "" when it names none."""
    found = _CONTAINER_RE.findall(cgroup_path)
    return found[-1] if found else ""


# -- engine processes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineProcess:
    pid: int
    engine: str  # vllm, tgi, ollama, sglang
    argv: tuple[str, ...]  # secrets redacted
    name: str = ""
    ppid: int | None = None
    rss_kib: int | None = None
    cpus_allowed: tuple[int, ...] = ()
    cgroup: str = ""
    container_id: str = ""
    child_pids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ProcessScan:
    engines: tuple[EngineProcess, ...] = ()
    scanned: int = 0
    truncated: bool = False  # more than MAX_PROCESSES processes: the rest were not looked at
    vanished: int = 0  # processes that ended, or could not be read, during the scan
    unreadable: Message | None = None

    def by_pid(self, pid: int) -> EngineProcess | None:
        return next((engine for engine in self.engines if engine.pid == pid), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Seen:
    pid: int
    engine: str
    argv: tuple[str, ...]
    status: dict[str, str] = field(default_factory=dict)
    cgroup: str = ""

    @property
    def ppid(self) -> int | None:
        value = self.status.get("PPid", "")
        return int(value) if value.isdigit() else None


def scan_processes(*, root: Path = Path("/"), limit: int = MAX_PROCESSES) -> ProcessScan:
    """The engines' main processes, each with its helpers' pids."""
    proc = root / "proc"
    try:
        pids, truncated = list_pids(proc, limit=limit)
    except OSError as exc:
        return ProcessScan(unreadable=read_problem(proc, exc, root=root))
    seen: dict[int, _Seen] = {}
    vanished = 0
    for pid in pids:
        try:
            found = _engine_process(proc / str(pid), pid)
        except (OSError, ValueError):
            vanished += 1
            continue
        if found is not None:
            seen[pid] = found
    mains = _group_by_main(seen)
    engines = tuple(_engine(seen[pid], children) for pid, children in sorted(mains.items()))
    return ProcessScan(engines=engines, scanned=len(pids), truncated=truncated, vanished=vanished)


def list_pids(proc: Path, *, limit: int = MAX_PROCESSES) -> tuple[list[int], bool]:
    """The first `limit` pids of a /proc directory, and whether there were more; raises OSError."""
    pids: list[int] = []
    with os.scandir(proc) as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            if len(pids) == limit:
                return sorted(pids), True
            pids.append(int(entry.name))
    return sorted(pids), False


def _engine_process(directory: Path, pid: int) -> _Seen | None:
    argv = read_cmdline(directory / "cmdline")
    command = recognise(argv)
    if command is None:
        return None
    status = read_status(directory / "status")
    try:
        cgroup, _ = read_text(directory / "cgroup", limit=64 * 1024)
    except OSError:
        cgroup = ""  # a missing cgroup file only costs the container id
    return _Seen(pid=pid, engine=command.engine, argv=redact_argv(argv), status=status, cgroup=cgroup)


def read_cmdline(path: Path) -> tuple[str, ...]:
    """A process's arguments; setproctitle titles ("VLLM::EngineCore" padded with NULs or
    spaces) come back as one argument."""
    data, _ = read_bounded(path)
    parts = data.rstrip(b"\0").split(b"\0")
    argv = tuple(part.decode("utf-8", errors="replace") for part in parts)
    return () if argv == ("",) else tuple(arg.rstrip() if i == 0 else arg for i, arg in enumerate(argv))


def read_status(path: Path) -> dict[str, str]:
    """The "Key:\\tvalue" lines of /proc/<pid>/status."""
    text, _ = read_text(path, limit=64 * 1024)
    status = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            status[key.strip()] = value.strip()
    return status


def _group_by_main(seen: dict[int, _Seen]) -> dict[int, list[int]]:
    """Main pid → helper pids: a process's main is its furthest ancestor of the same engine."""
    mains: dict[int, list[int]] = {}
    for pid, process in seen.items():
        top = pid
        for _ in range(_PARENT_HOPS):
            parent = seen.get(seen[top].ppid or -1)
            if parent is None or parent.engine != process.engine or parent.pid == top:
                break
            top = parent.pid
        mains.setdefault(top, [])
        if top != pid:
            mains[top].append(pid)
    return mains


def _engine(seen: _Seen, children: list[int]) -> EngineProcess:
    cgroup = _cgroup_path(seen.cgroup)
    return EngineProcess(
        pid=seen.pid,
        engine=seen.engine,
        argv=seen.argv,
        name=seen.status.get("Name", ""),
        ppid=seen.ppid,
        rss_kib=_kib(seen.status.get("VmRSS", "")),
        cpus_allowed=_cpus(seen.status.get("Cpus_allowed_list", "")),
        cgroup=cgroup,
        container_id=container_id_of(cgroup) or container_id_of(seen.cgroup),
        child_pids=tuple(sorted(children)),
    )


def _cgroup_path(text: str) -> str:
    """The process's cgroup: the v2 line ("0::/path"), else v1's memory controller."""
    paths = {}
    for line in text.splitlines():
        _, sep, rest = line.partition(":")
        controllers, sep2, path = rest.partition(":")
        if sep and sep2:
            for name in controllers.split(",") or [""]:
                paths.setdefault(name, path)
    return paths.get("", "") or paths.get("memory", "") or next(iter(paths.values()), "")


def _kib(value: str) -> int | None:
    number, _, unit = value.partition(" ")
    return int(number) if number.isdigit() and unit.strip() in ("kB", "") else None


def _cpus(value: str) -> tuple[int, ...]:
    try:
        return parse_cpu_list(value)
    except ValueError:
        return ()
