"""What a probe needs to know about one instance, and how hard it may try."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fleet.probes.jsonable import shallow_dict

Engine = Literal["vllm", "tgi", "ollama"]

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

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

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
