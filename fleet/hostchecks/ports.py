"""Who listens on a TCP port (`ss -tlnp | grep 8000`, guide 2.2.4).

/proc/net/tcp and /proc/net/tcp6 list the sockets of the reader's network namespace, one row
each (net/ipv4/tcp_ipv4.c get_tcp4_sock, net/ipv6/tcp_ipv6.c get_tcp6_sock):

       0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 51234 1 …

local address:port, remote address:port, state (0A is LISTEN), queues, timers, uid, timeout,
inode. Addresses are the kernel's 32-bit words printed in the host's byte order (little-endian
on x86-64 and arm64), so each word's bytes read backwards; ports are plain hex. The inode ties a
socket to the process holding it: /proc/<pid>/fd/<n> is a link to "socket:[inode]".

An engine in a container with its own network namespace (Docker's bridge network) does not
appear here: its published port is held by docker-proxy, or by no process at all with
iptables-only forwarding.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.i18n import Message
from fleet.hostchecks.processes import list_pids, read_problem, read_status, read_text

TCP_TABLES = (("proc/net/tcp", 4), ("proc/net/tcp6", 6))
LISTEN = "0A"
MAX_FDS = 1 << 18  # descriptors looked at over all processes


@dataclass(frozen=True)
class Listener:
    address: str
    port: int
    inode: int
    pid: int | None = None  # None: no process we can see holds it
    process: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PortScan:
    listeners: tuple[Listener, ...] = ()
    malformed: int = 0  # table rows in no known shape
    owners_incomplete: bool = False  # the fd scan hit its bounds
    unreadable: Message | None = None

    def on_port(self, port: int) -> tuple[Listener, ...]:
        return tuple(listener for listener in self.listeners if listener.port == port)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def listeners(*, root: Path = Path("/"), port: int | None = None) -> PortScan:
    """Listening TCP sockets (of one port, or all) and the processes holding them."""
    rows, malformed, problem = _listening_rows(root)
    if port is not None:
        rows = [row for row in rows if row[1] == port]
    if problem is not None and not rows:
        return PortScan(malformed=malformed, unreadable=problem)
    owners, incomplete = _owners(root, {row[2] for row in rows if row[2]})
    found = tuple(
        Listener(
            address=address,
            port=row_port,
            inode=inode,
            pid=owners.get(inode, (None, ""))[0],
            process=owners.get(inode, (None, ""))[1],
        )
        for address, row_port, inode in rows
    )
    return PortScan(listeners=found, malformed=malformed, owners_incomplete=incomplete, unreadable=problem)


def listener(port: int, *, root: Path = Path("/")) -> Listener | None:
    """Who listens on the port: one with a known process first; None when nobody does (or the
    tables cannot be read: `listeners` says which)."""
    found = listeners(root=root, port=port).listeners
    return next((item for item in found if item.pid is not None), found[0] if found else None)


def _listening_rows(root: Path) -> tuple[list[tuple[str, int, int]], int, Message | None]:
    rows: list[tuple[str, int, int]] = []
    malformed = 0
    problem = None
    for name, family in TCP_TABLES:
        try:
            text, _ = read_text(root / name)
        except OSError as exc:
            if family == 4 or not os.path.exists(root / "proc/net"):  # no tcp6 without IPv6
                problem = read_problem(root / name, exc, root=root)
            continue
        for line in text.splitlines()[1:]:
            row = _row(line, family)
            if row is None:
                malformed += bool(line.strip())
            elif row[3] == LISTEN:
                rows.append(row[:3])
    return rows, malformed, problem


def _row(line: str, family: int) -> tuple[str, int, int, str] | None:
    """(address, port, inode, state) of one table row; None for any other shape."""
    fields = line.split()
    if len(fields) < 10 or not fields[0].endswith(":"):
        return None
    local, state, inode = fields[1], fields[3], fields[9]
    hex_address, _, hex_port = local.partition(":")
    try:
        address = _address(hex_address, family)
        return address, int(hex_port, 16), int(inode), state.upper()
    except ValueError:
        return None


def _address(hex_address: str, family: int) -> str:
    """The kernel's words in host order: "0100007F" is 127.0.0.1."""
    if len(hex_address) != (8 if family == 4 else 32):
        raise ValueError(hex_address)
    raw = b"".join(bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8))
    address = ipaddress.ip_address(raw)
    mapped = getattr(address, "ipv4_mapped", None)
    return f"::ffff:{mapped}" if mapped else str(address)  # as ss writes it


def _owners(root: Path, inodes: set[int]) -> tuple[dict[int, tuple[int, str]], bool]:
    """inode → (pid, process name), from the /proc/<pid>/fd links."""
    owners: dict[int, tuple[int, str]] = {}
    if not inodes:
        return owners, False
    proc = root / "proc"
    budget = MAX_FDS
    try:
        pids, incomplete = list_pids(proc)
    except OSError:
        return owners, True
    for pid in pids:
        held, budget, cut = _sockets_of(proc / str(pid) / "fd", inodes, budget)
        incomplete |= cut
        for inode in held:
            owners.setdefault(inode, (pid, _name(proc / str(pid))))
        if len(owners) == len(inodes) or budget <= 0:
            break
    return owners, incomplete or (budget <= 0 and len(owners) < len(inodes))


def _sockets_of(fd_dir: Path, inodes: set[int], budget: int) -> tuple[list[int], int, bool]:
    held = []
    try:
        with os.scandir(fd_dir) as entries:
            for entry in entries:
                if budget <= 0:
                    return held, budget, True
                budget -= 1
                try:
                    target = os.readlink(entry.path)
                except OSError:
                    continue
                if target.startswith("socket:[") and target.endswith("]"):
                    inode = int(target[8:-1]) if target[8:-1].isdigit() else -1
                    if inode in inodes:
                        held.append(inode)
    except OSError:
        return held, budget, False  # another user's process, or gone: not ours to see
    return held, budget, False


def _name(directory: Path) -> str:
    try:
        return read_status(directory / "status").get("Name", "")
    except OSError:
        return ""
