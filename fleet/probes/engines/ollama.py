"""Ollama: its native API.

Readiness is GET /api/version (the health route: Ollama has no /health) and GET /api/tags
(a model "llama3" is listed as "llama3:latest"). The one-token request and the stream are
POST /api/chat, the stream as NDJSON whose last line says done (with the token counts);
a reasoning model sends `thinking` before `content`. `ollama serve` listens at once and
loads a model on its first request, so a refused port means the server is not running,
never that it is loading. It has no /metrics and no dead-engine status: a failed runner
shows as 500 on the generation ("llama runner process has terminated") while
/api/version still answers. A full queue answers 503 "server busy" (OLLAMA_MAX_QUEUE);
it never answers 429 itself (fleet/simulator/ollama_server.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.utils.translation import gettext_noop

from fleet.probes.engines.base import EngineDialect, ReadinessRoute, StreamEvent, chat_messages
from fleet.probes.error_bodies import message_from_json
from fleet.probes.target import ProbeTarget


def ollama_event(data: dict[str, Any]) -> StreamEvent:
    """One NDJSON line of /api/chat: a message delta, or the final line with the counts."""
    if "error" in data:
        return StreamEvent(error=message_from_json(data))
    message = data.get("message") or {}
    content, reasoning = message.get("content") or "", message.get("thinking") or ""
    done = bool(data.get("done"))
    return StreamEvent(
        content=content,
        reasoning=reasoning,
        token=bool(content or reasoning),
        done=done,
        finish_reason=(data.get("done_reason") or "stop") if done else None,
        prompt_tokens=data.get("prompt_eval_count") if done else None,
        completion_tokens=data.get("eval_count") if done else None,
    )


def _names(data: Any) -> dict[str, Any]:
    return {"models": [str(m.get("name") or m["model"]) for m in data["models"]]}


class OllamaDialect(EngineDialect):
    name = "ollama"
    label = "Ollama"
    readiness_routes: ClassVar[tuple[ReadinessRoute, ...]] = (
        ReadinessRoute(path="/api/version", read=lambda d: {"version": d["version"]}),
        ReadinessRoute(path="/api/tags", read=_names),
    )
    stream_path = "/api/chat"
    stream_is_sse = False
    has_metrics = False
    refused = gettext_noop("Ollama listens at once and loads models on demand, so its server is not running")
    refused_while_gpu_held = gettext_noop(
        "but Ollama listens before it loads any model, so its server is not running "
        "(something else holds that memory)"
    )
    who_sent_429 = gettext_noop("Ollama does not answer 429 itself, so a gateway limited the request")
    why_503 = gettext_noop("Ollama's queue is full (OLLAMA_MAX_QUEUE), or a gateway has no healthy upstream")

    def model_aliases(self, name: str) -> set[str]:
        return {name, f"{name}:latest"} if ":" not in name else {name}

    def one_token_request(self, target: ProbeTarget) -> tuple[str, dict[str, Any]]:
        return "/api/chat", self._chat(target, num_predict=1, stream=False)

    def stream_body(self, target: ProbeTarget, max_tokens: int) -> dict[str, Any]:
        return self._chat(target, num_predict=max_tokens, stream=True)

    def parse_event(self, data: dict[str, Any]) -> StreamEvent:
        return ollama_event(data)

    @staticmethod
    def _chat(target: ProbeTarget, *, num_predict: int, stream: bool) -> dict[str, Any]:
        return {
            "model": target.served_model_name,
            "messages": chat_messages(),
            "stream": stream,
            "options": {"num_predict": num_predict, "temperature": 0},
        }
