"""The engine dialects, one module per engine, found by the engine's name.

Each module (vllm.py, tgi.py, ollama.py, sglang.py) holds what its engine does its own way: the
health path, the one-token request the phases are timed on, the stream request and its
parser, the readiness routes and how to read them, the status its /health answers once
the engine died, how it says 429/503/overload, whether it has /metrics, and the words a
finding uses about it; the simulator has one server class per engine the same way
(fleet/simulator/*_server.py). Adding an engine is a module here and a line in DIALECTS.

`dialect_for` answers an engine it does not know with the vLLM dialect: the
OpenAI-compatible API is what most other servers speak. The probes that would send an
unknown engine requests it may not understand (readiness, the stream) check DIALECTS
themselves and report the unknown engine instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from fleet.probes.engines.base import PROMPT, EngineDialect, ReadinessRoute, StreamEvent
from fleet.probes.engines.ollama import OllamaDialect
from fleet.probes.engines.sglang import SglangDialect
from fleet.probes.engines.tgi import TgiDialect
from fleet.probes.engines.vllm import VllmDialect

__all__ = [
    "DIALECTS",
    "FALLBACK",
    "PROMPT",
    "EngineDialect",
    "ReadinessRoute",
    "StreamEvent",
    "dialect_for",
]

FALLBACK: EngineDialect = VllmDialect()
DIALECTS: Mapping[str, EngineDialect] = MappingProxyType(
    {dialect.name: dialect for dialect in (FALLBACK, TgiDialect(), OllamaDialect(), SglangDialect())}
)


def dialect_for(engine: str) -> EngineDialect:
    """The dialect of `engine`; the vLLM (OpenAI-compatible) one for an engine not listed."""
    return DIALECTS.get(engine, FALLBACK)
