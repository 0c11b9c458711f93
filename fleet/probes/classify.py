"""From probe results to findings and a verdict, by the guide's rules (chapter 2.2).

Each finding names its category in the guide's taxonomy (2.1), a severity and the
evidence with the numbers filled in ("TTFB 7.2 s > 5 s, so TTFT"). The corrections of
docs/guide-corrections.md apply: high KV-cache usage alone is only informational (#11);
thermal trouble is judged by NVML's throttle reasons, the temperature is a hint (#10); vLLM
never sends 429 itself (#8); failures are finished_reason abort|error, not
request_failure_total (#5).
Severity "info" findings are shown but do not change the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.i18n import Message, later
from fleet.probes.engines import EngineDialect, dialect_for
from fleet.probes.findings import SEVERITY_RANK, Category, Finding, Severity, Thresholds
from fleet.probes.gpu import GpuProbeResult
from fleet.probes.gpu_rules import gpu_findings
from fleet.probes.metric_rules import metric_findings, scrape_findings
from fleet.probes.network_rules import connection_finding, status_finding
from fleet.probes.parts import ALL_KINDS, kind_of_source
from fleet.probes.phases import PhaseResult
from fleet.probes.readiness import ReadinessResult, RouteCheck
from fleet.probes.scrape import ScrapeResult
from fleet.probes.streaming import StreamResult
from fleet.probes.target import ProbeTarget

__all__ = [
    "Category",
    "Classification",
    "Finding",
    "StateStep",
    "Thresholds",
    "classify",
    "next_state",
    "verdict_of",
]


@dataclass(frozen=True, kw_only=True)
class Classification:
    verdict: Literal["up", "degraded", "down"]  # of the findings; the state adds "failing"
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "findings": [f.to_dict() for f in self.findings]}


def _dead_status(target: ProbeTarget, readiness: ReadinessResult) -> int | None:
    """The status the engine's /health answers once its engine core died, by its dialect
    and the version the server reports (vLLM 500 up to 0.10 and 503 from 0.11, vllm#24897;
    TGI 503); None for an engine without one (Ollama)."""
    version = (readiness.version or target.engine_version or "").strip()
    return dialect_for(target.engine).dead_health_status(version)


def _engine_dead(
    readiness: ReadinessResult, check: RouteCheck, target: ProbeTarget, phases: PhaseResult | None
) -> bool:
    """/health answers the engine's dead status and a generation fails the way the engine
    fails it while dead (vLLM 500, TGI 424), or was not tried: a plain 500 or 503 from
    something else is a server error, not a dead engine."""
    dead_status = _dead_status(target, readiness)
    if dead_status is None or check.outcome != "bad_status" or check.status != dead_status:
        return False
    generated = phases is not None and phases.method == "POST"
    return not generated or phases.status in dialect_for(target.engine).failed_generation_statuses


def _readiness(
    readiness: ReadinessResult | None,
    target: ProbeTarget,
    gpus: GpuProbeResult | None,
    indices: Sequence[int] | None,
    phases: PhaseResult | None = None,
) -> list[Finding]:
    if readiness is None:
        return []
    dialect, found = dialect_for(target.engine), []
    for check in readiness.checks:
        if check.outcome == "ok" or check.path in dialect.informative_paths:
            continue
        made = connection_finding(
            check.outcome,
            where=check.path,
            error=check.error,
            target=target,
            source="readiness",
            gpus=gpus,
            indices=indices,
        )
        health = check is readiness.checks[0]
        dead = health and _engine_dead(readiness, check, target, phases)
        found.append(made or _readiness_failure(readiness, check, health=health, dead=dead, dialect=dialect))
        if health:
            break  # with the health route failing, the other routes' failures add nothing
    if readiness.model_mismatch:
        name, listed = repr(target.served_model_name), ", ".join(readiness.models)
        evidence = (
            later(
                "served_model_name %(name)s is not among the models the server lists (%(listed)s): "
                "requests for it get 404",
                name=name,
                listed=listed,
            )
            if listed
            else later(
                "served_model_name %(name)s is not among the models the server lists (none): "
                "requests for it get 404",
                name=name,
            )
        )
        found.append(
            Finding(
                code="model.mismatch",
                category=Category.MODEL_MISMATCH,
                severity="down",
                source="readiness",
                evidence=evidence,
            )
        )
    return found + _version(readiness, target)


def _readiness_failure(
    readiness: ReadinessResult,
    check: RouteCheck,
    *,
    health: bool,
    dialect: EngineDialect,
    dead: bool = False,
) -> Finding:
    """A failed readiness route: a hung or dead health route is down, the rest degraded."""
    path, outcome, status, error = check.path, check.outcome, check.status, check.error

    def make(code: str, category: str, severity: Severity, evidence: Message) -> Finding:
        return Finding(code=code, category=category, severity=severity, evidence=evidence, source="readiness")

    if outcome == "read_timeout" and health:
        return make(
            "health.timeout",
            Category.UNRESPONSIVE,
            "down",
            later(
                "%(path)s accepted the connection but did not answer in %(s).1f s: %(meaning)s",
                path=path,
                s=check.elapsed_s,
                meaning=later(dialect.hung_health_meaning),
            ),
        )
    if dead:
        return make(
            "engine.dead",
            Category.ENGINE_DEAD,
            "down",
            later(
                "%(path)s returned %(status)s: the engine is dead (%(note)s)",
                path=path,
                status=status,
                note=later(dialect.dead_health_note),
            ),
        )
    if outcome == "bad_status" and status is not None and status >= 500 and health:
        return make(
            f"health.http_{status}",
            Category.SERVER_ERROR,
            "down",
            later(
                "%(path)s returned %(status)s: the server reports itself unhealthy (%(detail)s)",
                path=path,
                status=status,
                detail=error or later("no detail"),
            ),
        )
    if outcome == "bad_status" and status in (401, 403):
        return make(
            "auth.rejected",
            Category.CLIENT,
            "degraded",
            later(
                "%(path)s answered %(status)s: the API key (from the inventory's variable) is missing "
                "or wrong",
                path=path,
                status=status,
            ),
        )
    if outcome == "garbage":
        return make("readiness.garbage", Category.GARBAGE, "degraded", _failed(path, error))
    return make(f"readiness.{outcome}", Category.PROBE_ERROR, "degraded", _failed(path, error or outcome))


def _failed(path: str | Message, error: str) -> Message:
    """A request that failed, by its path (or what it was) and the error it got."""
    return later("%(path)s: %(error)s", path=path, error=error)


def _version(readiness: ReadinessResult, target: ProbeTarget) -> list[Finding]:
    wanted, seen = target.engine_version.strip(), (readiness.version or "").strip()
    if not wanted or not seen or seen.startswith(wanted):
        return []
    return [
        Finding(
            code="version.mismatch",
            category=Category.VERSION_MISMATCH,
            severity="info",
            source="readiness",
            evidence=later(
                "The inventory says %(engine)s %(wanted)s but the server reports %(seen)s; metric names "
                "are read by what the server really runs",
                engine=target.engine,
                wanted=wanted,
                seen=seen,
            ),
        )
    ]


def _phases(phases: PhaseResult | None, target: ProbeTarget, th: Thresholds) -> list[Finding]:
    if phases is None:
        return []
    path = phases.url.removeprefix(target.base_url.rstrip("/")) or phases.url
    if phases.outcome != "ok":
        return [_request_failure(phases, path=path, target=target, source="phases")]
    found = []
    if phases.connect_s is not None and phases.connect_s > th.connect_s:
        found.append(
            Finding(
                code="connect.slow",
                category=Category.NETWORK,
                severity="degraded",
                source="phases",
                evidence=later(
                    "Connect %(s).2f s > %(limit)g s, so the network", s=phases.connect_s, limit=th.connect_s
                ),
            )
        )
    if phases.ttfb_s is not None and phases.ttfb_s > th.ttfb_s:
        found.append(
            Finding(
                code="ttfb.slow",
                category=Category.TTFT,
                severity="degraded",
                source="phases",
                evidence=later(
                    "TTFB %(s).1f s > %(limit)g s on %(path)s, so TTFT",
                    s=phases.ttfb_s,
                    limit=th.ttfb_s,
                    path=path,
                ),
            )
        )
    gap = phases.decode_gap_s
    if gap is not None and gap > th.decode_gap_s:
        found.append(
            Finding(
                code="decode.slow",
                category=Category.TPS,
                severity="degraded",
                source="phases",
                evidence=later(
                    "Total − TTFB %(s).1f s > %(limit)g s on %(path)s, so TPS",
                    s=gap,
                    limit=th.decode_gap_s,
                    path=path,
                ),
            )
        )
    return found


def _request_failure(
    result: PhaseResult | StreamResult, *, path: str | Message, target: ProbeTarget, source: str
) -> Finding:
    """A failed generation request: its connection, its HTTP status, or a timeout."""
    outcome, error = result.outcome, result.error
    made = connection_finding(outcome, where=path, error=error, target=target, source=source)
    if made:
        return made
    if outcome == "bad_status":
        return status_finding(
            status=result.status,
            path=path,
            error=error,
            server=result.server,
            retry_after=result.retry_after,
            engine=target.engine,
            source=source,
        )
    if outcome == "read_timeout":
        return Finding(
            code=f"{source}.timeout",
            category=Category.TTFT,
            severity="degraded",
            source=source,
            evidence=later(
                "%(path)s sent no answer in time (%(error)s): queueing, a long prefill or a stalled "
                "engine (TTFT)",
                path=path,
                error=error,
            ),
        )
    category = Category.GARBAGE if outcome == "garbage" else Category.PROBE_ERROR
    return Finding(
        code=f"{source}.{outcome}",
        category=category,
        severity="degraded",
        source=source,
        evidence=_failed(path, error or outcome),
    )


def _stream(stream: StreamResult | None, target: ProbeTarget, th: Thresholds) -> list[Finding]:
    if stream is None:
        return []
    if stream.outcome == "read_timeout":
        return [_stream_timeout(stream)]
    if stream.outcome != "ok":
        return [_request_failure(stream, path=later("the stream probe"), target=target, source="stream")]
    return _stream_timing(stream, th)


def _stream_timeout(stream: StreamResult) -> Finding:
    if not stream.token_events:
        return Finding(
            code="stream.no_first_token",
            category=Category.TTFT,
            severity="degraded",
            source="stream",
            evidence=later(
                "No first token before the stream probe timed out (%(error)s), so TTFT", error=stream.error
            ),
        )
    return Finding(
        code="stream.stalled",
        category=Category.TPS,
        severity="degraded",
        source="stream",
        evidence=later(
            "The stream stalled after %(tokens)s tokens (%(error)s), so TPS",
            tokens=stream.token_events,
            error=stream.error,
        ),
    )


def _stream_timing(stream: StreamResult, th: Thresholds) -> list[Finding]:
    found = []
    if stream.ttft_s is not None and stream.ttft_s > th.ttfb_s:
        found.append(
            Finding(
                code="ttft.slow",
                category=Category.TTFT,
                severity="degraded",
                source="stream",
                evidence=later(
                    "TTFT %(s).1f s > %(limit)g s in the stream probe, so TTFT",
                    s=stream.ttft_s,
                    limit=th.ttfb_s,
                ),
            )
        )
    if (
        stream.total_s is not None
        and stream.ttft_s is not None
        and stream.total_s - stream.ttft_s > th.decode_gap_s
    ):
        values = {
            "s": stream.total_s - stream.ttft_s,
            "limit": th.decode_gap_s,
            "tokens": stream.completion_tokens,
        }
        evidence = (
            later(
                "Total − TTFT %(s).1f s > %(limit)g s for %(tokens)s tokens (%(rate).1f tokens/s), so TPS",
                rate=stream.output_tokens_per_s,
                **values,
            )
            if stream.output_tokens_per_s
            else later("Total − TTFT %(s).1f s > %(limit)g s for %(tokens)s tokens, so TPS", **values)
        )
        found.append(
            Finding(
                code="tps.slow",
                category=Category.TPS,
                severity="degraded",
                source="stream",
                evidence=evidence,
            )
        )
    return found


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    kept: dict[str, Finding] = {}
    for finding in findings:
        old = kept.get(finding.code)
        if old is None or SEVERITY_RANK[finding.severity] < SEVERITY_RANK[old.severity]:
            kept[finding.code] = finding
    return sorted(kept.values(), key=lambda f: SEVERITY_RANK[f.severity])


def verdict_of(findings: Sequence[Finding]) -> Literal["up", "degraded", "down"]:
    severities = {f.severity for f in findings}
    return "down" if "down" in severities else "degraded" if "degraded" in severities else "up"


def classify(
    *,
    readiness: ReadinessResult | None,
    phases: PhaseResult | None,
    stream: StreamResult | None,
    derived: Mapping[str, float],
    gpus: GpuProbeResult | None,
    target: ProbeTarget,
    thresholds: Thresholds,
    scrape: ScrapeResult | None = None,
    numa: Sequence[str] = (),
    gpu_indices: Sequence[int] | None = None,
) -> Classification:
    """All findings of one probe, most severe first, and the verdict: down if any finding
    is "down", degraded if any is "degraded", else up. gpu_indices limits the GPU rules to
    the instance's GPUs (all GPUs of the reading when None)."""
    found = [
        *_readiness(readiness, target, gpus, gpu_indices, phases),
        *_phases(phases, target, thresholds),
        *_stream(stream, target, thresholds),
        *scrape_findings(scrape),
        *metric_findings(derived, target, thresholds, info=scrape.info if scrape is not None else None),
    ]
    found += gpu_findings(gpus, gpu_indices, thresholds, numa, busy=found)
    findings = _dedupe(found)
    return Classification(verdict=verdict_of(findings), findings=tuple(findings))


@dataclass(frozen=True, kw_only=True)
class StateStep:
    """An instance's state after one probe run."""

    verdict: str
    failures: dict[str, int]  # per probe kind: its failed runs in a row (zeros left out)
    pending: int = 0  # failed runs in a row of a failure not yet counted N times


def next_state(
    *,
    previous_state: str,
    failures: Mapping[str, int],
    classification: Classification,
    thresholds: Thresholds,
    measured: Iterable[str] = ALL_KINDS,
) -> StateStep:
    """The instance's state after a run of the probe kinds in `measured`.

    A run of a kind fails when a "down" finding comes from it; each kind counts its own
    failed runs in a row, and a run without such a finding resets its count. A down
    finding makes the instance "failing" at once (amber: never green while a failure is
    seen) and "down" once its kind has failed `down_after_failures` runs in a row; a
    down instance stays down while the failure lasts. Degraded is a state of its own,
    never a failure."""
    failing = {kind_of_source(f.source) for f in classification.findings if f.severity == "down"}
    counts = dict(failures)
    for kind in measured:
        counts[kind] = counts.get(kind, 0) + 1 if kind in failing else 0
    counts = {kind: n for kind, n in counts.items() if n}
    if classification.verdict != "down" or not failing:
        return StateStep(verdict=classification.verdict, failures=counts)
    if previous_state == "down" or any(
        counts.get(kind, 0) >= thresholds.down_after_failures for kind in failing
    ):
        return StateStep(verdict="down", failures=counts, pending=0)
    return StateStep(verdict="failing", failures=counts, pending=max(counts.get(k, 0) for k in failing))
