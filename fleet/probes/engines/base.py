"""What every engine dialect says, and the pieces the probes share with the dialects.

A dialect is the engine-specific half of a probe: the routes it asks, the bodies it sends,
how it reads what comes back, and the words a finding uses to explain the engine's
answers. The probes (readiness, phases, streaming, scrape) and the rules that word their
findings ask the dialect instead of branching on the engine's name, so what is true of
one engine (vLLM binds its port only after loading; TGI answers 429 when overloaded;
Ollama has no /metrics) is never said of another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from django.utils.translation import gettext_noop

from fleet.probes.target import ProbeTarget

PROMPT = "Reply with the single word: ok"


@dataclass(frozen=True, kw_only=True)
class StreamEvent:
    """One parsed chunk of a stream, whatever the engine's wire format."""

    content: str = ""
    reasoning: str = ""
    token: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    done: bool = False


@dataclass(frozen=True, kw_only=True)
class ReadinessRoute:
    """One route the readiness check asks. `read` turns its JSON into any of "models" (the
    ids it serves) and "version"; a route without `read` is judged by its status alone.
    A route that is not `required` only informs: its failure leaves the instance ready."""

    path: str
    read: Callable[[Any], Mapping[str, Any]] | None = None
    auth: bool = False
    required: bool = True


class EngineDialect:
    """The base of the engine dialects: one subclass per engine, one instance in the registry.

    The first readiness route is the health route: a light sweep times it alone, and its
    status says whether the engine is dead."""

    name: ClassVar[str]
    label: ClassVar[str]  # how a finding names the engine
    readiness_routes: ClassVar[tuple[ReadinessRoute, ...]]
    stream_path: ClassVar[str]
    stream_is_sse: ClassVar[bool] = True  # else one JSON object a line (NDJSON)
    has_metrics: ClassVar[bool] = True
    metrics_path: ClassVar[str] = "/metrics"
    metric_prefix: ClassVar[str] = ""  # the prefix of the wire names it exports (metric_names)
    # Every status its /health answers once the engine died, whatever the version.
    dead_health_statuses: ClassVar[frozenset[int]] = frozenset()
    # The statuses its generation routes answer when the engine failed the request, as
    # they do while it is dead (vLLM 500 EngineDeadError, TGI 424 "generation").
    failed_generation_statuses: ClassVar[frozenset[int]] = frozenset()
    # The wording of findings, each a reason completing a sentence about the engine.
    refused: ClassVar[str]  # a refused port, with no GPU reading to tell more
    refused_while_gpu_held: ClassVar[str] = gettext_noop("so the engine is probably still loading the model")
    who_sent_429: ClassVar[str]
    why_503: ClassVar[str]
    dead_health_note: ClassVar[str] = ""  # how its /health says the engine died
    # What a health route that accepts the connection and then says nothing means.
    hung_health_meaning: ClassVar[str] = gettext_noop("the API server is hung")
    no_metric_series: ClassVar[str] = ""  # why its /metrics may hold no engine series

    @property
    def health_path(self) -> str:
        return self.readiness_routes[0].path

    @property
    def informative_paths(self) -> frozenset[str]:
        """The readiness routes whose failure only informs (vLLM's /version)."""
        return frozenset(r.path for r in self.readiness_routes if not r.required)

    def model_aliases(self, name: str) -> set[str]:
        """The names the model list may show `name` under."""
        return {name}

    def dead_health_status(self, version: str) -> int | None:
        """The status /health answers once the engine died, in `version` ('' when unknown);
        None when the engine has no such status."""
        return None

    def one_token_request(self, target: ProbeTarget) -> tuple[str, dict[str, Any]]:
        """The path and body of a non-streaming generation of one token on the engine's
        native route: the phases are timed on it, so TTFB is the time to the first token."""
        raise NotImplementedError

    def stream_body(self, target: ProbeTarget, max_tokens: int) -> dict[str, Any]:
        """The body of the stream probe's request to `stream_path`."""
        raise NotImplementedError

    def parse_event(self, data: dict[str, Any]) -> StreamEvent:
        """One decoded chunk of the stream as an event."""
        raise NotImplementedError


def chat_messages() -> list[dict[str, str]]:
    return [{"role": "user", "content": PROMPT}]


def openai_chat_request(target: ProbeTarget, *, max_tokens: int, stream: bool) -> dict[str, Any]:
    """The OpenAI-compatible chat completion the probes send (vLLM, SGLang): greedy, with
    usage in the last chunk of a stream."""
    body: dict[str, Any] = {
        "model": target.served_model_name,
        "messages": chat_messages(),
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body
