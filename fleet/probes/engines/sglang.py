"""SGLang: its OpenAI-compatible API and native routes (docs/sglang.md).

Readiness is GET /health (a one-token generation since 0.4.10.post2: 200 with an empty
body, after about a second; 503 while the server warms up and once a generation got no
answer from the scheduler within SGLANG_HEALTH_CHECK_TIMEOUT, 20 s), GET /v1/models (the
served ids) and GET /get_server_info, which only informs: it gives the version and the
server arguments, but it asks the scheduler, so a stuck scheduler hangs it. With --api-key
every route but /health* and /metrics takes the key. The one-token request and the stream
are chat completions (the stream's chunks are OpenAI's; the usage chunk comes with
stream_options.include_usage). SGLang binds its port only after its scheduler has loaded
the model, so a starting SGLang refuses connections. It never answers 429 itself; beyond
--max-queued-requests it answers 503 "The request queue is full.". Its metrics are
`sglang:*`, served only with --enable-metrics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from django.utils.translation import gettext_noop

from fleet.probes.engines.base import EngineDialect, ReadinessRoute, StreamEvent, openai_chat_request
from fleet.probes.engines.vllm import openai_event
from fleet.probes.target import ProbeTarget

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?")
# 0.4.10.post2 made /health the generation check; before, only /health_generate was.
HEALTH_RUNS_GENERATION_FROM = (0, 4, 10, 2)
# The server arguments a console reads from /get_server_info (never api_key, which
# SGLang writes there in clear). Its launch flags are the names with "--" and dashes.
SERVER_ARGS = (
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "pp_size",
    "mem_fraction_static",
    "max_running_requests",
    "max_queued_requests",
    "max_total_tokens",
    "context_length",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "page_size",
    "kv_cache_dtype",
    "dtype",
    "quantization",
    "schedule_policy",
    "disable_radix_cache",
    "enable_metrics",
    "max_total_num_tokens",
    "max_req_input_len",
)


def version_tuple(version: str) -> tuple[int, ...] | None:
    """'0.5.10' -> (0, 5, 10, 0); '0.4.10.post2' -> (0, 4, 10, 2); None when unreadable."""
    match = _VERSION.match(version.strip())
    return None if match is None else tuple(int(part or 0) for part in match.groups())


def server_args_from_info(data: Any) -> dict[str, Any]:
    """The server arguments a console reads from /get_server_info's answer (SERVER_ARGS),
    with the scheduler's effective running-request limit when it reports one."""
    found = {name: data[name] for name in SERVER_ARGS if name in data}
    states = data.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], Mapping):
        effective = states[0].get("effective_max_running_requests_per_dp")
        if effective is not None:
            found["effective_max_running_requests"] = effective
    return found


def _server_info(data: Any) -> dict[str, Any]:
    return {"version": data["version"], "server_args": server_args_from_info(data)}


def _model_ids(data: Any) -> dict[str, Any]:
    return {"models": [str(card["id"]) for card in data["data"]]}


def sglang_event(data: dict[str, Any]) -> StreamEvent:
    """A chat.completion.chunk, or {"error": {...}} when the scheduler aborted the request."""
    return openai_event(data)


class SglangDialect(EngineDialect):
    name = "sglang"
    label = "SGLang"
    readiness_routes: ClassVar[tuple[ReadinessRoute, ...]] = (
        ReadinessRoute(path="/health"),
        ReadinessRoute(path="/v1/models", auth=True, read=_model_ids),
        ReadinessRoute(path="/get_server_info", auth=True, read=_server_info, required=False),
    )
    stream_path = "/v1/chat/completions"
    metric_prefix = "sglang:"
    dead_health_statuses = frozenset({503})
    failed_generation_statuses = frozenset({500})  # "Internal server error: ..."
    refused = gettext_noop(
        "SGLang binds its port only after its scheduler has loaded the model, so it is starting or gone"
    )
    who_sent_429 = gettext_noop(
        "SGLang itself never answers 429, so a gateway in front of it limited the request"
    )
    why_503 = gettext_noop(
        "SGLang's request queue is full (--max-queued-requests), its health check failed, "
        "or a gateway has no healthy upstream"
    )
    dead_health_note = gettext_noop(
        "SGLang answers 503 while it warms up and when a one-token generation gets no answer "
        "within SGLANG_HEALTH_CHECK_TIMEOUT, 20 s by default"
    )
    hung_health_meaning = gettext_noop(
        "SGLang's /health runs a one-token generation, so its scheduler is stuck or saturated "
        "(SGLang itself answers 503 only after SGLANG_HEALTH_CHECK_TIMEOUT, 20 s by default)"
    )
    no_metric_series = gettext_noop(
        "SGLang writes them only with --enable-metrics, and its scheduler's first values after "
        "its first batch or 30 s of idling"
    )

    def dead_health_status(self, version: str) -> int | None:
        """503 from 0.4.10.post2 (and when the version is unknown); before, /health only
        said the HTTP server was up."""
        parsed = version_tuple(version)
        if parsed is not None and parsed < HEALTH_RUNS_GENERATION_FROM:
            return None
        return 503

    def one_token_request(self, target: ProbeTarget) -> tuple[str, dict[str, Any]]:
        return "/v1/chat/completions", openai_chat_request(target, max_tokens=1, stream=False)

    def stream_body(self, target: ProbeTarget, max_tokens: int) -> dict[str, Any]:
        return openai_chat_request(target, max_tokens=max_tokens, stream=True)

    def parse_event(self, data: dict[str, Any]) -> StreamEvent:
        return sglang_event(data)
