"""What the benchmarks share: Django set up for a run, the process's CPU time, whether a
database or broker URL is reachable, and stopping the simulator they started."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
from urllib.parse import urlsplit


def reachable(url: str, default_port: int) -> bool:
    """Whether something accepts connections where `url` points (one second to answer)."""
    parts = urlsplit(url)
    try:
        socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), timeout=1
        ).close()
        return True
    except OSError:
        return False


def stop(process: subprocess.Popen) -> None:
    """Stop a started simulator as Ctrl+C would, killed if it takes longer than 30 s."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def setup_django(var_dir: str, database_url: str = "") -> None:
    """Django on a database of the run's own (SQLite in `var_dir` unless `database_url`), no
    broker, migrated."""
    os.environ["OPS_VAR_DIR"] = var_dir
    os.environ.pop("CELERY_BROKER_URL", None)
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def cpu_s() -> float:
    """User and system CPU seconds of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
