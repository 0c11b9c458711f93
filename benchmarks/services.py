"""What the benchmarks share about the services they start or use: is a database or broker
URL reachable, and stopping the simulator they started."""

from __future__ import annotations

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
