"""`manage.py console`: the whole console in one terminal, as the Procfile lists it (web
server, Celery worker and beat, the simulated fleet). Ctrl-C stops every process and the
command exits 0; `make run` ends with it.

honcho runs the processes. Two things differ from `honcho start`: a stop signal goes to each
process's leader only (the Celery worker and gunicorn stop their own children; a signal to the
whole group made the pool's children die mid-task with tracebacks), and the worker shuts down
cold (its probes are repeated by the next sweep), so nothing waits for the SIGKILL."""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from pathlib import Path

import honcho.manager
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from honcho.compat import ProcessManager
from honcho.environ import parse_procfile
from honcho.manager import SIGNALS, Manager
from honcho.printer import Printer

STOP_SIGNAL_CODES = {entry["rc"] for entry in SIGNALS.values()}
# honcho kills what has not stopped KILL_WAIT seconds after Ctrl-C (5 by default). A worker on
# the embedded filesystem broker takes about 6 s to finish its cold shutdown (make soak saw it
# killed in half its runs), so it gets longer.
honcho.manager.KILL_WAIT = 15


class _LeaderOnly(ProcessManager):
    def terminate(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ESRCH):
                raise


class _Console(Manager):
    """A Manager that remembers whether it was asked to stop, as opposed to a process dying."""

    stopped_on_request = False
    stop_requested_at: float | None = None

    def __init__(self, printer: Printer) -> None:
        super().__init__(printer=printer)
        self._procmgr = _LeaderOnly()

    def terminate(self) -> None:
        if not getattr(self, "_terminating", False) and self.returncode in STOP_SIGNAL_CODES:
            self.stopped_on_request = not self._any_stopped()
            self.stop_requested_at = time.monotonic()
        super().terminate()


def environment_for(name: str, *, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    if name == "web":
        env["PORT"] = str(port)
    if name == "worker":
        env["REMAP_SIGTERM"] = "SIGQUIT"  # cold shutdown: Ctrl-C does not wait for a probe sweep
    return env


class Command(BaseCommand):
    help = "Run the whole console (web, worker, beat, simulated fleet) until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--procfile", default=str(Path(settings.BASE_DIR) / "Procfile"))
        parser.add_argument(
            "--without", action="append", default=[], metavar="NAME", help="leave a Procfile entry out"
        )

    def handle(self, *args, port: int, procfile: str, without: list[str], **options):
        try:
            entries = parse_procfile(Path(procfile).read_text()).processes
        except OSError as exc:
            raise CommandError(f"cannot read the Procfile {procfile}: {exc.strerror}") from None
        unknown = sorted(set(without) - set(entries))
        if unknown:
            raise CommandError(f"no Procfile entry {', '.join(unknown)}; it has {', '.join(entries)}")
        manager = _Console(Printer(self.stdout._out))
        for name, command in entries.items():
            if name not in without:
                # exec: the shell honcho starts becomes the process, so the signal reaches it
                manager.add_process(name, f"exec {command}", env=environment_for(name, port=port))
        manager.loop()
        if manager.stopped_on_request:
            took = time.monotonic() - (manager.stop_requested_at or time.monotonic())
            self.stdout.write(f"Console stopped cleanly in {took:.1f} s.")
            return
        sys.exit(manager.returncode or 0)
