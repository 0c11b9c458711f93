"""Recent XID errors from the kernel log, for the real NVML backend.

NVML reports XIDs only as events to a long-lived event set, which a snapshot read does
not hold; the NVIDIA driver also writes every XID to the kernel log, which is where SREs
look (`dmesg | grep Xid`):

    NVRM: Xid (PCI:0000:3b:00): 79, pid=2716, name=python3, GPU has fallen off the bus.

`recent_xids` reads /dev/kmsg without blocking and keeps the XIDs of the last
`window_s` seconds by GPU. Without the right to read the log (no root or CAP_SYSLOG)
it finds none and says why.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

KMSG = "/dev/kmsg"
_HEX = "[0-9a-fA-F]"
XID_RE = re.compile(rf"NVRM: Xid \(PCI:(?P<pci>{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}})[^)]*\): (?P<xid>\d+)")
MAX_RECORDS = 100_000


def pci_key(bus_id: str) -> str:
    """One spelling for a GPU's PCI address: the kernel's "0000:3b:00" and NVML's
    "00000000:3B:00.0" both become "0000:3b:00"."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    bus_device = rest.split(".", 1)[0]
    return f"{int(domain, 16):04x}:{bus_device}"


def parse_xid(message: str) -> tuple[str, int] | None:
    """(PCI key, XID) of a kernel log message, None when it is not an XID report."""
    match = XID_RE.search(message)
    if match is None:
        return None
    return pci_key(match["pci"]), int(match["xid"])


@dataclass
class XidLog:
    """XIDs by PCI key, in the order logged, and why none could be read (if so)."""

    by_gpu: dict[str, list[int]] = field(default_factory=dict)
    unreadable: str = ""

    def for_bus_id(self, bus_id: str) -> tuple[int, ...]:
        return tuple(dict.fromkeys(self.by_gpu.get(pci_key(bus_id), [])))


def kmsg_records(chunks: Iterable[bytes]) -> Iterable[tuple[float, str]]:
    """(seconds since boot, message) of /dev/kmsg records ("6,1234,5678901234,-;text");
    continuation lines (" KEY=value") and lines in other shapes are skipped."""
    carried = b""
    for chunk in chunks:
        *lines, carried = (carried + chunk).split(b"\n")
        for raw in lines:
            prefix, sep, message = raw.decode("utf-8", errors="replace").partition(";")
            fields = prefix.split(",")
            if not sep or len(fields) < 3 or not fields[2].isdigit():
                continue
            yield int(fields[2]) / 1_000_000, message


def _read_chunks(path: str) -> Iterable[bytes]:
    """Every record now in the log, without waiting for new ones. /dev/kmsg returns one
    record a read, EAGAIN at the end and EPIPE where records were overwritten."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        for _ in range(MAX_RECORDS):
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue
                raise
            if not chunk:
                return
            yield chunk
    finally:
        os.close(fd)


def _uptime_s() -> float:
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def recent_xids(*, window_s: float = 900.0, path: str = KMSG, now_s: float | None = None) -> XidLog:
    """The XIDs logged in the last window_s seconds (now_s: seconds since boot)."""
    log = XidLog()
    try:
        now = _uptime_s() if now_s is None else now_s
        for at, message in kmsg_records(_read_chunks(path)):
            found = parse_xid(message)
            if found and now - at <= window_s:
                log.by_gpu.setdefault(found[0], []).append(found[1])
    except OSError as exc:
        log.unreadable = f"the kernel log ({path}) could not be read: {exc.strerror or exc}"
    return log
