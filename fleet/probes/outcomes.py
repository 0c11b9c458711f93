"""How a probe request ended, and how an exception maps to that.

Every network call in the probes ends in one `Outcome`; exceptions are classified here
instead of escaping, so a probe result always says what happened.
"""

from __future__ import annotations

import errno
import json
import socket
import ssl
from collections.abc import Iterator
from enum import StrEnum

import httpx


class Outcome(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    DNS_FAILURE = "dns_failure"
    CONNECT_TIMEOUT = "connect_timeout"
    READ_TIMEOUT = "read_timeout"
    RESET = "reset"
    BAD_STATUS = "bad_status"
    GARBAGE = "garbage"
    TOO_LARGE = "too_large"
    TLS_ERROR = "tls_error"
    ERROR = "error"


class BodyTooLarge(Exception):
    """A response body passed the probe's byte limit; reading stopped there."""


class GarbageResponse(Exception):
    """The server answered, but not with what the engine's API promises."""


_RESET_ERRNOS = {errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED}
_REFUSED_ERRNOS = {errno.ECONNREFUSED}
_UNREACHABLE_ERRNOS = {errno.EHOSTUNREACH, errno.ENETUNREACH}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, its causes and contexts, and the members of exception groups."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def _os_outcome(exc: BaseException) -> Outcome | None:
    if isinstance(exc, socket.gaierror):
        return Outcome.DNS_FAILURE
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return Outcome.TLS_ERROR
    if isinstance(exc, ConnectionRefusedError):
        return Outcome.REFUSED
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return Outcome.RESET
    if isinstance(exc, OSError) and exc.errno is not None:
        if exc.errno in _REFUSED_ERRNOS:
            return Outcome.REFUSED
        if exc.errno in _RESET_ERRNOS:
            return Outcome.RESET
        if exc.errno in _UNREACHABLE_ERRNOS:
            return Outcome.CONNECT_TIMEOUT
    return None


def _root_outcome(exc: BaseException) -> Outcome | None:
    for link in _chain(exc):
        found = _os_outcome(link)
        if found is not None:
            return found
    return None


def _protocol_outcome(exc: httpx.RemoteProtocolError) -> Outcome:
    # h11 says "Server disconnected" / "peer closed connection" when the peer hung up;
    # anything else is a malformed response.
    text = str(exc).lower()
    if "disconnected" in text or "peer closed" in text or "incomplete" in text:
        return Outcome.RESET
    return Outcome.GARBAGE


def outcome_for_exception(exc: BaseException) -> Outcome:
    """Classify an exception raised while probing.

    Timeouts keep their phase (connect vs read); an OS error found anywhere in the cause
    chain (refused, reset, DNS, TLS) wins over httpx's generic wrapper; undecodable or
    off-protocol answers are garbage; anything unforeseen is `error`.
    """
    simple: list[tuple[type[BaseException] | tuple[type[BaseException], ...], Outcome]] = [
        (BodyTooLarge, Outcome.TOO_LARGE),
        ((GarbageResponse, json.JSONDecodeError, UnicodeDecodeError, httpx.DecodingError), Outcome.GARBAGE),
        (httpx.ConnectTimeout, Outcome.CONNECT_TIMEOUT),
        ((httpx.ReadTimeout, httpx.WriteTimeout, TimeoutError), Outcome.READ_TIMEOUT),
        (httpx.PoolTimeout, Outcome.ERROR),
    ]
    for kinds, outcome in simple:
        if isinstance(exc, kinds):
            return outcome
    found = _root_outcome(exc)
    if found is not None:
        return found
    if isinstance(exc, httpx.RemoteProtocolError):
        return _protocol_outcome(exc)
    if isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.CloseError):
        return Outcome.RESET
    return Outcome.ERROR


def describe_exception(exc: BaseException) -> str:
    """A one-line message naming the exception and its innermost OS-level cause."""
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if isinstance(exc, httpx.PoolTimeout):
        return text + " (the probe client's connection pool was exhausted)"
    causes = [link for link in _chain(exc) if link is not exc and _os_outcome(link) is not None]
    if causes and str(causes[0]) not in text:
        text += f" ({type(causes[0]).__name__}: {causes[0]})"
    return text[:500]
