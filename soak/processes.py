"""The console's processes as `make run` starts them: `manage.py console` (honcho over the
Procfile), all their output in one log, each line prefixed with its process's name.

Each Procfile entry is found among the console's children by its command line, and counted
with its own children (gunicorn's workers, the Celery worker's pool)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
ROLES = ("web", "worker", "beat", "sim")
STOP_TIMEOUT_S = 60


@dataclass
class Console:
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass(frozen=True)
class Stopped:
    returncode: int | None  # None: it had to be killed
    seconds: float
    said_clean: bool  # the console printed "Console stopped cleanly"
    killed: tuple[str, ...]  # Procfile entries honcho had to SIGKILL

    @property
    def clean(self) -> bool:
        """Stopped on request with exit status 0, no process killed: the console's own
        promise (its worker shuts down cold so that nothing waits for the SIGKILL)."""
        return self.returncode == 0 and self.said_clean and not self.killed


def start_console(*, env: dict[str, str], port: int, log_path: Path) -> Console:
    log = log_path.open("ab")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "console", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # our Ctrl-C is ours; the console is stopped by stop_console
    )
    log.close()
    return Console(process=process, log_path=log_path)


def wait_until_up(console: Console, *, urls: list[str], timeout_s: float) -> None:
    """Until every URL answers (any status) and every Procfile entry runs; RuntimeError
    naming what is missing when the console exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    missing: list[str] = []
    while time.monotonic() < deadline:
        if console.process.poll() is not None:
            raise RuntimeError(
                f"the console exited with {console.process.returncode}; see {console.log_path}"
            )
        roles = roles_of(console.pid)
        missing = [r for r in ROLES if r not in roles] + [u for u in urls if not _answers(u)]
        if not missing and _worker_ready(console.log_path):
            return
        time.sleep(1)
    raise RuntimeError(f"the console was not up within {timeout_s:.0f} s (missing: {', '.join(missing)})")


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return False
    return True


def _worker_ready(log_path: Path) -> bool:
    return b" ready." in log_path.read_bytes()  # celery@host ready.


def stop_console(console: Console) -> Stopped:
    """SIGINT, as Ctrl-C in `make run`; SIGKILL to the whole group after STOP_TIMEOUT_S."""
    started = time.monotonic()
    if console.process.poll() is None:
        console.process.send_signal(signal.SIGINT)
    try:
        code: int | None = console.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(console.pid, signal.SIGKILL)
        console.process.wait()
        code = None
    took = time.monotonic() - started
    log = console.log_path.read_text(errors="replace")
    killed = tuple(re.findall(r"\| sending SIGKILL to (\S+)", log))
    return Stopped(returncode=code, seconds=took, said_clean="Console stopped cleanly" in log, killed=killed)


# --- the process tree, from /proc -----------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the name in parentheses may hold spaces; the parent pid is the second field after it
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def role_of(pid: int) -> str | None:
    """Which Procfile entry a process runs, by its command line."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    words = {Path(a.decode(errors="replace")).name for a in args if a}
    if "gunicorn" in words:
        return "web"
    if "celery" in words:
        return "worker" if "worker" in words else "beat" if "beat" in words else None
    return "sim" if "simulate" in words else None


def roles_of(console_pid: int) -> dict[str, list[int]]:
    """{Procfile entry: its process and all its descendants} under the console (honcho runs
    each entry from a process of its own, so the entries are the console's grandchildren)."""
    children = _children_map()
    roles: dict[str, list[int]] = {}
    todo = list(children.get(console_pid, []))
    while todo:
        pid = todo.pop()
        role = role_of(pid)
        if role is None:
            todo.extend(children.get(pid, []))
        else:
            roles.setdefault(role, []).extend(_descendants(pid, children))
    return roles
