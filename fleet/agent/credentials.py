"""The per-host agent credential, and the signatures on the agents' reports.

An agent needs only the broker's URL and its host's token; it never holds the console's
database URL or SECRET_KEY. The token is derived from SECRET_KEY, the host's name and a
salt kept on the HostAgent row, so the console can check a report without storing the
token, and a new salt revokes the old token. Every report carries an HMAC-SHA256 of its
canonical JSON under the token: a report for host A signed with host B's token, or
changed on the way, is refused."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

TOKEN_PREFIX = "oa1."


def agent_token(*, host: str, salt: str, secret_key: str) -> str:
    digest = hmac.new(secret_key.encode(), f"ops-agent:{host}:{salt}".encode(), hashlib.sha256).hexdigest()
    return TOKEN_PREFIX + digest


def canonical(*, host: str, kind: str, sent_at: float, body: Any) -> bytes:
    return json.dumps([host, kind, sent_at, body], sort_keys=True, separators=(",", ":")).encode()


def sign(*, token: str, host: str, kind: str, sent_at: float, body: Any) -> str:
    message = canonical(host=host, kind=kind, sent_at=sent_at, body=body)
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def signature_ok(*, token: str, envelope: dict[str, Any]) -> bool:
    try:
        expected = sign(
            token=token,
            host=envelope["host"],
            kind=envelope["kind"],
            sent_at=envelope["sent_at"],
            body=envelope["body"],
        )
    except (KeyError, TypeError, ValueError):
        return False
    given = envelope.get("signature")
    return isinstance(given, str) and hmac.compare_digest(expected, given)
