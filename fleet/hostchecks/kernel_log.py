"""GPU XIDs and OOM kills from the kernel log (`dmesg | grep -i oom`, guide 2.4.2, 2.4.3).

The log is read from /dev/kmsg (records "6,1234,5678901234,-;text": priority, sequence,
microseconds since boot, flags) or taken as pasted `dmesg`, `dmesg -T` or `journalctl -k` text.
The last MAX_LOG_BYTES are kept: the newest events are the ones asked about.

An OOM kill is logged as several lines (mm/oom_kill.c); this module keeps three of them:

    python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
    oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-….scope,mems_allowed=0-1,
        oom_memcg=/system.slice/docker-….scope,task_memcg=/system.slice/docker-….scope,task=python3,pid=2716,uid=0
    Memory cgroup out of memory: Killed process 2716 (python3) total-vm:…kB, anon-rss:…kB, file-rss:0kB, …

and merges them into one OomKill. CONSTRAINT_MEMCG means a cgroup's limit (a container's
--memory) was hit; CONSTRAINT_NONE means the host ran out of RAM.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from core.i18n import Message
from fleet.hostchecks.processes import container_id_of, read_problem
from fleet.nvml.kernel_xids import XID_RE, _read_chunks, kmsg_records, parse_xid

MAX_LOG_BYTES = 1 << 20
KMSG = "dev/kmsg"
# printk keeps a record's text under 1 KiB (kernel/printk: PRINTKRB_RECORD_MAX); a longer "line"
# is not a kernel message, and skipping it keeps every pattern's cost linear.
MAX_MESSAGE_CHARS = 4096

# A task's name (comm) is at most 15 characters, 63 in the newest kernels; the bounds keep a
# megabyte-long junk line from costing quadratic time.
_INVOKED_RE = re.compile(r"^(?P<comm>.{0,64}?) invoked oom-killer: ")
_KILLED_RE = re.compile(
    r"Killed process (?P<pid>\d+)(?: \((?P<name>.{0,64}?)(?:\)|$))?"
    r"(?: total-vm:(?P<vm>\d+)kB, anon-rss:(?P<anon>\d+)kB)?"
)
_CONSTRAINT_RE = re.compile(r"constraint=CONSTRAINT_(?P<constraint>[A-Z_]+)")
_TASK_RE = re.compile(r",task=(?P<task>.{0,64}?),pid=\s*(?P<pid>\d+),uid=\s*(?P<uid>\d+)")
_XID_TAIL_RE = re.compile(r"^,?\s*(?:pid=(?P<pid>[^,]*),\s*)?(?:name=(?P<name>[^,]*),\s*)?(?P<message>.*)$")

# Prefixes of pasted kernel log lines.
_KMSG_LINE_RE = re.compile(r"^\d+,\d+,\d+,[^;]*;")
_FACILITY_RE = re.compile(r"^[a-z]+\s*:\s*[a-z]+\s*:\s?")  # dmesg -x: "kern  :err   : "
_UPTIME_RE = re.compile(r"^\[\s*(?P<at>\d+\.\d+)\]\s?")  # dmesg: "[  123.456789] "
_CTIME_RE = re.compile(r"^\[(?P<when>\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?")  # dmesg -T
_SYSLOG_RE = re.compile(
    r"^(?P<when>\w{3} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+) \S+ kernel: "  # journalctl -k
)


@dataclass(frozen=True)
class XidEvent:
    pci: str  # "0000:3b:00", as fleet.nvml.kernel_xids.pci_key spells it
    xid: int
    pid: int | None = None
    process: str = ""
    message: str = ""
    at_s: float | None = None  # seconds since boot
    logged_at: str = ""  # the wall-clock time of dmesg -T or journalctl lines

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OomKill:
    pid: int
    process: str
    anon_rss_kib: int | None = None
    total_vm_kib: int | None = None
    constraint: str = ""  # memcg (a cgroup's limit), none (host RAM), cpuset, memory_policy; "" unknown
    memcg: str = ""  # the cgroup whose limit was hit (oom_memcg)
    task_memcg: str = ""  # the killed task's cgroup
    container_id: str = ""
    invoked_by: str = ""  # the task whose allocation failed
    at_s: float | None = None
    logged_at: str = ""

    @property
    def container_limit(self) -> bool:
        """A cgroup's limit (docker --memory, a pod's limits.memory), not the host's RAM."""
        return self.constraint == "memcg"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"container_limit": self.container_limit}


@dataclass(frozen=True)
class KernelLog:
    xids: tuple[XidEvent, ...] = ()
    oom_kills: tuple[OomKill, ...] = ()
    records: int = 0
    malformed: int = 0  # lines in no shape this module knows
    truncated: bool = False  # only the newest MAX_LOG_BYTES were read
    unreadable: Message | None = None

    def matched_to(self, pids: Iterable[int]) -> tuple[OomKill, ...]:
        """The kills of these processes (an engine's main pid and its helpers)."""
        wanted = set(pids)
        return tuple(kill for kill in self.oom_kills if kill.pid in wanted)

    def since(self, at_s: float) -> KernelLog:
        """Only the events logged at or after at_s seconds since boot (undated ones stay)."""
        return replace(
            self,
            xids=tuple(e for e in self.xids if e.at_s is None or e.at_s >= at_s),
            oom_kills=tuple(k for k in self.oom_kills if k.at_s is None or k.at_s >= at_s),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"oom_kills": [kill.to_dict() for kill in self.oom_kills]}


def read_kernel_log(*, root: Path = Path("/"), limit: int = MAX_LOG_BYTES) -> KernelLog:
    """XIDs and OOM kills in the host's kernel log (root/dev/kmsg)."""
    path = root / KMSG
    try:
        data, truncated = _read_tail(path, limit=limit)
    except OSError as exc:
        return KernelLog(unreadable=read_problem(path, exc, root=root))
    return _parse(_kmsg_entries(data.split(b"\n")), truncated=truncated)


def parse_dmesg_text(text: str, *, limit: int = MAX_LOG_BYTES) -> KernelLog:
    """XIDs and OOM kills in pasted `dmesg`, `dmesg -T`, `journalctl -k` or /dev/kmsg text."""
    truncated = len(text) > limit
    lines = text[-limit:].splitlines()
    if truncated and lines:
        lines = lines[1:]  # cut mid-line
    return _parse(_text_entries(lines), truncated=truncated)


# -- reading ---------------------------------------------------------------------------------------


def _read_tail(path: Path, *, limit: int) -> tuple[bytes, bool]:
    """The newest `limit` bytes: /dev/kmsg read record by record without waiting for new ones
    (kernel_xids._read_chunks), or the end of a regular file."""
    mode = os.stat(path).st_mode
    if stat.S_ISCHR(mode):
        kept: deque[bytes] = deque()
        size, truncated = 0, False
        for chunk in _read_chunks(str(path)):
            kept.append(chunk)
            size += len(chunk)
            while size > limit:
                size -= len(kept.popleft())
                truncated = True
        return b"".join(kept), truncated
    if not stat.S_ISREG(mode):
        raise OSError(0, "not a file or character device")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= limit:
            return f.read(limit), False
        f.seek(size - limit)
        data = f.read(limit)
    return data.partition(b"\n")[2], True  # drop the record cut in half


# -- lines into (seconds since boot, wall-clock time, message) ---------------------------------


@dataclass
class _Entry:
    at_s: float | None
    logged_at: str
    message: str


def _kmsg_entries(raw_lines: Iterable[bytes]) -> Iterator[_Entry | None]:
    for raw in raw_lines:
        if not raw.strip() or raw.startswith(b" "):  # " SUBSYSTEM=pci": a record's continuation
            continue
        records = list(kmsg_records([raw + b"\n"]))
        yield _Entry(records[0][0], "", records[0][1]) if records else None


def _text_entries(lines: Iterable[str]) -> Iterator[_Entry | None]:
    for line in lines:
        if not line.strip() or (line.startswith(" ") and "=" in line and not _UPTIME_RE.match(line)):
            continue
        if _KMSG_LINE_RE.match(line):
            yield from _kmsg_entries([line.encode("utf-8", errors="replace")])
            continue
        yield _text_entry(line)


def _text_entry(line: str) -> _Entry:
    at_s, logged_at = None, ""
    if match := _SYSLOG_RE.match(line):
        logged_at, line = match["when"], line[match.end() :]
    line = _FACILITY_RE.sub("", line, count=1)
    if match := _CTIME_RE.match(line):
        logged_at, line = match["when"], line[match.end() :]
    elif match := _UPTIME_RE.match(line):
        at_s, line = float(match["at"]), line[match.end() :]
    return _Entry(at_s, logged_at, line.rstrip())


# -- messages into events ------------------------------------------------------------------------


@dataclass
class _State:
    xids: list[XidEvent] = field(default_factory=list)
    kills: list[OomKill] = field(default_factory=list)
    invoked_by: str = ""
    summary: dict[str, Any] | None = None  # an oom-kill: line waiting for its Killed process line

    def flush_summary(self) -> None:
        """A summary whose Killed process line never came (cut off, or the task was exiting)."""
        if self.summary is not None:
            self.kills.append(OomKill(**self.summary))
            self.summary = None


def _parse(entries: Iterable[_Entry | None], *, truncated: bool) -> KernelLog:
    state = _State()
    records = malformed = 0
    for entry in entries:
        if entry is None or len(entry.message) > MAX_MESSAGE_CHARS:
            malformed += 1
            continue
        records += 1
        _read_message(state, entry)
    state.flush_summary()
    return KernelLog(
        xids=tuple(state.xids),
        oom_kills=tuple(state.kills),
        records=records,
        malformed=malformed,
        truncated=truncated,
    )


def _read_message(state: _State, entry: _Entry) -> None:
    message = entry.message
    if "NVRM: Xid" in message:
        if event := _xid(entry):
            state.xids.append(event)
    elif match := _INVOKED_RE.match(message):
        state.flush_summary()
        state.invoked_by = match["comm"]
    elif message.startswith("oom-kill:"):
        state.flush_summary()
        state.summary = _summary(entry, invoked_by=state.invoked_by)
    elif match := _KILLED_RE.search(message):
        state.kills.append(_kill(match, message[: match.start()], entry, state))
        state.summary, state.invoked_by = None, ""


def _xid(entry: _Entry) -> XidEvent | None:
    found = parse_xid(entry.message)
    match = XID_RE.search(entry.message)
    if found is None or match is None:
        return None
    tail = _XID_TAIL_RE.match(entry.message[match.end() :])
    pid_text = (tail["pid"] or "").strip("'") if tail else ""
    return XidEvent(
        pci=found[0],
        xid=found[1],
        pid=int(pid_text) if pid_text.isdigit() else None,
        process=(tail["name"] or "").strip() if tail and tail["name"] != "<unknown>" else "",
        message=(tail["message"] if tail else "").strip(),
        at_s=entry.at_s,
        logged_at=entry.logged_at,
    )


def _summary(entry: _Entry, *, invoked_by: str) -> dict[str, Any] | None:
    """The fields of an "oom-kill:constraint=…,task=…,pid=…,uid=…" line (dump_oom_victim)."""
    task = _TASK_RE.search(entry.message)
    if task is None:
        return None
    constraint = _CONSTRAINT_RE.search(entry.message)
    task_memcg = _key_value(entry.message, "task_memcg")
    return {
        "pid": int(task["pid"]),
        "process": task["task"],
        "constraint": constraint["constraint"].lower() if constraint else "",
        "memcg": _key_value(entry.message, "oom_memcg"),
        "task_memcg": task_memcg,
        "container_id": container_id_of(task_memcg),
        "invoked_by": invoked_by,
        "at_s": entry.at_s,
        "logged_at": entry.logged_at,
    }


def _key_value(message: str, key: str) -> str:
    match = re.search(rf"(?:^|,){key}=([^,]*)", message)
    return match[1] if match else ""


def _kill(match: re.Match[str], prefix: str, entry: _Entry, state: _State) -> OomKill:
    """A "Killed process" line (__oom_kill_process), with its summary line when it matches."""
    pid, name = int(match["pid"]), match["name"] or ""
    summary = state.summary if state.summary and state.summary["pid"] == pid else None
    if state.summary and summary is None:
        state.flush_summary()
    found = dict(
        summary or {"invoked_by": state.invoked_by, "at_s": entry.at_s, "logged_at": entry.logged_at}
    )
    if not found.get("constraint"):
        found["constraint"] = _constraint_from_prefix(prefix)
    found.update(
        pid=pid,
        process=name,
        anon_rss_kib=int(match["anon"]) if match["anon"] else None,
        total_vm_kib=int(match["vm"]) if match["vm"] else None,
    )
    return OomKill(**found)


def _constraint_from_prefix(prefix: str) -> str:
    """Without the summary line: "Memory cgroup out of memory: Killed process" is a cgroup's
    limit, "Out of memory: Killed process" the host's RAM (or a cpuset or mempolicy)."""
    if "Memory cgroup out of memory" in prefix:
        return "memcg"
    if "Out of memory" in prefix:
        return "none"
    return ""
