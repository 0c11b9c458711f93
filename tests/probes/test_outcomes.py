import errno
import json
import socket
import ssl

import httpx
import pytest

from fleet.probes.outcomes import BodyTooLarge, Outcome, describe_exception, outcome_for_exception


def _wrapped(cause: BaseException, kind: type[Exception] = httpx.ConnectError) -> Exception:
    try:
        try:
            raise OSError("All connection attempts failed") from cause
        except OSError as inner:
            raise kind(str(inner)) from inner
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (_wrapped(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")), Outcome.REFUSED),
        (_wrapped(ExceptionGroup("two", [ConnectionRefusedError(errno.ECONNREFUSED, "x")])), Outcome.REFUSED),
        (_wrapped(socket.gaierror(-2, "Name or service not known")), Outcome.DNS_FAILURE),
        (_wrapped(ssl.SSLCertVerificationError("certificate verify failed")), Outcome.TLS_ERROR),
        (_wrapped(ConnectionResetError(errno.ECONNRESET, "reset"), httpx.ReadError), Outcome.RESET),
        (httpx.ConnectTimeout("timed out"), Outcome.CONNECT_TIMEOUT),
        (httpx.ReadTimeout("timed out"), Outcome.READ_TIMEOUT),
        (TimeoutError(), Outcome.READ_TIMEOUT),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), Outcome.RESET),
        (httpx.RemoteProtocolError("illegal status line: bytearray(b'SSH-2.0')"), Outcome.GARBAGE),
        (json.JSONDecodeError("Expecting value", "<html>", 0), Outcome.GARBAGE),
        (BodyTooLarge("too big"), Outcome.TOO_LARGE),
        (httpx.PoolTimeout("pool"), Outcome.ERROR),
        (RuntimeError("surprise"), Outcome.ERROR),
    ],
)
def test_it_maps_each_failure_to_its_outcome(exc, outcome):
    assert outcome_for_exception(exc) == outcome


def test_the_message_names_the_innermost_os_error():
    exc = _wrapped(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"))
    assert describe_exception(exc).startswith("ConnectError: All connection attempts failed")
    assert "ConnectionRefusedError" in describe_exception(exc)
