"""One full probe of an instance, and a bounded-concurrency sweep over many.

An instance probe runs readiness, the phase timing, the stream and the metrics scrape
concurrently (plus an NVML read in a worker thread when the host has a backend), then
derives rates against the previous scrape and classifies. The phase timing uses a tiny
non-streaming generation of one token (vLLM: chat completions; TGI: /generate; Ollama:
/api/chat), so its TTFB is the time to the first token (guide 2.2.1); with
include_stream=False no tokens are generated at all and the phases are timed on the
health route instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import httpx

from fleet.nvml.base import NvmlBackend
from fleet.probes.classify import Category, Classification, Finding, Thresholds, classify
from fleet.probes.fetch import make_instance_client
from fleet.probes.gpu import GpuProbeResult, numa_findings, read_gpus
from fleet.probes.outcomes import Outcome, describe_exception
from fleet.probes.phases import PhaseResult, measure_phases
from fleet.probes.readiness import ReadinessResult, check_readiness, readiness_from_health_phases
from fleet.probes.scrape import Scrape, ScrapeResult, derive, scrape_metrics
from fleet.probes.streaming import PROMPT, StreamResult, probe_stream
from fleet.probes.target import ProbeLimits, ProbeTarget

HEALTH_PATHS = {"vllm": "/health", "tgi": "/health", "ollama": "/api/version"}
GPU_READ_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class InstanceProbe:
    target: ProbeTarget
    started_at: float  # epoch seconds
    elapsed_s: float
    readiness: ReadinessResult
    phases: PhaseResult
    stream: StreamResult | None
    scrape_result: ScrapeResult
    gpus: GpuProbeResult | None
    numa: tuple[str, ...]
    derived: dict[str, float]
    classification: Classification

    @property
    def scrape(self) -> Scrape | None:
        """This probe's scrape, to pass as previous_scrape next time."""
        return self.scrape_result.scrape

    @property
    def outcome(self) -> Outcome:
        """The outcome of the health request."""
        return self.readiness.outcome

    def to_dict(self, *, with_scrape: bool = True) -> dict[str, Any]:
        return {
            "target": self.target.to_dict(),
            "started_at": self.started_at,
            "elapsed_s": self.elapsed_s,
            "outcome": self.outcome,
            "readiness": self.readiness.to_dict(),
            "phases": self.phases.to_dict(),
            "stream": self.stream.to_dict() if self.stream else None,
            "scrape": self.scrape_result.to_dict(with_scrape=with_scrape),
            "gpus": self.gpus.to_dict() if self.gpus else None,
            "numa": list(self.numa),
            "derived": dict(self.derived),
            "classification": self.classification.to_dict(),
        }


def _one_token_request(target: ProbeTarget) -> tuple[str, dict[str, Any]]:
    messages = [{"role": "user", "content": PROMPT}]
    if target.engine == "tgi":
        return "/generate", {"inputs": PROMPT, "parameters": {"max_new_tokens": 1}}
    if target.engine == "ollama":
        return "/api/chat", {
            "model": target.served_model_name,
            "messages": messages,
            "stream": False,
            "options": {"num_predict": 1, "temperature": 0},
        }
    return "/v1/chat/completions", {
        "model": target.served_model_name,
        "messages": messages,
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
    }


def phases_request(target: ProbeTarget, *, generate: bool) -> dict[str, Any]:
    """The request the phases are timed on: a non-streaming one-token generation on the
    engine's native route (so TTFB is the time to the first token), or the health route."""
    if not generate:
        return {"url": target.url(HEALTH_PATHS.get(target.engine, "/health")), "method": "GET"}
    path, body = _one_token_request(target)
    return {"url": target.url(path), "method": "POST", "json": body, "headers": target.auth_headers()}


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


def _indices(instance_gpus: Iterable[Mapping[str, Any]]) -> list[int] | None:
    found = [int(g["index"]) for g in instance_gpus]
    return found or None


def _judge(
    *,
    target: ProbeTarget,
    previous_scrape: Scrape | None,
    thresholds: Thresholds,
    readiness: ReadinessResult,
    phases: PhaseResult,
    stream: StreamResult | None,
    scraped: ScrapeResult,
    gpus: GpuProbeResult | None,
    instance_gpus: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, float], tuple[str, ...], Classification]:
    try:
        derived = derive(previous=previous_scrape, current=scraped.scrape) if scraped.scrape else {}
        numa = tuple(numa_findings(instance_gpus=instance_gpus, reading=gpus.reading if gpus else None))
        classification = classify(
            readiness=readiness,
            phases=phases,
            stream=stream,
            derived=derived,
            gpus=gpus,
            target=target,
            thresholds=thresholds,
            scrape=scraped,
            numa=numa,
            gpu_indices=_indices(instance_gpus),
        )
    except Exception as exc:  # a bug in the rules must not lose the probe's measurements
        finding = Finding(
            code="probe.bug",
            category=Category.PROBE_ERROR,
            severity="degraded",
            source="classify",
            evidence=f"the probe's rules failed: {describe_exception(exc)}",
        )
        return {}, (), Classification(verdict="degraded", findings=(finding,))
    return derived, numa, classification


async def probe_instance(
    *,
    client: httpx.AsyncClient,
    target: ProbeTarget,
    previous_scrape: Scrape | None,
    limits: ProbeLimits,
    thresholds: Thresholds,
    gpu_backend: NvmlBackend | None = None,
    instance_gpus: Sequence[Mapping[str, Any]] = (),
    include_stream: bool = True,
    full_readiness: bool = True,
) -> InstanceProbe:
    """Probe one instance completely; never raises, and ends within about the longer of
    limits.total_deadline_s and limits.stream_deadline_s.

    With full_readiness=False (and no stream) the health request the phases are timed on is
    the whole readiness check: two requests per instance, health and metrics."""
    started_at, started = time.time(), perf_counter()
    light = not full_readiness and not include_stream
    readiness, phases, stream, scraped, gpus = await asyncio.gather(
        _nothing() if light else check_readiness(client=client, target=target, limits=limits),
        measure_phases(client=client, limits=limits, **phases_request(target, generate=include_stream)),
        probe_stream(client=client, target=target, limits=limits) if include_stream else _nothing(),
        scrape_metrics(client=client, target=target, limits=limits),
        _read_gpus(gpu_backend),
    )
    if light:
        readiness = readiness_from_health_phases(phases, path=HEALTH_PATHS.get(target.engine, "/health"))
    derived, numa, classification = _judge(
        target=target,
        previous_scrape=previous_scrape,
        thresholds=thresholds,
        readiness=readiness,
        phases=phases,
        stream=stream,
        scraped=scraped,
        gpus=gpus,
        instance_gpus=instance_gpus,
    )
    return InstanceProbe(
        target=target,
        started_at=started_at,
        elapsed_s=perf_counter() - started,
        readiness=readiness,
        phases=phases,
        stream=stream,
        scrape_result=scraped,
        gpus=gpus,
        numa=numa,
        derived=derived,
        classification=classification,
    )


@dataclass
class _Sweep:
    client: httpx.AsyncClient | None
    limits: ProbeLimits
    thresholds: Thresholds
    include_stream: bool
    full_readiness: bool
    semaphore: asyncio.Semaphore
    previous_scrapes: Mapping[int, Scrape] = field(default_factory=dict)
    gpu_backends: Mapping[int, NvmlBackend | None] = field(default_factory=dict)
    instance_gpus: Mapping[int, Sequence[Mapping[str, Any]]] = field(default_factory=dict)

    async def probe(self, target: ProbeTarget) -> InstanceProbe:
        async with self.semaphore:
            if self.client is not None:
                return await self._probe(self.client, target)
            async with make_instance_client(limits=self.limits) as client:
                return await self._probe(client, target)

    async def _probe(self, client: httpx.AsyncClient, target: ProbeTarget) -> InstanceProbe:
        return await probe_instance(
            client=client,
            target=target,
            previous_scrape=self.previous_scrapes.get(target.instance_id),
            limits=self.limits,
            thresholds=self.thresholds,
            include_stream=self.include_stream,
            full_readiness=self.full_readiness,
            gpu_backend=self.gpu_backends.get(target.instance_id),
            instance_gpus=self.instance_gpus.get(target.instance_id, ()),
        )


async def probe_many(
    *,
    targets: Sequence[ProbeTarget],
    previous_scrapes: Mapping[int, Scrape],
    limits: ProbeLimits,
    thresholds: Thresholds,
    concurrency: int = 100,
    include_stream: bool = True,
    full_readiness: bool = True,
    gpu_backends: Mapping[int, NvmlBackend | None] | None = None,
    instance_gpus: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
    client: httpx.AsyncClient | None = None,
) -> list[InstanceProbe]:
    """Probe every target, at most `concurrency` at once, each over its own small client
    (or all over `client` when one is given). Results come back in the order of
    `targets`; the maps are keyed by instance_id."""
    sweep = _Sweep(
        client=client,
        limits=limits,
        thresholds=thresholds,
        include_stream=include_stream,
        full_readiness=full_readiness,
        semaphore=asyncio.Semaphore(max(1, concurrency)),
        previous_scrapes=previous_scrapes,
        gpu_backends=gpu_backends or {},
        instance_gpus=instance_gpus or {},
    )
    return list(await asyncio.gather(*(sweep.probe(t) for t in targets)))
