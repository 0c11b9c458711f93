"""Free space of the model directory and /dev/shm (`df -h /models`, `df -h /dev/shm`, guide 2.5.3,
2.5.4), and the filesystem each sits on.

Sizes come from statvfs like df's: total = f_blocks × f_frsize, available (df's "Avail", what an
unprivileged writer may use) = f_bavail × f_frsize, free = f_bfree × f_frsize. The mount comes
from /proc/self/mountinfo (or /proc/mounts): the longest mount point that holds the path. NCCL
and PyTorch's shared-memory tensors live in /dev/shm, a tmpfs: Docker gives a container 64 MiB
unless --shm-size says more; its size= option is the limit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from core.i18n import Message, later
from fleet.hostchecks.processes import read_problem, read_text

MOUNTINFO = ("proc/self/mountinfo", "proc/mounts")
_SIZE_RE = re.compile(r"^(\d+)([kKmMgG%]?)$")
_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}


class StatvfsResult(Protocol):
    f_frsize: int
    f_blocks: int
    f_bfree: int
    f_bavail: int


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str
    source: str = ""
    options: tuple[str, ...] = ()  # the mount's and the superblock's

    @property
    def size_option_bytes(self) -> int | None:
        """A tmpfs's size= limit in bytes. The kernel shows it only when it is not the default,
        half the RAM (mm/shmem.c shmem_show_options), so None on a host's own /dev/shm."""
        for option in self.options:
            if option.startswith("size="):
                match = _SIZE_RE.match(option[5:])
                if match and match[2] != "%":
                    return int(match[1]) * _SIZE_UNITS[match[2].lower()]
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"size_option_bytes": self.size_option_bytes}


@dataclass(frozen=True)
class PathSpace:
    path: str
    exists: bool = False
    total_bytes: int | None = None
    available_bytes: int | None = None
    free_bytes: int | None = None
    mount: Mount | None = None
    problem: Message | None = None  # why there are no sizes: missing, unreadable

    @property
    def used_fraction(self) -> float | None:
        if not self.total_bytes or self.free_bytes is None:
            return None
        return 1 - self.free_bytes / self.total_bytes

    @property
    def is_tmpfs(self) -> bool | None:
        return None if self.mount is None else self.mount.fstype == "tmpfs"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {
            "mount": self.mount.to_dict() if self.mount else None,
            "used_fraction": self.used_fraction,
            "is_tmpfs": self.is_tmpfs,
        }


def path_space(
    path: str,
    *,
    root: Path = Path("/"),
    statvfs: Callable[[str], StatvfsResult] = os.statvfs,
) -> PathSpace:
    """Sizes of the filesystem holding `path` (a host path such as /models) and its mount."""
    host = _host_path(path)
    if host is None:
        return PathSpace(path=path, problem=later("%(path)s is not an absolute path", path=path))
    mount = find_mount(host, root=root)
    local = root / host.relative_to("/")
    try:
        result = statvfs(str(local))
    except FileNotFoundError:
        return PathSpace(
            path=str(host), mount=mount, problem=later("%(path)s does not exist", path=str(host))
        )
    except OSError as exc:
        return PathSpace(path=str(host), mount=mount, problem=read_problem(local, exc, root=root))
    size = result.f_frsize
    return PathSpace(
        path=str(host),
        exists=True,
        total_bytes=result.f_blocks * size,
        available_bytes=result.f_bavail * size,
        free_bytes=result.f_bfree * size,
        mount=mount,
    )


def find_mount(path: str | PurePosixPath, *, root: Path = Path("/")) -> Mount | None:
    """The mount holding a host path: the longest mount point above it, the last one mounted
    where several share it. Symbolic links in the path are not followed."""
    host = _host_path(str(path))
    if host is None:
        return None
    best: Mount | None = None
    for mount in read_mounts(root=root):
        point = PurePosixPath(mount.mount_point)
        if (host == point or point in host.parents) and (
            best is None or len(point.parts) >= len(PurePosixPath(best.mount_point).parts)
        ):
            best = mount
    return best


def read_mounts(*, root: Path = Path("/")) -> tuple[Mount, ...]:
    """The mounts of /proc/self/mountinfo, else /proc/mounts; none when neither can be read."""
    for name in MOUNTINFO:
        try:
            text, _ = read_text(root / name)
        except OSError:
            continue
        parse = _mountinfo_line if name.endswith("mountinfo") else _mounts_line
        return tuple(mount for line in text.splitlines() if (mount := parse(line)))
    return ()


def _mountinfo_line(line: str) -> Mount | None:
    """ "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
    (proc(5)): id, parent, major:minor, root, mount point, options, optional fields, "-",
    filesystem type, source, superblock options."""
    fields = line.split()
    if "-" not in fields[6:]:
        return None
    dash = fields.index("-", 6)
    if len(fields) < 7 or len(fields) < dash + 3:
        return None
    options = fields[5].split(",") + (fields[dash + 3].split(",") if len(fields) > dash + 3 else [])
    return Mount(
        mount_point=_unescape(fields[4]),
        fstype=fields[dash + 1],
        source=_unescape(fields[dash + 2]),
        options=tuple(dict.fromkeys(options)),
    )


def _mounts_line(line: str) -> Mount | None:
    """ "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0" (fstab(5) order)."""
    fields = line.split()
    if len(fields) < 4:
        return None
    return Mount(
        mount_point=_unescape(fields[1]),
        fstype=fields[2],
        source=_unescape(fields[0]),
        options=tuple(fields[3].split(",")),
    )


def _unescape(field: str) -> str:
    """The kernel writes space, tab, newline and backslash in paths as \\040, \\011, \\012, \\134."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def _host_path(path: str) -> PurePosixPath | None:
    """An absolute host path without "." or ".." (so it cannot leave root)."""
    pure = PurePosixPath(path)
    if not pure.is_absolute() or ".." in pure.parts:
        return None
    return pure
