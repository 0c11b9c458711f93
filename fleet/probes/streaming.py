"""A small streaming generation, timed token by token.

The engine's dialect (fleet/probes/engines/) names the route and body and parses each
chunk into a StreamEvent: vLLM's chat completions over SSE, TGI's /generate_stream (SSE,
`details` in the last event), Ollama's /api/chat (NDJSON). What is shared lives here:
splitting the body into lines, SSE framing, the timing and the summary. The first
content *or reasoning* event (`reasoning_content`, `reasoning`, Ollama's `thinking`) is
the first token: a reasoning model's TTFT is not its first visible word.
Output tokens/s = completion tokens / (total − TTFT). Token counts come from the
engine's usage report, else from the counted token events.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import httpx

from fleet.probes.engines import DIALECTS, EngineDialect, StreamEvent
from fleet.probes.error_bodies import error_message
from fleet.probes.fetch import deadline_message, httpx_timeout, iter_bounded, read_prefix
from fleet.probes.http_client import ProbeClient
from fleet.probes.jsonable import shallow_dict
from fleet.probes.outcomes import GarbageResponse, Outcome, describe_exception, outcome_for_exception
from fleet.probes.target import ProbeLimits, ProbeTarget


@dataclass(frozen=True, kw_only=True)
class StreamResult:
    outcome: Outcome
    status: int | None = None
    error: str = ""
    ttft_s: float | None = None
    total_s: float | None = None
    itl_mean_s: float | None = None
    itl_p95_s: float | None = None
    output_tokens_per_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_from: str = ""  # "usage" or "counted"
    token_events: int = 0
    first_token_kind: str = ""  # "content" or "reasoning"
    finish_reason: str | None = None
    text: str = ""
    server: str = ""
    retry_after: str = ""

    def to_dict(self) -> dict[str, Any]:
        return shallow_dict(self)


async def _lines(response: httpx.Response, max_bytes: int) -> AsyncIterator[str]:
    pending: list[bytes] = []  # a partial line, joined only once its newline arrives
    async for chunk in iter_bounded(response, max_bytes):
        if b"\n" not in chunk:
            pending.append(chunk)
            continue
        *lines, rest = b"".join([*pending, chunk]).split(b"\n")
        pending = [rest]
        for line in lines:
            yield line.decode("utf-8", errors="replace").strip()
    tail = b"".join(pending).strip()
    if tail:
        yield tail.decode("utf-8", errors="replace")


def _payload(line: str, sse: bool) -> str | None:
    """The JSON text of a line; None for SSE comments, event names and blank lines."""
    if not line:
        return None
    if not sse:
        return line
    return line[5:].strip() if line.startswith("data:") else None


def _decode(payload: str) -> dict[str, Any]:
    try:
        data = json.loads(payload)
    except ValueError:
        raise GarbageResponse(f"stream chunk is not JSON: {payload[:80]!r}") from None
    if not isinstance(data, dict):
        raise GarbageResponse(f"stream chunk is not an object: {payload[:80]!r}")
    return data


@dataclass
class _Tally:
    started: float
    arrivals: list[float] = field(default_factory=list)
    first_kind: str = ""
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    done: bool = False
    ended_at: float | None = None

    def add(self, event: StreamEvent, at: float) -> None:
        self.ended_at = at
        if event.token:
            self.arrivals.append(at - self.started)
            self.first_kind = self.first_kind or ("content" if event.content else "reasoning")
            self.text = (self.text + event.content)[:200]
        self.finish_reason = event.finish_reason or self.finish_reason
        self.prompt_tokens = event.prompt_tokens if event.prompt_tokens is not None else self.prompt_tokens
        if event.completion_tokens is not None:
            self.completion_tokens = event.completion_tokens
        self.error = event.error or self.error
        self.done = self.done or event.done or bool(event.error)


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _summary(tally: _Tally, outcome: Outcome, error: str, **extra: Any) -> StreamResult:
    arrivals = tally.arrivals
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    ttft = arrivals[0] if arrivals else None
    total = (tally.ended_at - tally.started) if tally.ended_at is not None else None
    completion = tally.completion_tokens if tally.completion_tokens is not None else (len(arrivals) or None)
    rate = completion / (total - ttft) if completion and ttft is not None and total and total > ttft else None
    return StreamResult(
        outcome=outcome,
        error=error,
        ttft_s=ttft,
        total_s=total,
        itl_mean_s=statistics.fmean(gaps) if gaps else None,
        itl_p95_s=percentile(gaps, 0.95),
        output_tokens_per_s=rate,
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=completion,
        tokens_from="usage" if tally.completion_tokens is not None else ("counted" if arrivals else ""),
        token_events=len(arrivals),
        first_token_kind=tally.first_kind,
        finish_reason=tally.finish_reason,
        text=tally.text,
        **extra,
    )


def _final_outcome(tally: _Tally) -> tuple[Outcome, str]:
    if tally.error:
        return Outcome.ERROR, f"error in the stream: {tally.error}"
    if not (tally.done or tally.finish_reason):
        return Outcome.ERROR, "the stream ended without a finish reason"
    return Outcome.OK, ""


async def _consume(
    response: httpx.Response, dialect: EngineDialect, tally: _Tally, limits: ProbeLimits
) -> None:
    async for line in _lines(response, limits.max_body_bytes):
        payload = _payload(line, dialect.stream_is_sse)
        if payload is None:
            continue
        if payload == "[DONE]":
            tally.done, tally.ended_at = True, perf_counter()
            return
        tally.add(dialect.parse_event(_decode(payload)), perf_counter())
        if tally.error or (tally.done and not dialect.stream_is_sse):
            return


async def _run(
    client: httpx.AsyncClient,
    target: ProbeTarget,
    limits: ProbeLimits,
    dialect: EngineDialect,
    tally: _Tally,
    seen: dict[str, Any],
) -> None:
    request = {
        "json": dialect.stream_body(target, limits.stream_max_tokens),
        "headers": target.auth_headers(),
        "timeout": httpx_timeout(limits),
    }
    async with client.stream("POST", target.url(dialect.stream_path), **request) as response:
        seen.update(
            status=response.status_code,
            server=response.headers.get("server", ""),
            retry_after=response.headers.get("retry-after", ""),
        )
        if response.status_code >= 400:
            seen["body"] = await read_prefix(response)
            return
        await _consume(response, dialect, tally, limits)


async def probe_stream(*, client: ProbeClient, target: ProbeTarget, limits: ProbeLimits) -> StreamResult:
    """Stream a few tokens and time them, within limits.stream_deadline_s; never raises. An
    engine without a dialect is reported, not sent a request it may not understand."""
    dialect = DIALECTS.get(target.engine)
    if dialect is None:
        return StreamResult(outcome=Outcome.ERROR, error=f"unknown engine {target.engine!r}")
    tally, seen = _Tally(started=perf_counter()), {}
    # The stream is read as it arrives, through the httpx client the probe client lends.
    http = client.streaming_client()
    try:
        async with asyncio.timeout(limits.stream_deadline_s):
            await _run(http, target, limits, dialect, tally, seen)
    except Exception as exc:  # every failure is a classified result, with what arrived so far
        error = deadline_message(exc, limits.stream_deadline_s) or describe_exception(exc)
        return _summary(tally, outcome_for_exception(exc), error, **_headers(seen))
    if seen.get("status", 0) >= 400:
        message = error_message(seen.get("body", b""))
        text = f"HTTP {seen['status']}: {message}" if message else f"HTTP {seen['status']}"
        return _summary(tally, Outcome.BAD_STATUS, text, **_headers(seen))
    return _summary(tally, *_final_outcome(tally), **_headers(seen))


def _headers(seen: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": seen.get("status"),
        "server": seen.get("server", ""),
        "retry_after": seen.get("retry_after", ""),
    }
