"""Is the engine up, and does it serve the model the inventory says?

The routes are the engine dialect's (fleet/probes/engines/): the first is the health
route (vLLM and TGI /health, Ollama /api/version), the others name the served models and
the version (vLLM /v1/models and /version, TGI /info, Ollama /api/tags). The readiness is
the first failure of the health route or the model list; a route the dialect marks as
not required (vLLM's /version) only informs. The health status the dialect lists as a
dead engine's sets engine_dead. An engine's requests run concurrently; each has the
probe's deadline.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.probes.engines import DIALECTS, EngineDialect, ReadinessRoute
from fleet.probes.fetch import FetchResult, fetch_bounded
from fleet.probes.http_client import ProbeClient
from fleet.probes.jsonable import shallow_dict
from fleet.probes.outcomes import Outcome, describe_exception
from fleet.probes.target import ProbeLimits, ProbeTarget

SMALL_BODY = 1024 * 1024


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
    client: ProbeClient, target: ProbeTarget, path: str, limits: ProbeLimits, *, auth: bool = False
) -> FetchResult:
    headers = target.auth_headers() if auth else None
    return await fetch_bounded(
        client=client,
        url=target.url(path),
        limits=limits,
        headers=headers,
        max_bytes=min(SMALL_BODY, limits.max_body_bytes),
    )


def _read(route: ReadinessRoute, fetch: FetchResult) -> tuple[Mapping[str, Any] | None, RouteCheck]:
    if route.read is None:
        return None, _check(route.path, fetch)
    return _parse(route.path, fetch, route.read)


def _result(
    dialect: EngineDialect, target: ProbeTarget, checks: list[RouteCheck], read: dict[str, Any]
) -> ReadinessResult:
    health = checks[0]
    required = [c for c in checks if c.path not in dialect.informative_paths]
    first_failure = next((c for c in required if c.outcome != Outcome.OK), None)
    ids = read.get("models")  # None when the model list could not be read
    version = read.get("version")
    found = None if ids is None else bool(dialect.model_aliases(target.served_model_name) & set(ids))
    return ReadinessResult(
        outcome=first_failure.outcome if first_failure else Outcome.OK,
        healthy=health.outcome == Outcome.OK,
        engine_dead=health.status in dialect.dead_health_statuses,
        models=tuple(ids or ()),
        model_found=found,
        version=str(version) if version else None,
        error=first_failure.error if first_failure else "",
        checks=tuple(checks),
    )


async def _check_routes(
    client: ProbeClient, target: ProbeTarget, limits: ProbeLimits, dialect: EngineDialect
) -> ReadinessResult:
    routes = dialect.readiness_routes
    fetched = await asyncio.gather(*(_get(client, target, r.path, limits, auth=r.auth) for r in routes))
    checks, read = [], {}
    for route, fetch in zip(routes, fetched, strict=True):
        data, check = _read(route, fetch)
        checks.append(check)
        read.update(data or {})
    return _result(dialect, target, checks, read)


async def check_readiness(
    *, client: ProbeClient, target: ProbeTarget, limits: ProbeLimits
) -> ReadinessResult:
    """Readiness of one instance by its engine's routes; never raises. An engine without a
    dialect is reported, not asked the vLLM routes."""
    dialect = DIALECTS.get(target.engine)
    if dialect is None:
        return ReadinessResult(outcome=Outcome.ERROR, error=f"unknown engine {target.engine!r}")
    try:
        return await _check_routes(client, target, limits, dialect)
    except Exception as exc:  # a bug here must not take the sweep down
        return ReadinessResult(outcome=Outcome.ERROR, error=describe_exception(exc))


def readiness_from_health_phases(phases: Any, *, dialect: EngineDialect) -> ReadinessResult:
    """Readiness from the health request the phases were timed on, without the model list
    and version requests: the light check of a large sweep (model_found stays unknown)."""
    check = RouteCheck(
        path=dialect.health_path,
        outcome=phases.outcome,
        status=phases.status,
        error=phases.error,
        elapsed_s=phases.total_s or 0.0,
    )
    healthy = phases.outcome == Outcome.OK and phases.status == 200
    return ReadinessResult(
        outcome=Outcome.OK if healthy else phases.outcome,
        healthy=healthy,
        engine_dead=phases.status in dialect.dead_health_statuses,
        error="" if healthy else phases.error,
        checks=(check,),
    )
