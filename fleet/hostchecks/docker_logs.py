"""The end of a container's log, as GET /containers/{id}/logs streams it.

Without a TTY the daemon frames each write with an 8-byte header (stdout or stderr, then the
payload's size); with one it sends the raw bytes. Only the last bytes are kept, so a log of
any length, or a frame that claims gigabytes, costs bounded memory; a first line cut by
the bound is dropped, and the result says when anything was cut.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from core.i18n import later
from fleet.hostchecks.docker_errors import DockerError, DockerFault


@dataclass(frozen=True)
class LogTail:
    text: str
    truncated: bool


class _Demuxer:
    """Undoes Docker's stdout/stderr framing: an 8-byte header (stream type 0-3, three zero
    bytes, big-endian uint32 payload size) before each payload. Payloads are passed on as
    they arrive, so a frame that claims gigabytes costs no memory."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._owed = 0  # payload bytes of the current frame still to come
        self.partial = False

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        self._pending += chunk
        while self._pending:
            if self._owed:
                piece = bytes(self._pending[: self._owed])
                del self._pending[: len(piece)]
                self._owed -= len(piece)
                yield piece
                continue
            if len(self._pending) < 8:
                break
            if self._pending[0] > 3 or self._pending[1:4] != b"\0\0\0":
                message = later("The container's log stream has a frame header Docker does not write.")
                raise DockerError(DockerFault.BAD_ANSWER, message)
            self._owed = int.from_bytes(self._pending[4:8], "big")
            del self._pending[:8]
        self.partial = bool(self._pending) or self._owed > 0


class _TailBuffer:
    """The last `limit` bytes of everything added, and whether anything fell off the front."""

    def __init__(self, limit: int) -> None:
        self.limit, self.data, self.cut = limit, bytearray(), False

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * self.limit:
            self._trim()

    def _trim(self) -> None:
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]
            self.cut = True

    def text(self) -> str:
        self._trim()
        return last_lines(bytes(self.data), cut_front=self.cut)


def last_lines(data: bytes, *, cut_front: bool, lines: int | None = None) -> str:
    """Decoded text of the end of a log; a first line cut by the byte bound is dropped,
    unless it is the only one."""
    if cut_front and b"\n" in data[:-1]:
        data = data[data.index(b"\n") + 1 :]
    text = data.decode("utf-8", errors="replace")
    if lines is not None:
        text = "".join(text.splitlines(keepends=True)[-lines:]) if lines > 0 else ""
    return text


class LogCollector:
    """Keeps the end of a log stream as it arrives: `feed` each chunk of the answer's body,
    then `tail` says what was kept and whether anything was cut. `framed` is False for a
    container with a TTY, whose log comes unframed."""

    def __init__(self, *, max_bytes: int, framed: bool) -> None:
        self._buffer, self._demux, self._framed = _TailBuffer(max_bytes), _Demuxer(), framed

    def feed(self, chunk: bytes) -> None:
        for payload in self._demux.feed(chunk) if self._framed else [chunk]:
            self._buffer.add(payload)

    def tail(self, *, complete: bool) -> LogTail:
        """What was kept; `complete` is whether the whole answer was read."""
        text = self._buffer.text()
        return LogTail(text, not complete or self._buffer.cut or self._demux.partial)
