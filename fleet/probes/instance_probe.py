"""One probe of an instance, of some or all probe kinds, and a bounded-concurrency sweep.

A probe runs the kinds asked for concurrently: health (readiness routes and the latency
phases), stream, metrics (the scrape, and rates against the previous scrape) and gpu (an
NVML read in a worker thread, when the host has a backend). A probe only measures: the
instance is judged once, by fleet.probes.judgement, on these fresh results together with
the latest stored results of the other kinds (fleet.probe_service does that under the
state's lock). The phase timing uses the engine dialect's tiny non-streaming generation
of one token (vLLM: chat completions; TGI: /generate; Ollama: /api/chat;
fleet/probes/engines/), so its TTFB is the time to the first token (guide 2.2.1); the
light health check of a large sweep times the dialect's health route instead and reads
readiness from that one request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from time import perf_counter
from typing import Any

from fleet.nvml.base import NvmlBackend
from fleet.probes.engines import dialect_for
from fleet.probes.fetch import make_instance_client
from fleet.probes.gpu import GpuProbeResult, read_gpus
from fleet.probes.http_client import ProbeClient
from fleet.probes.outcomes import Outcome
from fleet.probes.parts import ALL_KINDS, ProbeKind, ProbeParts, parse_kinds
from fleet.probes.phases import PhaseResult, measure_phases
from fleet.probes.readiness import ReadinessResult, check_readiness, readiness_from_health_phases
from fleet.probes.scrape import Scrape, ScrapeResult, derive, scrape_metrics
from fleet.probes.streaming import StreamResult, probe_stream
from fleet.probes.target import ProbeLimits, ProbeTarget

GPU_READ_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class InstanceProbe:
    target: ProbeTarget
    started_at: float  # epoch seconds
    elapsed_s: float
    kinds: frozenset[ProbeKind]  # the kinds measured by this probe
    parts: ProbeParts  # the measured kinds' results (the others are None)
    scrape: Scrape | None = None  # this probe's parsed /metrics page, for the next rates

    @property
    def readiness(self) -> ReadinessResult | None:
        return self.parts.readiness

    @property
    def phases(self) -> PhaseResult | None:
        return self.parts.phases

    @property
    def stream(self) -> StreamResult | None:
        return self.parts.stream

    @property
    def scrape_result(self) -> ScrapeResult | None:
        return self.parts.scrape_result

    @property
    def derived(self) -> Mapping[str, float]:
        return self.parts.derived

    @property
    def gpus(self) -> GpuProbeResult | None:
        return self.parts.gpus

    def measured(self, kind: ProbeKind) -> bool:
        return kind in self.kinds

    @property
    def outcome(self) -> Outcome | str:
        """The outcome of the health request ("" when health was not measured)."""
        return self.readiness.outcome if self.measured(ProbeKind.HEALTH) and self.readiness else ""

    @cached_property
    def kind_dicts(self) -> dict[str, dict[str, Any]]:
        """The measured kinds' results as JSON, for the instance's state (made once)."""
        return self.parts.to_kind_dicts(self.kinds)

    def to_dict(self, *, with_scrape: bool = True) -> dict[str, Any]:
        """The measured kinds' results; the parts of kinds not measured are None."""
        fresh = self.kind_dicts
        health, stream = fresh.get("health", {}), fresh.get("stream", {})
        metrics, gpu = fresh.get("metrics", {}), fresh.get("gpu", {})
        scrape = metrics.get("scrape_result")
        if scrape is not None and with_scrape and self.scrape:
            scrape = scrape | {"scrape": self.scrape.to_dict()}
        return {
            "target": self.target.to_dict(),
            "kinds": sorted(self.kinds),
            "started_at": self.started_at,
            "elapsed_s": self.elapsed_s,
            "outcome": self.outcome,
            "readiness": health.get("readiness"),
            "phases": health.get("phases"),
            "gateway_phases": health.get("gateway_phases"),
            "stream": stream.get("stream"),
            "scrape": scrape,
            "gpus": gpu.get("gpus"),
            "derived": metrics.get("derived", {}),
        }


def phases_request(target: ProbeTarget, *, generate: bool, via_gateway: bool = False) -> dict[str, Any]:
    """The request the phases are timed on: the dialect's non-streaming one-token generation
    on the engine's native route (so TTFB is the time to the first token), or its health
    route; with via_gateway, the same generation sent to the gateway in front of it."""
    dialect = dialect_for(target.engine)
    if not generate:
        return {"url": target.url(dialect.health_path), "method": "GET"}
    path, body = dialect.one_token_request(target)
    url = target.gateway_target_url(path) if via_gateway else target.url(path)
    return {"url": url, "method": "POST", "json": body, "headers": target.auth_headers()}


async def _read_gpus(backend: NvmlBackend | None) -> GpuProbeResult | None:
    if backend is None:
        return None
    try:
        return await asyncio.wait_for(asyncio.to_thread(read_gpus, backend=backend), GPU_READ_TIMEOUT_S)
    except TimeoutError:
        return GpuProbeResult(
            outcome=Outcome.READ_TIMEOUT, error=f"NVML read took over {GPU_READ_TIMEOUT_S:g} s"
        )


async def _nothing() -> None:
    return None


async def _health(
    client: ProbeClient, target: ProbeTarget, limits: ProbeLimits, *, light: bool
) -> tuple[ReadinessResult, PhaseResult, PhaseResult | None]:
    """Readiness, the phases of the one-token request and, when a gateway stands in front of
    the instance (and the probes do not already go through it), the same request's phases
    through the gateway. The light health check times the health route alone."""
    if light:
        phases = await measure_phases(client=client, limits=limits, **phases_request(target, generate=False))
        return readiness_from_health_phases(phases, dialect=dialect_for(target.engine)), phases, None
    through_gateway = (
        measure_phases(
            client=client, limits=limits, **phases_request(target, generate=True, via_gateway=True)
        )
        if target.gateway_url
        else _nothing()
    )
    return await asyncio.gather(
        check_readiness(client=client, target=target, limits=limits),
        measure_phases(client=client, limits=limits, **phases_request(target, generate=True)),
        through_gateway,
    )


async def _metrics(
    client: ProbeClient, target: ProbeTarget, limits: ProbeLimits, previous: Scrape | None
) -> tuple[ScrapeResult, dict[str, float]]:
    scraped = await scrape_metrics(client=client, target=target, limits=limits)
    if scraped.scrape is None:
        return scraped, {}
    for previous_scrape in (previous, None):  # a stored scrape the rates cannot use is dropped
        try:
            return scraped, derive(previous=previous_scrape, current=scraped.scrape)
        except Exception:  # noqa: S112 - the measurements are kept without rates
            continue
    return scraped, {}


async def probe_instance(
    *,
    client: ProbeClient,
    target: ProbeTarget,
    previous_scrape: Scrape | None,
    limits: ProbeLimits,
    gpu_backend: NvmlBackend | None = None,
    kinds: Iterable[ProbeKind] = ALL_KINDS,
    light_health: bool = False,
) -> InstanceProbe:
    """Measure one instance for `kinds`; never raises, and ends within about the longer of
    limits.total_deadline_s and limits.stream_deadline_s. The gpu kind is measured only
    with a backend.

    With light_health the health request the phases are timed on is the whole readiness
    check: a sweep of health and metrics makes two requests per instance."""
    kinds = parse_kinds(kinds) - ({ProbeKind.GPU} if gpu_backend is None else set())
    started_at, started = time.time(), perf_counter()

    def when(kind: ProbeKind, work: Any) -> Any:
        if kind in kinds:
            return work()
        return _nothing()

    health, stream, metrics, gpus = await asyncio.gather(
        when(ProbeKind.HEALTH, lambda: _health(client, target, limits, light=light_health)),
        when(ProbeKind.STREAM, lambda: probe_stream(client=client, target=target, limits=limits)),
        when(ProbeKind.METRICS, lambda: _metrics(client, target, limits, previous_scrape)),
        when(ProbeKind.GPU, lambda: _read_gpus(gpu_backend)),
    )
    readiness, phases, gateway_phases = health or (None, None, None)
    scraped, derived = metrics or (None, {})
    parts = ProbeParts(
        readiness=readiness,
        phases=phases,
        gateway_phases=gateway_phases,
        stream=stream,
        scrape_result=scraped,
        derived=derived,
        gpus=gpus,
    )
    return InstanceProbe(
        target=target,
        started_at=started_at,
        elapsed_s=perf_counter() - started,
        kinds=kinds,
        parts=parts,
        scrape=scraped.scrape if scraped else None,
    )


@dataclass
class _Sweep:
    client: ProbeClient | None
    limits: ProbeLimits
    kinds: frozenset[ProbeKind]
    light_health: bool
    semaphore: asyncio.Semaphore
    previous_scrapes: Mapping[int, Scrape] = field(default_factory=dict)
    gpu_backends: Mapping[int, NvmlBackend | None] = field(default_factory=dict)

    async def probe(self, target: ProbeTarget) -> InstanceProbe:
        async with self.semaphore:
            if self.client is not None:
                return await self._probe(self.client, target)
            async with make_instance_client(limits=self.limits) as client:
                return await self._probe(client, target)

    async def _probe(self, client: ProbeClient, target: ProbeTarget) -> InstanceProbe:
        return await probe_instance(
            client=client,
            target=target,
            previous_scrape=self.previous_scrapes.get(target.instance_id),
            limits=self.limits,
            kinds=self.kinds,
            light_health=self.light_health,
            gpu_backend=self.gpu_backends.get(target.instance_id),
        )


async def probe_many(
    *,
    targets: Sequence[ProbeTarget],
    previous_scrapes: Mapping[int, Scrape],
    limits: ProbeLimits,
    concurrency: int = 100,
    kinds: Iterable[ProbeKind] = ALL_KINDS,
    light_health: bool = False,
    gpu_backends: Mapping[int, NvmlBackend | None] | None = None,
    client: ProbeClient | None = None,
) -> list[InstanceProbe]:
    """Probe every target for `kinds`, at most `concurrency` at once, each over its own
    small client (or all over `client` when one is given). Results come back in the
    order of `targets`; the maps are keyed by instance_id."""
    sweep = _Sweep(
        client=client,
        limits=limits,
        kinds=parse_kinds(kinds),
        light_health=light_health,
        semaphore=asyncio.Semaphore(max(1, concurrency)),
        previous_scrapes=previous_scrapes,
        gpu_backends=gpu_backends or {},
    )
    return list(await asyncio.gather(*(sweep.probe(t) for t in targets)))
