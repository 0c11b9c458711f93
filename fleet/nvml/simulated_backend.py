"""The simulated NVML backend (the fleet simulator's GET /_sim/nvml), and the registry
that picks a backend by kind."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from fleet.nvml.base import NvmlBackend, NvmlError, NvmlReading
from fleet.nvml.dcgm import DcgmExporterBackend

MAX_BYTES = 4 * 1024 * 1024


class SimulatedNvmlBackend:
    """Reads `NvmlReading` JSON from the simulator. `url` is the full endpoint, for
    example http://127.0.0.1:9000/_sim/nvml. Any failure is an NvmlError."""

    def __init__(self, url: str, timeout: float = 3.0) -> None:
        self.url, self.timeout = url, timeout

    def read(self) -> NvmlReading:
        try:
            body = self._fetch()
        except httpx.HTTPError as exc:
            raise NvmlError(f"the simulator's NVML endpoint {self.url} did not answer: {exc!r}") from None
        try:
            return NvmlReading.from_dict(json.loads(body))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise NvmlError(f"the simulator's NVML endpoint {self.url} sent a bad reading: {exc}") from None

    def _fetch(self) -> bytes:
        with (
            httpx.Client(timeout=self.timeout, trust_env=False) as client,
            client.stream("GET", self.url) as response,
        ):
            if response.status_code != 200:
                raise NvmlError(
                    f"the simulator's NVML endpoint {self.url} answered HTTP {response.status_code}"
                )
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_BYTES:
                    raise NvmlError(f"the simulator's NVML reading passed {MAX_BYTES} bytes")
                chunks.append(chunk)
            return b"".join(chunks)


def _pynvml(**kwargs: Any) -> NvmlBackend:
    from fleet.nvml.pynvml_backend import PynvmlBackend

    return PynvmlBackend(**kwargs)


BACKENDS: dict[str, Callable[..., NvmlBackend]] = {
    "simulated": SimulatedNvmlBackend,
    "pynvml": _pynvml,
    "dcgm": DcgmExporterBackend,
}


def nvml_backend_for(kind: str, **kwargs: Any) -> NvmlBackend:
    """The backend of a kind ("simulated": url, timeout; "pynvml": no arguments; "dcgm": the
    exporter's /metrics url, timeout)."""
    try:
        factory = BACKENDS[kind]
    except KeyError:
        raise ValueError(f"unknown NVML backend {kind!r}; known: {', '.join(sorted(BACKENDS))}") from None
    return factory(**kwargs)
