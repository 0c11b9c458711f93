"""Read-only questions to the Docker Engine over its Unix socket.

A host agent answers the guide's checks (`docker inspect --format '{{.State.OOMKilled}}'`,
`{{.HostConfig.Memory}}`, `docker logs --tail N`) without the docker CLI: `DockerClient`
asks the Engine API with GET requests only and has no call that changes anything. Every
answer is bounded in time and size, and every failure is a `DockerError` that says what
went wrong in words an SRE can act on. The answers are read by `container_state` (which
never reads Config.Env and redacts the command line) and `docker_logs`.

The API version is negotiated as the docker CLI does: the daemon's newest version (the
`Api-Version` header of the unversioned GET /_ping), capped at PREFERRED_API_VERSION, whose
fields this module reads; a daemon that refuses it as too old names its minimum, which is
then spoken instead.
"""

from __future__ import annotations

import errno
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from core.i18n import later
from fleet.hostchecks.container_state import (
    ContainerState,
    ContainerSummary,
    EngineVersion,
    container_id_from_cgroup,
    container_state,
    container_summaries,
    engine_version,
)
from fleet.hostchecks.docker_errors import DockerError, DockerFault
from fleet.hostchecks.docker_logs import LogCollector, LogTail
from fleet.hostchecks.processes import read_text

DEFAULT_SOCKET = "/var/run/docker.sock"
# Docker 25.0's API; refused by no daemon from 25.0 to today's, whose minimum is 1.40
# (1.44 in 29.0-29.2). Older daemons are spoken to in their own, lower version.
PREFERRED_API_VERSION = "1.44"
MAX_ANSWER_BYTES = 4 * 1024 * 1024
LOG_BYTES = 256 * 1024
LOG_READ_LIMIT = 64 * 1024 * 1024
_BASE_URL = "http://docker"  # the socket is the address; this host name is never resolved
_NAME_RE = re.compile(r"^/?[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")
_MINIMUM_RE = re.compile(r"Minimum supported API version is (\d+\.\d+)")


def _version_tuple(version: str) -> tuple[int, int] | None:
    match = _VERSION_RE.match(version.strip())
    return (int(match[1]), int(match[2])) if match else None


def negotiated_version(daemon_newest: str) -> str:
    """The version to speak: the daemon's newest, capped at PREFERRED_API_VERSION."""
    theirs, preferred = _version_tuple(daemon_newest), _version_tuple(PREFERRED_API_VERSION)
    if theirs is None or preferred is None or theirs >= preferred:
        return PREFERRED_API_VERSION
    return f"{theirs[0]}.{theirs[1]}"


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: httpx.Headers
    body: bytes  # the whole answer, or only its error text when a sink took a 200's body
    complete: bool  # read to its end, within the byte limit


class DockerClient:
    """GET-only Engine API client over a Unix socket. `timeout` bounds connecting and each
    read, `deadline` a whole answer; JSON answers are cut off at MAX_ANSWER_BYTES. Pass
    api_version to skip the negotiation."""

    def __init__(
        self,
        socket_path: str = DEFAULT_SOCKET,
        *,
        timeout: float = 3.0,
        deadline: float = 10.0,
        api_version: str | None = None,
    ) -> None:
        self.socket_path, self.timeout, self.deadline = socket_path, timeout, deadline
        self._api_version = api_version
        self._http = httpx.Client(
            transport=httpx.HTTPTransport(uds=socket_path),
            base_url=_BASE_URL,
            timeout=timeout,
            trust_env=False,
        )

    def __enter__(self) -> DockerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def ping(self) -> str:
        """Raise DockerError unless the daemon answers; return its newest API version."""
        answer = self._read("/_ping", versioned=False)
        _raise_for_status(answer, path="/_ping")
        return answer.headers.get("Api-Version", "")

    def api_version(self) -> str:
        """The API version this client speaks, negotiated on first use."""
        if self._api_version is None:
            self._api_version = negotiated_version(self.ping())
        return self._api_version

    def version(self) -> EngineVersion:
        """The Engine's version, for the pre-deploy checklist."""
        return engine_version(self._json("/version"))

    def containers(self) -> list[ContainerSummary]:
        """Every container, running or not (`docker ps -a`)."""
        return container_summaries(self._json("/containers/json", params={"all": "1"}))

    def inspect(self, id_or_name: str) -> ContainerState:
        """`docker inspect` of one container; DockerError(NOT_FOUND) when there is none."""
        return container_state(self._json(f"/containers/{_checked_name(id_or_name)}/json"))

    def container_for(
        self, *, pid: int | None = None, container_id: str | None = None, root: Path = Path("/")
    ) -> ContainerState | None:
        """The container an engine process runs in: by the container id in the process's
        cgroup, else by the State.Pid of a running container; None when it runs in none."""
        if (pid is None) == (container_id is None):
            raise ValueError("container_for needs exactly one of pid and container_id")
        if pid is None:
            return self._inspect_or_none(str(container_id))
        from_cgroup = _cgroup_container_id(root / "proc" / str(int(pid)) / "cgroup")
        found = self._inspect_or_none(from_cgroup) if from_cgroup else None
        return found or self._running_with_pid(pid)

    def logs(self, id_or_name: str, *, tail: int = 200, max_bytes: int = LOG_BYTES) -> str:
        """The container's last `tail` lines of stdout and stderr, at most max_bytes of them."""
        return self.read_logs(id_or_name, tail=tail, max_bytes=max_bytes).text

    def read_logs(
        self, id_or_name: str, *, tail: int = 200, max_bytes: int = LOG_BYTES, tty: bool | None = None
    ) -> LogTail:
        """As `logs`, and whether the byte bound cut the lines short. Without a TTY the daemon
        frames each write (see docker_logs); with one it sends the raw bytes."""
        name = _checked_name(id_or_name)
        raw = self.inspect(name).tty if tty is None else tty
        collector = LogCollector(max_bytes=max_bytes, framed=not raw)
        path = f"/containers/{name}/logs"
        params = {"stdout": "1", "stderr": "1", "tail": str(max(0, tail)), "timestamps": "0"}
        answer = self._read(path, params=params, limit=LOG_READ_LIMIT, sink=collector.feed)
        _raise_for_status(answer, path=path)
        return collector.tail(complete=answer.complete)

    def _inspect_or_none(self, id_or_name: str) -> ContainerState | None:
        try:
            return self.inspect(id_or_name)
        except DockerError as exc:
            if exc.fault == DockerFault.NOT_FOUND:
                return None
            raise

    def _running_with_pid(self, pid: int) -> ContainerState | None:
        for summary in self.containers():
            found = self._inspect_or_none(summary.id) if summary.state == "running" else None
            if found and found.pid == pid:
                return found
        return None

    def _json(self, path: str, *, params: dict[str, str] | None = None) -> Any:
        answer = self._read(path, params=params)
        _raise_for_status(answer, path=path)
        if not answer.complete:
            raise DockerError(
                DockerFault.TOO_LARGE,
                later(
                    "The Docker daemon's answer to %(path)s is larger than %(limit)s bytes.",
                    path=path,
                    limit=MAX_ANSWER_BYTES,
                ),
            )
        try:
            return json.loads(answer.body)
        except ValueError:
            preview = answer.body[:60].decode("utf-8", errors="replace")
            raise DockerError(
                DockerFault.BAD_ANSWER,
                later(
                    "The Docker daemon's answer to %(path)s is not JSON: %(preview)r",
                    path=path,
                    preview=preview,
                ),
            ) from None

    def _read(
        self,
        path: str,
        *,
        params: dict[str, str] | None = None,
        limit: int = MAX_ANSWER_BYTES,
        sink: Callable[[bytes], None] | None = None,
        versioned: bool = True,
    ) -> _Answer:
        """GET path, reading at most `limit` bytes within the deadline; a 200's body goes to
        `sink` when one is given. A daemon that calls our version too old is asked again in
        the minimum it names."""
        answer = self._get(path, params, limit, sink, versioned)
        minimum = _MINIMUM_RE.search(_error_text(answer.body)) if answer.status == 400 and versioned else None
        if minimum and minimum[1] != self._api_version:
            self._api_version = minimum[1]
            answer = self._get(path, params, limit, sink, versioned)
        return answer

    def _get(
        self,
        path: str,
        params: dict[str, str] | None,
        limit: int,
        sink: Callable[[bytes], None] | None,
        versioned: bool,
    ) -> _Answer:
        url = f"/v{self.api_version()}{path}" if versioned else path
        started, total, body = time.monotonic(), 0, bytearray()
        try:
            with self._http.stream("GET", url, params=params) as response:
                take = sink if sink is not None and response.status_code == 200 else body.extend
                for chunk in response.iter_raw():
                    take(chunk[: limit - total])
                    total += len(chunk)
                    if total > limit:
                        return _Answer(response.status_code, response.headers, bytes(body), complete=False)
                    if time.monotonic() - started > self.deadline:
                        raise _timeout(path, self.deadline)
                return _Answer(response.status_code, response.headers, bytes(body), complete=True)
        except httpx.TimeoutException:
            raise _timeout(path, self.timeout) from None
        except httpx.ConnectError as exc:
            raise _connect_error(self.socket_path, exc) from None
        except httpx.TransportError as exc:
            raise DockerError(
                DockerFault.BAD_ANSWER,
                later(
                    "The Docker daemon's answer to %(path)s broke off: %(reason)s", path=path, reason=str(exc)
                ),
            ) from None


def _raise_for_status(answer: _Answer, *, path: str) -> None:
    if answer.status == 200:
        return
    said = _error_text(answer.body)
    if answer.status == 404:
        raise DockerError(DockerFault.NOT_FOUND, later("Docker says: %(said)s", said=said or "not found"))
    if answer.status == 400 and "API version" in said:
        raise DockerError(
            DockerFault.API_VERSION, later("Docker refused the API version: %(said)s", said=said)
        )
    raise DockerError(
        DockerFault.HTTP_ERROR,
        later(
            "The Docker daemon answered %(path)s with HTTP %(status)s: %(said)s",
            path=path,
            status=answer.status,
            said=said or "(no message)",
        ),
    )


def _error_text(body: bytes) -> str:
    """The daemon's {"message": ...}, or the body's first 200 characters."""
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        message = None
    text = message if isinstance(message, str) else body[:200].decode("utf-8", errors="replace")
    return text.strip()[:200]


def _timeout(path: str, seconds: float) -> DockerError:
    return DockerError(
        DockerFault.TIMEOUT,
        later(
            "The Docker daemon did not answer %(path)s within %(seconds)s s: it may be hung.",
            path=path,
            seconds=seconds,
        ),
    )


def _os_error(exc: BaseException | None) -> OSError | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno is not None:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _connect_error(socket_path: str, exc: httpx.TransportError) -> DockerError:
    cause = _os_error(exc)
    code = cause.errno if cause else None
    if code == errno.ENOENT:
        return DockerError(
            DockerFault.SOCKET_MISSING,
            later(
                "The Docker socket %(path)s does not exist: Docker is not installed or not running.",
                path=socket_path,
            ),
        )
    if code in (errno.EACCES, errno.EPERM):
        return DockerError(
            DockerFault.PERMISSION_DENIED,
            later(
                "Permission denied on the Docker socket %(path)s: the agent's user needs to be in the "
                "docker group (or otherwise have read and write access to the socket).",
                path=socket_path,
            ),
        )
    return DockerError(
        DockerFault.UNREACHABLE,
        later(
            "Nothing answers on the Docker socket %(path)s (%(reason)s): is the Docker daemon running?",
            path=socket_path,
            reason=(cause.strerror if cause else "") or str(exc) or type(exc).__name__,
        ),
    )


def _checked_name(id_or_name: str) -> str:
    if not isinstance(id_or_name, str) or not _NAME_RE.match(id_or_name):
        raise ValueError(f"not a container id or name: {id_or_name!r}")
    return id_or_name.lstrip("/")


def _cgroup_container_id(path: Path) -> str:
    try:
        text, _ = read_text(path, limit=64 * 1024)
    except OSError:
        return ""  # the process ended, or runs where the agent may not look
    return container_id_from_cgroup(text)
