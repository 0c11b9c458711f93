"""What a probe needs to know about one instance, and how hard it may try."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from fleet.probes.jsonable import shallow_dict

Engine = Literal["vllm", "tgi", "ollama", "sglang"]

MiB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class ProbeTarget:
    """One inference instance as the probes see it. The API key is already resolved from
    the environment variable named in the inventory; it is never serialised."""

    instance_id: int
    name: str
    engine: Engine
    engine_version: str = ""
    base_url: str
    served_model_name: str
    api_key: str | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    # The gateway in front of the instance (its name), and its URL when the probes do not
    # already go through it (the base URL is direct): the health probe then also times its
    # one-token request through it, for the TTFT breakdown's gateway gap (docs/ttft-breakdown.md).
    gateway: str = ""
    gateway_url: str = ""

    @property
    def through_gateway(self) -> bool:
        """The base URL is the gateway's own: every probe already goes through it."""
        return bool(self.gateway) and not self.gateway_url

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def gateway_target_url(self, path: str) -> str:
        return self.gateway_url.rstrip("/") + path

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def to_dict(self) -> dict[str, Any]:
        data = shallow_dict(self)
        data["api_key"] = "set" if self.api_key else None
        return data


@dataclass(frozen=True, kw_only=True)
class ProbeLimits:
    """Timeouts and size bounds. Every request has httpx timeouts and, around them, a hard
    overall deadline, so a probe ends even when a server trickles bytes forever."""

    connect_timeout_s: float = 3.0
    read_timeout_s: float = 10.0
    total_deadline_s: float = 15.0
    stream_deadline_s: float = 30.0
    max_body_bytes: int = 8 * MiB
    stream_max_tokens: int = 16


def _origin(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return parts.scheme, f"{(parts.hostname or '').lower()}:{port}"


def gateway_in_front(base_url: str, gateways: Sequence[tuple[str, str]]) -> tuple[str, str, bool]:
    """(name, URL, whether the probes already go through it) of the gateway in front of an
    instance, from its (name, URL) gateways in order: the one whose origin is the instance's
    own base URL (the inventory points at the gateway), else the first; ("", "", False)
    with none."""
    if not gateways:
        return "", "", False
    own = _origin(base_url)
    for name, url in gateways:
        if own is not None and _origin(url) == own:
            return name, url, True
    name, url = gateways[0]
    return name, url, False
