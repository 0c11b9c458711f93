"""A small Docker Engine stand-in on a real Unix socket, for the host-check tests.

It answers the GET subset the host agent uses (/_ping, /version, /containers/json,
/containers/{id}/json, /containers/{id}/logs) in the shapes of moby's api/swagger.yaml,
checks the API version in the path as dockerd does (HTTP 400 outside its range), frames
logs the way dockerd does for a container without a TTY, and can misbehave on request:

    with DockerEngineServer(path, containers=[vllm_container()]) as engine:
        engine.misbehave = "hang"      # or "garbage", "huge", "error500", "trickle", "cut"
"""

from __future__ import annotations

import json
import re
import socketserver
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

GiB, MiB = 1024**3, 1024**2
STDOUT, STDERR = 1, 2
VLLM_ARGS = [
    "--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2",
    "--max-num-batched-tokens", "8192",
    "--api-key", "sk-live-0123456789", "--hf-token=hf_abcdefghijklmnopqrstuvwxyz0123",
]  # fmt: skip


@dataclass
class FakeContainer:
    """One container as dockerd would describe it; defaults are a healthy vLLM server."""

    id: str = "4f1c6d0e9a7b" + "0" * 52
    name: str = "vllm-server"
    image: str = "vllm/vllm-openai:v0.11.0"
    status: str = "running"
    oom_killed: bool = False
    exit_code: int = 0
    pid: int = 4242
    restart_count: int = 0
    memory: int = 64 * GiB
    memory_swap: int = 128 * GiB
    shm_size: int = 64 * MiB  # Docker's default when --shm-size is not given
    ipc_mode: str = "private"
    runtime: str = "runc"
    gpu_count: int = -1  # --gpus all
    tty: bool = False
    args: list[str] = field(default_factory=lambda: list(VLLM_ARGS))
    env: list[str] = field(
        default_factory=lambda: ["HF_TOKEN=hf_envsecretenvsecretenvsecret", "PATH=/usr/bin"]
    )
    log: list[tuple[int, str]] = field(default_factory=list)  # (STDOUT or STDERR, line)
    raw_log: bytes | None = None  # sent as the logs answer instead of `log`, framing and all

    def summary(self) -> dict[str, Any]:
        return {
            "Id": self.id,
            "Names": [f"/{self.name}"],
            "Image": self.image,
            "ImageID": "sha256:" + "ab" * 32,
            "Command": "python3 -m vllm.entrypoints.openai.api_server " + " ".join(self.args),
            "State": self.status,
            "Status": "Up 3 hours"
            if self.status == "running"
            else f"Exited ({self.exit_code}) 5 minutes ago",
        }

    def inspect(self) -> dict[str, Any]:
        running = self.status == "running"
        return {
            "Id": self.id,
            "Created": "2025-10-01T08:00:00.123456789Z",
            "Path": "python3",
            "Args": ["-m", "vllm.entrypoints.openai.api_server", *self.args],
            "State": {
                "Status": self.status,
                "Running": running,
                "Paused": False,
                "Restarting": False,
                "OOMKilled": self.oom_killed,
                "Dead": False,
                "Pid": self.pid if running else 0,
                "ExitCode": self.exit_code,
                "Error": "",
                "StartedAt": "2025-10-01T08:00:01.5Z",
                "FinishedAt": "0001-01-01T00:00:00Z" if running else "2025-10-01T11:02:03.4Z",
            },
            "Image": "sha256:" + "ab" * 32,
            "LogPath": f"/var/lib/docker/containers/{self.id}/{self.id}-json.log",
            "Name": f"/{self.name}",
            "RestartCount": self.restart_count,
            "Driver": "overlay2",
            "Platform": "linux",
            "HostConfig": {
                "LogConfig": {"Type": "json-file", "Config": {}},
                "NetworkMode": "host",
                "RestartPolicy": {"Name": "unless-stopped", "MaximumRetryCount": 0},
                "IpcMode": self.ipc_mode,
                "ShmSize": self.shm_size,
                "Runtime": self.runtime,
                "Memory": self.memory,
                "MemorySwap": self.memory_swap,
                "DeviceRequests": [
                    {
                        "Driver": "",
                        "Count": self.gpu_count,
                        "DeviceIDs": None,
                        "Capabilities": [["gpu"]],
                        "Options": {},
                    }
                ],
            },
            "Config": {
                "Hostname": "gpu-node-01",
                "Tty": self.tty,
                "Env": self.env,
                "Cmd": self.args,
                "Image": self.image,
                "Entrypoint": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                "Labels": {},
            },
        }

    def log_bytes(self, tail: str) -> bytes:
        """The last `tail` lines ("all" for every one), framed unless the container has a TTY."""
        if self.raw_log is not None:
            return self.raw_log
        lines = (
            self.log if tail == "all" else self.log[max(0, len(self.log) - int(tail)) :] if int(tail) else []
        )
        if self.tty:
            return b"".join(f"{text}\r\n".encode() for _, text in lines)
        return b"".join(frame(stream, f"{text}\n".encode()) for stream, text in lines)


def frame(stream: int, payload: bytes) -> bytes:
    """One frame of dockerd's multiplexed stream: type, three zero bytes, big-endian size."""
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def vllm_container(**changes: Any) -> FakeContainer:
    return FakeContainer(**changes)


def oom_killed_container(**changes: Any) -> FakeContainer:
    """The guide's case: killed by the cgroup's OOM killer (137 = 128 + SIGKILL), restarted 3 times."""
    defaults = {"status": "exited", "oom_killed": True, "exit_code": 137, "restart_count": 3}
    return FakeContainer(**{**defaults, **changes})


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def address_string(self) -> str:
        return "unix"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        engine = self.server.engine
        url = urlsplit(self.path)
        engine.requests.append(("GET", url.path, url.query))
        match = re.match(r"^/v(\d+\.\d+)(/.*)$", url.path)
        path = match[2] if match else url.path
        if path != "/_ping" and engine.misbehave and self._misbehave(engine.misbehave):
            return
        if match and not engine.min_api <= _version(match[1]) <= engine.max_api:
            return self._refuse_version(match[1])
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self._route(path, query)

    def do_POST(self) -> None:  # noqa: N802
        self.server.engine.requests.append(("POST", self.path, ""))
        self._send(405, b'{"message":"not in this stand-in"}')

    do_DELETE = do_PUT = do_POST

    def _route(self, path: str, query: dict[str, str]) -> None:
        engine = self.server.engine
        if path == "/_ping":
            return self._send(
                200, b"OK", content_type="text/plain", headers={"Api-Version": engine.api_version}
            )
        if path == "/version":
            return self._json(200, engine.version_json())
        if path == "/containers/json":
            shown = [
                c for c in engine.containers if query.get("all") in ("1", "true") or c.status == "running"
            ]
            return self._json(200, [c.summary() for c in shown])
        found = re.match(r"^/containers/([^/]+)/(json|logs)$", path)
        container = engine.find(found[1]) if found else None
        if found and container is None:
            return self._json(404, {"message": f"No such container: {found[1]}"})
        if found and container and found[2] == "json":
            return self._json(200, container.inspect())
        if found and container:
            return self._chunked(container.log_bytes(query.get("tail", "all")), engine.write_size)
        self._json(404, {"message": "page not found"})

    def _misbehave(self, how: str) -> bool:
        engine = self.server.engine
        if how == "hang":
            engine.stopping.wait()
            self.close_connection = True
        elif how == "garbage":
            self._send(200, b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")
        elif how == "huge":
            self._send(200, b'{"Id": "' + b"x" * (5 * MiB) + b'"}')
        elif how == "error500":
            self._json(500, {"message": "Internal server error: containerd is not running"})
        elif how in ("trickle", "cut"):
            self.send_response(200)
            self.send_header("Content-Length", str(10 * MiB))
            self.end_headers()
            self.wfile.write(b'{"Id": "')
            while how == "trickle" and not engine.stopping.wait(0.05):
                self.wfile.write(b"x")
                self.wfile.flush()
            self.close_connection = True
        else:
            return False
        return True

    def _refuse_version(self, asked: str) -> None:
        engine = self.server.engine
        if _version(asked) < engine.min_api:
            message = (
                f"client version {asked} is too old. Minimum supported API version is "
                f"{engine.min_api_version}, please upgrade your client to a newer version"
            )
        else:
            message = (
                f"client version {asked} is too new. Maximum supported API version is {engine.api_version}"
            )
        self._json(400, {"message": message})

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode())

    def _send(
        self, status: int, body: bytes, *, content_type: str = "application/json", headers: dict | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _chunked(self, body: bytes, size: int) -> None:
        """As dockerd sends logs: chunked, with no Content-Type."""
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for start in range(0, len(body), size):
            piece = body[start : start + size]
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    engine: DockerEngineServer


class DockerEngineServer:
    """Serves the containers on `socket_path` in a thread while the `with` block runs.
    Defaults to Docker 27.3's API range (1.24 to 1.47)."""

    def __init__(
        self,
        socket_path: str | Path,
        containers: Iterable[FakeContainer] = (),
        *,
        engine_version: str = "27.3.1",
        api_version: str = "1.47",
        min_api_version: str = "1.24",
        misbehave: str | None = None,
        write_size: int = 4096,
    ) -> None:
        self.socket_path = str(socket_path)
        self.containers = list(containers)
        self.engine_version, self.api_version, self.min_api_version = (
            engine_version,
            api_version,
            min_api_version,
        )
        self.misbehave = misbehave
        self.write_size = write_size
        self.requests: list[tuple[str, str, str]] = []
        self.stopping = threading.Event()

    @property
    def min_api(self) -> tuple[int, int]:
        return _version(self.min_api_version)

    @property
    def max_api(self) -> tuple[int, int]:
        return _version(self.api_version)

    def find(self, id_or_name: str) -> FakeContainer | None:
        """By name, full id or unique id prefix, as dockerd resolves them."""
        by_prefix = [c for c in self.containers if c.id.startswith(id_or_name)]
        named = [c for c in self.containers if c.name == id_or_name.lstrip("/")]
        return (named or (by_prefix if len(by_prefix) == 1 else []) or [None])[0]

    def version_json(self) -> dict[str, Any]:
        return {
            "Platform": {"Name": "Docker Engine - Community"},
            "Version": self.engine_version,
            "ApiVersion": self.api_version,
            "MinAPIVersion": self.min_api_version,
            "GitCommit": "41ca978",
            "GoVersion": "go1.22.7",
            "Os": "linux",
            "Arch": "amd64",
            "KernelVersion": "5.15.0-119-generic",
        }

    def __enter__(self) -> DockerEngineServer:
        self._server = _Server(self.socket_path, _Handler)
        self._server.engine = self
        serve = self._server.serve_forever
        self._thread = threading.Thread(target=serve, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        Path(self.socket_path).unlink(missing_ok=True)
