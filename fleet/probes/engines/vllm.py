"""vLLM: the OpenAI-compatible API, and the dialect of engines the registry does not know.

Readiness is GET /health (200 with an empty body; 500 up to 0.10 and 503 from 0.11 once
the engine core died, vllm#24897), GET /v1/models (the served ids; it takes the API key)
and GET /version, which only informs: it can keep answering while the engine hangs
(vllm#39863). Streams are chat completions over SSE with stream_options.include_usage;
reasoning arrives as `reasoning_content` (or the newer `reasoning`) before the content.
vLLM builds the engine before it binds its port, so a starting vLLM refuses connections,
and it never answers 429 itself (docs/guide-corrections.md #7, #8).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from django.utils.translation import gettext_noop

from fleet.probes.engines.base import EngineDialect, ReadinessRoute, StreamEvent, openai_chat_request
from fleet.probes.error_bodies import message_from_json
from fleet.probes.target import ProbeTarget


def _usage(data: dict[str, Any]) -> dict[str, Any]:
    usage = data.get("usage") or {}
    return {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}


def openai_event(data: dict[str, Any]) -> StreamEvent:
    """A chat.completion.chunk (or an error object sent mid-stream)."""
    if "error" in data or data.get("object") == "error":
        return StreamEvent(error=message_from_json(data) or json.dumps(data)[:300])
    choice = (data.get("choices") or [{}])[0]
    delta = choice.get("delta") or {}
    content = delta.get("content") or ""
    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return StreamEvent(
        content=content,
        reasoning=reasoning,
        token=bool(content or reasoning),
        finish_reason=choice.get("finish_reason"),
        **_usage(data),
    )


def _version_tuple(version: str) -> tuple[int, int] | None:
    try:
        major, minor = (int(p) for p in version.strip().split(".")[:2])
    except ValueError:
        return None
    return major, minor


class VllmDialect(EngineDialect):
    name = "vllm"
    label = "vLLM"
    readiness_routes: ClassVar[tuple[ReadinessRoute, ...]] = (
        ReadinessRoute(path="/health"),
        ReadinessRoute(
            path="/v1/models", auth=True, read=lambda d: {"models": [str(card["id"]) for card in d["data"]]}
        ),
        ReadinessRoute(path="/version", read=lambda d: {"version": d["version"]}, required=False),
    )
    stream_path = "/v1/chat/completions"
    metric_prefix = "vllm:"
    dead_health_statuses = frozenset({500, 503})
    failed_generation_statuses = frozenset({500})  # EngineDeadError
    refused = gettext_noop("vLLM binds its port only after loading the model, so it is starting or gone")
    who_sent_429 = gettext_noop(
        "vLLM itself never answers 429, so a gateway in front of it limited the request"
    )
    why_503 = gettext_noop(
        "admission control (--max-num-queued-reqs), elastic-EP scaling, "
        "or a gateway without a healthy upstream"
    )
    dead_health_note = gettext_noop("vLLM answers 500 up to 0.10 and 503 from 0.11")
    no_metric_series = gettext_noop("vLLM's --disable-log-stats turns them off")

    def dead_health_status(self, version: str) -> int | None:
        """500 up to 0.10, 503 from 0.11 (vllm#24897); 503 when the version is unknown."""
        parsed = _version_tuple(version)
        return 500 if parsed is not None and parsed < (0, 11) else 503

    def one_token_request(self, target: ProbeTarget) -> tuple[str, dict[str, Any]]:
        return "/v1/chat/completions", openai_chat_request(target, max_tokens=1, stream=False)

    def stream_body(self, target: ProbeTarget, max_tokens: int) -> dict[str, Any]:
        return openai_chat_request(target, max_tokens=max_tokens, stream=True)

    def parse_event(self, data: dict[str, Any]) -> StreamEvent:
        return openai_event(data)
