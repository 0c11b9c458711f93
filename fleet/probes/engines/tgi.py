"""Text Generation Inference: its router's native API.

Readiness is GET /health (200, or 503 once the shard fails its health check) and GET /info
(model_id and version in one answer). The one-token request is POST /generate; streams
are POST /generate_stream over SSE, the last event carrying `details` (finish reason and
token counts); a special token is no output. The launcher starts the router only after
the shards have loaded and warmed up the model, so a starting TGI refuses connections
like a starting vLLM. The router answers 429 "overloaded" beyond
--max-concurrent-requests, and 424 to a generation the shard failed
(router/src/server.rs; fleet/simulator/tgi_server.py). Its metrics are `tgi_*`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.utils.translation import gettext_noop

from fleet.probes.engines.base import PROMPT, EngineDialect, ReadinessRoute, StreamEvent
from fleet.probes.error_bodies import message_from_json
from fleet.probes.target import ProbeTarget


def tgi_event(data: dict[str, Any]) -> StreamEvent:
    """One /generate_stream event: a token, `details` in the last, or an error."""
    if "error" in data:
        return StreamEvent(error=message_from_json(data))
    token = data.get("token") or {}
    details = data.get("details") or {}
    return StreamEvent(
        content=token.get("text") or "",
        token=bool(token) and not token.get("special"),
        finish_reason=details.get("finish_reason"),
        completion_tokens=details.get("generated_tokens"),
        prompt_tokens=details.get("input_length"),
        done=bool(details),
    )


def _info(data: Any) -> dict[str, Any]:
    return {"models": [str(data["model_id"])], "version": data.get("version")}


class TgiDialect(EngineDialect):
    name = "tgi"
    label = "TGI"
    readiness_routes: ClassVar[tuple[ReadinessRoute, ...]] = (
        ReadinessRoute(path="/health"),
        ReadinessRoute(path="/info", read=_info),
    )
    stream_path = "/generate_stream"
    metric_prefix = "tgi_"
    dead_health_statuses = frozenset({503})
    failed_generation_statuses = frozenset({424})  # "generation": the shard failed it
    refused = gettext_noop(
        "TGI's launcher starts its router only after the shards have loaded and warmed up the model, "
        "so it is starting or gone"
    )
    who_sent_429 = gettext_noop(
        "TGI is overloaded (its --max-concurrent-requests), or a gateway limited the request"
    )
    why_503 = gettext_noop("TGI is unhealthy, or a gateway has no healthy upstream")
    dead_health_note = gettext_noop("TGI answers 503 once its shard fails the health check")
    no_metric_series = gettext_noop(
        "TGI's router exports tgi_* series, so something else may answer on this port"
    )

    def dead_health_status(self, version: str) -> int | None:
        return 503

    def one_token_request(self, target: ProbeTarget) -> tuple[str, dict[str, Any]]:
        return "/generate", {"inputs": PROMPT, "parameters": {"max_new_tokens": 1}}

    def stream_body(self, target: ProbeTarget, max_tokens: int) -> dict[str, Any]:
        return {"inputs": PROMPT, "parameters": {"max_new_tokens": max_tokens, "details": True}}

    def parse_event(self, data: dict[str, Any]) -> StreamEvent:
        return tgi_event(data)
