"""Is the engine up, and does it serve the model the inventory says?

vLLM: GET /health (200 with an empty body = healthy; 500 up to 0.10, 503 from 0.11 =
the engine core is dead), GET /v1/models (is served_model_name among the ids?),
GET /version. TGI: /health (503 = unhealthy) and /info (model_id, version).
Ollama: /api/version and /api/tags (a model "llama3" is listed as "llama3:latest").
The three requests of an engine run concurrently; each has the probe's deadline.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from fleet.probes.fetch import FetchResult, fetch_bounded
from fleet.probes.jsonable import shallow_dict
from fleet.probes.outcomes import Outcome, describe_exception
from fleet.probes.target import ProbeLimits, ProbeTarget

SMALL_BODY = 1024 * 1024
DEAD_ENGINE_STATUSES = {500, 503}


@dataclass(frozen=True, kw_only=True)
class RouteCheck:
    path: str
    outcome: Outcome
    status: int | None = None
    error: str = ""
    elapsed_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ReadinessResult:
    outcome: Outcome
    healthy: bool = False
    engine_dead: bool = False
    models: tuple[str, ...] = ()
    model_found: bool | None = None  # None when the model list could not be read
    version: str | None = None
    error: str = ""
    checks: tuple[RouteCheck, ...] = field(default_factory=tuple)

    @property
    def model_mismatch(self) -> bool:
        return self.model_found is False

    def check(self, path: str) -> RouteCheck | None:
        return next((c for c in self.checks if c.path == path), None)

    def to_dict(self) -> dict[str, Any]:
        return shallow_dict(self) | {
            "models": list(self.models),
            "checks": [shallow_dict(c) for c in self.checks],
            "model_mismatch": self.model_mismatch,
        }


def _check(path: str, fetch: FetchResult, outcome: Outcome | None = None, error: str = "") -> RouteCheck:
    return RouteCheck(
        path=path,
        outcome=outcome or fetch.outcome,
        status=fetch.status,
        error=error or fetch.error_text,
        elapsed_s=fetch.elapsed_s,
    )


def _parse(path: str, fetch: FetchResult, extract: Callable[[Any], Any]) -> tuple[Any, RouteCheck]:
    """The extracted value of a JSON answer; a body that is not the expected JSON is garbage."""
    if not fetch.ok:
        return None, _check(path, fetch)
    try:
        return extract(json.loads(fetch.body)), _check(path, fetch)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        snippet = fetch.body[:80].decode("utf-8", errors="replace")
        return None, _check(
            path, fetch, Outcome.GARBAGE, f"not the expected JSON ({type(exc).__name__}): {snippet!r}"
        )


async def _get(
    client: httpx.AsyncClient, target: ProbeTarget, path: str, limits: ProbeLimits, *, auth: bool = False
) -> FetchResult:
    headers = target.auth_headers() if auth else None
    return await fetch_bounded(
        client=client,
        url=target.url(path),
        limits=limits,
        headers=headers,
        max_bytes=min(SMALL_BODY, limits.max_body_bytes),
    )


def _result(
    health: RouteCheck,
    healthy: bool,
    models: RouteCheck,
    ids: list[str] | None,
    found: bool | None,
    version: Any,
    extra: tuple[RouteCheck, ...] = (),
) -> ReadinessResult:
    checks = (health, models, *extra)
    first_failure = next((c for c in (health, models) if c.outcome != Outcome.OK), None)
    return ReadinessResult(
        outcome=first_failure.outcome if first_failure else Outcome.OK,
        healthy=healthy,
        engine_dead=health.status in DEAD_ENGINE_STATUSES,
        models=tuple(ids or ()),
        model_found=found,
        version=str(version) if version else None,
        error=first_failure.error if first_failure else "",
        checks=tuple(c for c in checks if c is not None),
    )


def _found(
    ids: list[str] | None, wanted: str, aliases: Callable[[str], set[str]] = lambda n: {n}
) -> bool | None:
    return None if ids is None else bool(aliases(wanted) & set(ids))


async def _vllm(client: httpx.AsyncClient, target: ProbeTarget, limits: ProbeLimits) -> ReadinessResult:
    health, models, version = await asyncio.gather(
        _get(client, target, "/health", limits),
        _get(client, target, "/v1/models", limits, auth=True),
        _get(client, target, "/version", limits),
    )
    ids, models_check = _parse("/v1/models", models, lambda d: [str(card["id"]) for card in d["data"]])
    number, version_check = _parse("/version", version, lambda d: d["version"])
    return _result(
        _check("/health", health),
        health.ok,
        models_check,
        ids,
        _found(ids, target.served_model_name),
        number,
        (version_check,),
    )


async def _tgi(client: httpx.AsyncClient, target: ProbeTarget, limits: ProbeLimits) -> ReadinessResult:
    health, info = await asyncio.gather(
        _get(client, target, "/health", limits), _get(client, target, "/info", limits)
    )
    data, info_check = _parse(
        "/info", info, lambda d: {"id": str(d["model_id"]), "version": d.get("version")}
    )
    ids = [data["id"]] if data else None
    version = data["version"] if data else None
    return _result(
        _check("/health", health), health.ok, info_check, ids, _found(ids, target.served_model_name), version
    )


def _ollama_aliases(name: str) -> set[str]:
    return {name, f"{name}:latest"} if ":" not in name else {name}


def _ollama_names(data: Any) -> list[str]:
    return [str(m.get("name") or m["model"]) for m in data["models"]]


async def _ollama(client: httpx.AsyncClient, target: ProbeTarget, limits: ProbeLimits) -> ReadinessResult:
    version, tags = await asyncio.gather(
        _get(client, target, "/api/version", limits), _get(client, target, "/api/tags", limits)
    )
    number, version_check = _parse("/api/version", version, lambda d: d["version"])
    ids, tags_check = _parse("/api/tags", tags, _ollama_names)
    return _result(
        version_check,
        version_check.outcome == Outcome.OK,
        tags_check,
        ids,
        _found(ids, target.served_model_name, _ollama_aliases),
        number,
    )


READINESS_BY_ENGINE: dict[
    str, Callable[[httpx.AsyncClient, ProbeTarget, ProbeLimits], Awaitable[ReadinessResult]]
] = {
    "vllm": _vllm,
    "tgi": _tgi,
    "ollama": _ollama,
}


async def check_readiness(
    *, client: httpx.AsyncClient, target: ProbeTarget, limits: ProbeLimits
) -> ReadinessResult:
    """Readiness of one instance by its engine's routes; never raises."""
    check = READINESS_BY_ENGINE.get(target.engine)
    if check is None:
        return ReadinessResult(outcome=Outcome.ERROR, error=f"unknown engine {target.engine!r}")
    try:
        return await check(client, target, limits)
    except Exception as exc:  # a bug here must not take the sweep down
        return ReadinessResult(outcome=Outcome.ERROR, error=describe_exception(exc))


def readiness_from_health_phases(phases: Any, *, path: str) -> ReadinessResult:
    """Readiness from the health request the phases were timed on, without the model list
    and version requests: the light check of a large sweep (model_found stays unknown)."""
    check = RouteCheck(path=path, outcome=phases.outcome, status=phases.status, error=phases.error,
                       elapsed_s=phases.total_s or 0.0)  # fmt: skip
    healthy = phases.outcome == Outcome.OK and phases.status == 200
    return ReadinessResult(
        outcome=Outcome.OK if healthy else phases.outcome,
        healthy=healthy,
        engine_dead=phases.status in DEAD_ENGINE_STATUSES,
        error="" if healthy else phases.error,
        checks=(check,),
    )
