"""What the Docker daemon says of containers, read into frozen results.

`container_state` reads `docker inspect` (GET /containers/{id}/json) the way the guide's
checks do (`{{.State.OOMKilled}}`, `{{.HostConfig.Memory}}`): a missing or mistyped field
reads as its default, and only an answer without a container Id is refused. Config.Env is
never read into a result (it holds secrets), and the container's command line comes back
with the values of secret flags replaced (`redaction`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from core.i18n import later
from fleet.hostchecks.docker_errors import DockerError, DockerFault
from fleet.hostchecks.processes import container_id_of
from fleet.hostchecks.redaction import redact_command


@dataclass(frozen=True)
class ImageRef:
    """An image reference split as the registry reads it; tag "" means none was given."""

    registry: str
    repository: str
    tag: str
    digest: str


def parse_image_ref(ref: str) -> ImageRef:
    """Split "ghcr.io/org/img:tag@sha256:..." into its parts. The first path component is a
    registry only when it has a "." or ":" or is "localhost", so "localhost:5000/img" has no
    tag and "vllm/vllm-openai:v0.11.0" has no registry (Docker Hub)."""
    name, _, digest = ref.strip().partition("@")
    if re.fullmatch(r"sha256:[0-9a-f]{64}|[0-9a-f]{64}", name):  # created from an image id
        return ImageRef("", "", "", name if name.startswith("sha256:") else f"sha256:{name}")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    name = name[: len(name) - len(tag) - 1] if tag else name
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return ImageRef(first, rest, tag, digest)
    return ImageRef("", name, tag, digest)


@dataclass(frozen=True)
class GpuRequest:
    """One HostConfig.DeviceRequests entry: count -1 means all GPUs."""

    driver: str
    count: int
    device_ids: tuple[str, ...]
    capabilities: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class ContainerState:
    """What `docker inspect` says of one container, without its environment."""

    id: str
    name: str
    image: str
    image_ref: ImageRef
    status: str
    running: bool
    oom_killed: bool
    exit_code: int
    error: str
    started_at: str
    finished_at: str
    pid: int
    restart_count: int
    memory_bytes: int  # 0 means no limit
    memory_swap_bytes: int  # -1 means unlimited swap
    shm_size_bytes: int
    ipc_mode: str  # "host" shares the host's /dev/shm, and ShmSize does not apply
    runtime: str
    gpu_requests: tuple[GpuRequest, ...]
    tty: bool
    log_driver: str
    command: tuple[str, ...]

    @property
    def memory_limited(self) -> bool:
        return self.memory_bytes > 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ContainerSummary:
    id: str
    names: tuple[str, ...]
    image: str
    state: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EngineVersion:
    version: str
    api_version: str
    min_api_version: str
    os: str
    arch: str
    kernel_version: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _gpu_request(raw: Any) -> GpuRequest:
    entry = _dict(raw)
    caps = tuple(_strs(c) for c in entry.get("Capabilities") or [] if isinstance(c, list))
    return GpuRequest(
        _str(entry.get("Driver")), _int(entry.get("Count")), _strs(entry.get("DeviceIDs")), caps
    )


def container_state(data: Any) -> ContainerState:
    """A ContainerState from GET /containers/{id}/json; DockerError when it is not one."""
    if not isinstance(data, dict) or not _str(data.get("Id")):
        raise DockerError(
            DockerFault.BAD_ANSWER, later("The Docker daemon's inspect answer has no container Id.")
        )
    state, host, config = _dict(data.get("State")), _dict(data.get("HostConfig")), _dict(data.get("Config"))
    image = _str(config.get("Image")) or _str(data.get("Image"))
    return ContainerState(
        id=data["Id"],
        name=_str(data.get("Name")).lstrip("/"),
        image=image,
        image_ref=parse_image_ref(image),
        status=_str(state.get("Status")),
        running=state.get("Running") is True,
        oom_killed=state.get("OOMKilled") is True,
        exit_code=_int(state.get("ExitCode")),
        error=_str(state.get("Error")),
        started_at=_str(state.get("StartedAt")),
        finished_at=_str(state.get("FinishedAt")),
        pid=_int(state.get("Pid")),
        restart_count=_int(data.get("RestartCount")),
        memory_bytes=_int(host.get("Memory")),
        memory_swap_bytes=_int(host.get("MemorySwap")),
        shm_size_bytes=_int(host.get("ShmSize")),
        ipc_mode=_str(host.get("IpcMode")),
        runtime=_str(host.get("Runtime")),
        gpu_requests=tuple(_gpu_request(r) for r in host.get("DeviceRequests") or [] if isinstance(r, dict)),
        tty=config.get("Tty") is True,
        log_driver=_str(_dict(host.get("LogConfig")).get("Type")),
        command=redact_command([_str(data.get("Path")), *_strs(data.get("Args"))]),
    )


def container_id_from_cgroup(text: str) -> str:
    """The container id in a /proc/<pid>/cgroup file ("0::/system.slice/docker-<id>.scope"
    with Docker's systemd cgroup driver, "12:memory:/docker/<id>" with cgroupfs); "" when none."""
    for line in text.splitlines():
        found = container_id_of(line.split(":", 2)[-1])
        if found:
            return found
    return ""


def container_summaries(data: Any) -> list[ContainerSummary]:
    """Every container in GET /containers/json (`docker ps -a`); DockerError when the answer
    is not a list. Entries without an Id are left out."""
    if not isinstance(data, list):
        raise DockerError(DockerFault.BAD_ANSWER, later("The Docker daemon's container list is not a list."))
    return [_summary(c) for c in data if isinstance(c, dict) and _str(c.get("Id"))]


def _summary(data: dict[str, Any]) -> ContainerSummary:
    names = tuple(name.lstrip("/") for name in _strs(data.get("Names")))
    return ContainerSummary(
        _str(data.get("Id")),
        names,
        _str(data.get("Image")),
        _str(data.get("State")),
        _str(data.get("Status")),
    )


def engine_version(data: Any) -> EngineVersion:
    """The Engine's version from GET /version; DockerError when it names none."""
    answer = _dict(data)
    if not _str(answer.get("Version")):
        raise DockerError(
            DockerFault.BAD_ANSWER, later("The Docker daemon's /version answer has no Version.")
        )
    keys = ("Version", "ApiVersion", "MinAPIVersion", "Os", "Arch", "KernelVersion")
    return EngineVersion(*(_str(answer.get(key)) for key in keys))
