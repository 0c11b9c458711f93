"""Run Debian's nginx on a generated gateway file: `nginx -t`, or in the foreground on a
free loopback port for live tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx

NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)


def nginx_binary() -> str:
    assert NGINX, "nginx is missing: apt-get install nginx-light (make test does)"
    return NGINX


def main_config(folder: Path, gateway: str) -> Path:
    """A whole nginx.conf around an http-context gateway file, every path inside `folder`."""
    (folder / "llm-gateway.conf").write_text(gateway)
    temp = "\n".join(
        f"    {name}_temp_path {folder / name};"
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf = folder / "nginx.conf"
    conf.write_text(
        f"{user}worker_processes 1;\npid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'error.log'} warn;\n"
        f"events {{ worker_connections 256; }}\n"
        f"http {{\n    access_log {folder / 'access.log'};\n{temp}\n"
        f"    include {folder / 'llm-gateway.conf'};\n}}\n"
    )
    return conf


def check_config(folder: Path, gateway: str) -> subprocess.CompletedProcess:
    conf = main_config(folder, gateway)
    return subprocess.run(
        [nginx_binary(), "-t", "-p", str(folder), "-c", str(conf)], capture_output=True, text=True
    )


class RunningNginx:
    def __init__(self, folder: Path, gateway: str, port: int):
        self.conf = main_config(folder, gateway)
        self.folder, self.port = folder, port
        self.process = subprocess.Popen(
            [nginx_binary(), "-p", str(folder), "-c", str(self.conf), "-g", "daemon off;"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError(f"nginx did not start: {(folder / 'error.log').read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
