"""What went wrong when the Docker daemon was asked: one fault kind per thing an SRE can act on.

Its own module so that the client (`docker_api`) and the readers of its answers
(`container_state`, `docker_logs`) can all raise it without importing each other.
"""

from __future__ import annotations

from enum import StrEnum

from core.i18n import Message


class DockerFault(StrEnum):
    SOCKET_MISSING = "socket_missing"
    PERMISSION_DENIED = "permission_denied"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    NOT_FOUND = "not_found"
    API_VERSION = "api_version"
    HTTP_ERROR = "http_error"
    BAD_ANSWER = "bad_answer"
    TOO_LARGE = "too_large"


class DockerError(Exception):
    """The Docker daemon could not be asked, or its answer could not be used."""

    def __init__(self, fault: DockerFault, message: Message) -> None:
        super().__init__(fault, message)
        self.fault = fault
        self.message = message

    def __str__(self) -> str:
        return str(self.message)
