"""Judging one instance: the one place its findings and verdict are decided.

The probes only measure (fleet.probes.instance_probe). The judgement reads the latest
result of every probe kind together (`ProbeParts`: fresh for the kinds just measured,
stored for the others) with the instance's GPUs and its usual figures (`baselines`), and
returns the findings and the verdict. Besides the per-kind rules of fleet.probes.classify
it holds the rules that need more than one kind:

- hung but healthy: /health answers 200, the engine generates no token with requests
  running or waiting, and no probe of ours got a token either (vLLM issues #39863 and
  #36451: replicas dead for hours behind a green health check);
- a generation-speed drop against the instance's own usual tokens/s per request (a TPS
  finding), read from the engine's inter-token latency (thousands of tokens a window,
  compared at a similar batch size) and, for engines without /metrics (Ollama), from our
  stream probe, with throttling named as its cause when NVML shows throttle reasons;
- a prefix-cache hit rate collapsing against the instance's usual rate while prompts keep
  being looked up (requests sharing a prefix no longer reach this replica: a routing change);
- a sleeping engine (vllm:engine_sleep_state) is not down: generation is paused on purpose,
  so what follows from it (no token, a stalled stream, requests waiting, no engine step) is
  kept as information and pages nobody; the server's own health (its /health, its port,
  its model list) and its GPUs are still judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.i18n import Message, later
from fleet.probes.classify import Classification, classify, verdict_of
from fleet.probes.findings import SEVERITY_RANK, Category, Finding, Thresholds
from fleet.probes.gpu import numa_messages
from fleet.probes.metric_rules import asleep, waiting_for_capacity
from fleet.probes.outcomes import Outcome, describe_exception
from fleet.probes.parts import ProbeParts
from fleet.probes.phases import PhaseResult
from fleet.probes.target import ProbeTarget
from fleet.probes.ttft_breakdown import TtftInputs, inputs_from_results, split

THROTTLING_CODES = frozenset({"gpu.thermal", "gpu.power_brake"})
BASELINE_WEIGHT = 0.2  # the share of a new healthy measurement in the usual tokens/s
# Healthy measurements before a drop can be judged: an engine window holds thousands of
# tokens, a stream of ours a dozen.
BASELINE_MIN_SAMPLES = {"engine_tps": 2, "stream_tps": 3}
# Slow measurements in a row that make a drop: the engine's window holds thousands of
# tokens, one stream of ours a dozen (a busy probe host alone can halve it).
SLOW_IN_A_ROW = {"engine_tps": 1, "stream_tps": 2}
# The usual prefix-cache hit rate: windows learnt before a collapse is judged, and the
# collapsed windows in a row after which the low rate is the instance's new normal (a
# routing change made on purpose; at the default 15 s metrics interval, five minutes).
PREFIX_KEY = "prefix_hit_rate"
PREFIX_MIN_SAMPLES = 3
PREFIX_RELEARN_AFTER = 20
# Findings a sleeping engine still gets as they are: the server's reachability, its model
# list and what its own /health and /metrics say, which sleep does not change.
KEPT_WHILE_ASLEEP = frozenset(
    {
        Category.TLS,
        Category.CONNECT,
        Category.NETWORK,
        Category.NOT_LISTENING,
        Category.UNRESPONSIVE,
        Category.ENGINE_DEAD,
        Category.MODEL_MISMATCH,
        Category.CLIENT,
        Category.HTTP_429,
        Category.GARBAGE,
        Category.METRICS,
    }
)


@dataclass(frozen=True, kw_only=True)
class Judgement:
    classification: Classification
    numa: tuple[Message, ...] = ()
    baselines: Mapping[str, Any] | None = None  # updated usual figures; None: unchanged


def judge(
    *,
    target: ProbeTarget,
    parts: ProbeParts,
    thresholds: Thresholds,
    instance_gpus: Sequence[Mapping[str, Any]] = (),
    baselines: Mapping[str, Any] | None = None,
    fresh: frozenset[str] = frozenset(),
) -> Judgement:
    """The findings and verdict of one instance from its latest results. `fresh` names the
    kinds just measured: only a fresh measurement moves the usual generation speed. A bug
    in the rules becomes a finding instead of losing the probe's measurements."""
    try:
        return _judge(target, parts, thresholds, instance_gpus, baselines or {}, fresh)
    except Exception as exc:
        finding = Finding(
            code="probe.bug",
            category=Category.PROBE_ERROR,
            severity="degraded",
            source="classify",
            evidence=later("the probe's rules failed: %(error)s", error=describe_exception(exc)),
        )
        return Judgement(classification=Classification(verdict="degraded", findings=(finding,)))


def _judge(target, parts, thresholds, instance_gpus, baselines, fresh) -> Judgement:  # noqa: ANN001
    gpus = parts.gpus
    indices = [int(g["index"]) for g in instance_gpus] or None
    numa = tuple(numa_messages(instance_gpus=instance_gpus, reading=gpus.reading if gpus else None))
    base = classify(
        readiness=parts.readiness,
        phases=parts.phases,
        stream=parts.stream,
        derived=parts.derived,
        gpus=gpus,
        target=target,
        thresholds=thresholds,
        scrape=parts.scrape_result,
        numa=numa,
        gpu_indices=indices,
    )
    found = list(base.findings)
    hung = hung_but_healthy(parts, thresholds)
    if hung is not None:
        found = [f for f in found if f.code not in ("stream.no_first_token",)] + [hung]
    drop = tps_drop(parts, baselines, thresholds, found, fresh)
    if drop is not None:
        found.append(drop)
    collapse = prefix_cache_collapse(parts, baselines, thresholds, fresh)
    if collapse is not None:
        found.append(collapse)
    found = set_aside_while_asleep(found, parts)
    found = with_ttft_breakdown(found, target, parts)
    found.sort(key=lambda f: SEVERITY_RANK[f.severity])
    key, _ = _rates(parts)
    measured = _measure_kind(key) in fresh
    usual = updated_baselines(parts, baselines, thresholds) if measured else None
    if "metrics" in fresh:
        usual = (
            updated_prefix_baselines(parts, usual if usual is not None else baselines, thresholds) or usual
        )
    return Judgement(
        classification=Classification(verdict=verdict_of(found), findings=tuple(found)),
        numa=numa,
        baselines=usual,
    )


def _got_a_token(parts: ProbeParts) -> bool:
    stream, phases = parts.stream, parts.phases
    streamed = stream is not None and (stream.outcome == "ok" or stream.token_events > 0)
    generated = phases is not None and phases.outcome == "ok" and phases.method == "POST"
    return streamed or generated


def _our_requests_got_nothing(parts: ProbeParts) -> bool:
    """Our own generation requests (the stream, the one-token request) timed out with no
    token, and at least one of them was tried."""
    stream, phases = parts.stream, parts.phases
    tried = [r for r in (stream, phases if phases and phases.method == "POST" else None) if r]
    return bool(tried) and all(r.outcome == "read_timeout" for r in tried) and not _got_a_token(parts)


def hung_but_healthy(parts: ProbeParts, th: Thresholds) -> Finding | None:
    """/health 200 while the engine processes nothing over the metrics window (no engine
    step, or no prompt or output token where steps are not exported), with requests
    running or waiting or our own requests getting no token: the engine is hung. With the
    KV cache full the same standstill is requests waiting for KV blocks, which the KV
    finding names instead; a slow prefill still steps, so it is not a hang."""
    readiness, d = parts.readiness, parts.derived
    if readiness is None or not readiness.healthy or "generation_tokens_per_s" not in d or asleep(d):
        return None  # asleep: generating nothing is what a sleeping engine does
    if d.get("kv_cache_usage", 0.0) > th.kv_cache_usage or _got_a_token(parts):
        return None  # a full KV cache explains a standstill better: its finding says so
    if "scheduled_tokens_per_s" in d:
        processed = d["scheduled_tokens_per_s"]
    else:
        processed = d.get("generation_tokens_per_s", 0.0) + d.get("prompt_tokens_per_s", 0.0)
    # Deferred requests wait for a LoRA slot or a KV transfer, not for this engine's steps.
    running, waiting = d.get("num_requests_running", 0.0), waiting_for_capacity(d) or 0.0
    if processed > 0 or (running + waiting <= 0 and not _our_requests_got_nothing(parts)):
        return None
    stream = parts.stream
    values = {"path": "/health", "window": d.get("window_s", 0), "running": running, "waiting": waiting}
    evidence = (
        later(
            "%(path)s answers 200, but the engine processed no token in %(window).0f s with %(running)g "
            "running and %(waiting)g waiting; the stream probe got no first token (%(error)s): the "
            "engine is hung behind a healthy health check (restart it)",
            error=stream.error or stream.outcome,
            **values,
        )
        if stream is not None and stream.outcome != "ok"
        else later(
            "%(path)s answers 200, but the engine processed no token in %(window).0f s with %(running)g "
            "running and %(waiting)g waiting: the engine is hung behind a healthy health check "
            "(restart it)",
            **values,
        )
    )
    return Finding(
        code="engine.hung", category=Category.HUNG, severity="down", source="metrics", evidence=evidence
    )


def _stream_tps(parts: ProbeParts) -> float | None:
    stream = parts.stream
    if stream is None or stream.outcome != "ok" or not stream.output_tokens_per_s:
        return None
    return float(stream.output_tokens_per_s)


def _engine_tps(parts: ProbeParts) -> float | None:
    """Tokens/s per request from the engine's own inter-token latency over the metrics
    window: thousands of tokens, so steadier than one short stream of ours."""
    itl = parts.derived.get("itl_mean_s")
    return 1.0 / itl if itl and itl > 0 else None


def _batch_band(running: float) -> int:
    """The power of two at or below the running requests: 1, 2, 4, 8, ..."""
    return 1 << max(0, int(running).bit_length() - 1) if running >= 1 else 1


def _rates(parts: ProbeParts) -> tuple[str, float | None]:
    """The generation speed to judge and the baseline key it is kept under: the engine's
    where it exports inter-token latency, else the stream probe's (Ollama, TGI without it).
    The engine's per-request speed falls as the batch grows (each step reads every
    sequence's KV), so it is compared with the usual speed at a similar batch size."""
    engine = _engine_tps(parts)
    if engine is not None or "itl_mean_s" in parts.derived:
        band = _batch_band(parts.derived.get("num_requests_running", 0.0))
        return f"engine_tps@{band}", engine
    if parts.scrape_result is not None and parts.scrape_result.supported:
        return "engine_tps@1", None  # an engine with metrics, unread now: no judgement
    return "stream_tps", _stream_tps(parts)


def _family(key: str) -> str:
    return key.split("@", 1)[0]


DROPPING = "engine_tps_dropping"  # the usual speed a drop is measured against, while it lasts


def _usual(key: str, baselines: Mapping[str, Any]) -> float | None:
    """The usual speed to compare with: the key's own once it has enough samples; for an
    engine whose slowdown pushed the batch into a size it has never run at, the usual
    speed the drop was first seen against (a slow engine's growing batch is no new normal)."""
    if baselines.get(f"{key}_n", 0) >= BASELINE_MIN_SAMPLES[_family(key)]:
        return baselines.get(key)
    return baselines.get(DROPPING) if _family(key) == "engine_tps" else None


def _slow(key: str, rate: float | None, baselines: Mapping[str, Any], th: Thresholds) -> bool:
    usual = _usual(key, baselines)
    if rate is None or not usual:
        return False
    return rate < usual * (1 - th.tps_drop_ratio)


def _measure_kind(key: str) -> str:
    return {"engine_tps": "metrics", "stream_tps": "stream"}[_family(key)]


def tps_drop(
    parts: ProbeParts,
    baselines: Mapping[str, Any],
    th: Thresholds,
    found: Sequence[Finding],
    fresh: frozenset[str] = frozenset(),
) -> Finding | None:
    """Generation (tokens/s per request) below (1 - tps_drop_ratio) of the instance's usual
    rate, with the GPUs' throttling named as the cause when NVML reports it."""
    key, rate = _rates(parts)
    if not _slow(key, rate, baselines, th):
        return None
    # a fresh slow measurement adds itself; a stored one was counted when it was fresh
    in_a_row = baselines.get(f"{key}_slow", 0) + (1 if _measure_kind(key) in fresh else 0)
    continuing = _family(key) == "engine_tps" and bool(baselines.get(DROPPING))
    if in_a_row < SLOW_IN_A_ROW[_family(key)] and not continuing:
        return None
    usual = _usual(key, baselines) or 0.0
    throttled = [f for f in found if f.code in THROTTLING_CODES]
    cause = (
        later("the cause: %(evidence)s", evidence=throttled[0].message or throttled[0].evidence)
        if throttled
        else later("NVML shows no throttling: look at the batch size, preemptions and the context")
    )
    engine = _family(key) == "engine_tps"
    where = (
        later("the engine's inter-token latency at a batch of %(batch)s+", batch=key.split("@")[1])
        if engine
        else later("the stream probe")
    )
    return Finding(
        code="tps.drop",
        category=Category.TPS,
        severity="degraded",
        source="metrics" if engine else "stream",
        evidence=later(
            "Generation at %(rate).1f tokens/s per request against a usual %(usual).1f (%(change)+.0f%%, "
            "by %(where)s), so TPS; %(cause)s",
            rate=rate,
            usual=usual,
            change=100 * (rate / usual - 1),
            where=where,
            cause=cause,
        ),
    )


def updated_baselines(
    parts: ProbeParts, baselines: Mapping[str, Any], th: Thresholds | None = None
) -> dict[str, Any] | None:
    """After a fresh measurement: a slow one counts towards a drop and leaves the usual
    speed alone; a healthy one moves the usual speed towards it (an EWMA) and, for the
    engine, ends a drop. A batch size never seen is learnt only while no drop lasts."""
    key, rate = _rates(parts)
    if rate is None:
        return None
    th = th or Thresholds()
    engine = _family(key) == "engine_tps"
    if _slow(key, rate, baselines, th):
        slow = int(baselines.get(f"{key}_slow", 0)) + 1
        found = dict(baselines) | {f"{key}_slow": slow}
        if engine and slow >= SLOW_IN_A_ROW["engine_tps"] and not baselines.get(DROPPING):
            found[DROPPING] = _usual(key, baselines)
        return found
    known = baselines.get(f"{key}_n", 0) >= BASELINE_MIN_SAMPLES[_family(key)]
    if engine and baselines.get(DROPPING) and not known:
        return None  # a new batch size while slow: neither learnt nor the end of the drop
    n, usual = int(baselines.get(f"{key}_n", 0)), baselines.get(key)
    value = rate if not usual else (1 - BASELINE_WEIGHT) * float(usual) + BASELINE_WEIGHT * rate
    found = dict(baselines) | {key: round(value, 3), f"{key}_n": n + 1, f"{key}_slow": 0}
    if engine:
        found.pop(DROPPING, None)
    return found


def set_aside_while_asleep(found: Sequence[Finding], parts: ProbeParts) -> list[Finding]:
    """While the engine sleeps, the findings of its paused generation (from the stream, the
    one-token request and the metrics: no token, timeouts, requests waiting, errors of
    requests sent to a sleeping engine) are kept as information, saying why; the findings
    sleep does not explain (KEPT_WHILE_ASLEEP) and those of /health and the GPUs stay."""
    if not asleep(parts.derived):
        return list(found)
    generated = parts.phases is not None and parts.phases.method == "POST"
    kept = []
    for finding in found:
        paused = (
            finding.severity != "info"
            and finding.category not in KEPT_WHILE_ASLEEP
            and (finding.source in ("stream", "metrics") or (finding.source == "phases" and generated))
        )
        if paused:
            finding = replace(
                finding,
                severity="info",
                evidence=later(
                    "%(evidence)s (not judged: the engine is asleep, so generation is paused)",
                    evidence=finding.message or finding.evidence,
                ),
            )
        kept.append(finding)
    return kept


def _prefix_window(parts: ProbeParts, th: Thresholds) -> tuple[float, float] | None:
    """(this window's prefix-cache hit rate, the prompt tokens looked up in it) when the
    window looked up enough tokens to judge (vLLM's counters; SGLang's gauge is the last
    batch's rate, too noisy to judge); None otherwise, and while the engine sleeps."""
    d = parts.derived
    rate = d.get("prefix_cache_hit_rate")
    queried = d.get("prefix_cache_queries_per_s", 0.0) * d.get("window_s", 0.0)
    if rate is None or queried < th.prefix_min_queried_tokens or asleep(d):
        return None
    return rate, queried


def _usual_prefix(baselines: Mapping[str, Any], th: Thresholds) -> float | None:
    """The usual hit rate worth comparing with: learnt over enough windows, and high enough
    to lose (a cache that hits 5 % of prompts has little to lose)."""
    usual = baselines.get(PREFIX_KEY)
    if baselines.get(f"{PREFIX_KEY}_n", 0) < PREFIX_MIN_SAMPLES or not usual:
        return None
    return float(usual) if usual >= th.prefix_min_usual_hit_rate else None


def _collapsed(rate: float, usual: float | None, th: Thresholds) -> bool:
    return usual is not None and rate < usual * th.prefix_hit_collapse_ratio


def prefix_cache_collapse(
    parts: ProbeParts, baselines: Mapping[str, Any], th: Thresholds, fresh: frozenset[str] = frozenset()
) -> Finding | None:
    """The prefix-cache hit rate of this window far below the instance's usual rate while
    prompts keep being looked up: requests that share a prefix (a system prompt, a
    conversation's earlier turns) no longer reach the replica that caches it. A collapse
    lasting PREFIX_RELEARN_AFTER windows is the new normal and is no longer reported."""
    window = _prefix_window(parts, th)
    if window is None:
        return None
    rate, queried = window
    usual = _usual_prefix(baselines, th)
    in_a_row = baselines.get(f"{PREFIX_KEY}_low", 0) + (1 if "metrics" in fresh else 0)
    if not _collapsed(rate, usual, th) or in_a_row > PREFIX_RELEARN_AFTER:
        return None
    return Finding(
        code="prefix_cache.collapse",
        category=Category.PREFIX_CACHE,
        severity="degraded",
        source="metrics",
        evidence=later(
            "Prefix-cache hit rate %(rate).0f%% over the last %(window).0f s against a usual %(usual).0f%% "
            "(below %(limit).0f%% of it) with %(queried).0f prompt tokens looked up: requests that share "
            "a prefix no longer reach this replica, as after a routing change (a new load balancer, "
            "session affinity or prefix-aware routing turned off, replicas added); their prefill is "
            "recomputed, so TTFT rises",
            rate=100 * rate,
            window=parts.derived.get("window_s", 0.0),
            usual=100 * (usual or 0.0),
            limit=100 * th.prefix_hit_collapse_ratio,
            queried=queried,
        ),
    )


def updated_prefix_baselines(
    parts: ProbeParts, baselines: Mapping[str, Any], th: Thresholds | None = None
) -> dict[str, Any] | None:
    """After a fresh metrics window that looked up enough prompt tokens: a collapsed window
    counts towards the new normal and leaves the usual rate alone (until it has lasted
    PREFIX_RELEARN_AFTER windows: then the rate starts over from this window); any other
    moves the usual rate towards it (an EWMA). None when the window says nothing."""
    th = th or Thresholds()
    window = _prefix_window(parts, th)
    if window is None:
        return None
    rate = window[0]
    low = int(baselines.get(f"{PREFIX_KEY}_low", 0))
    if _collapsed(rate, _usual_prefix(baselines, th), th):
        if low + 1 <= PREFIX_RELEARN_AFTER:
            return dict(baselines) | {f"{PREFIX_KEY}_low": low + 1}
        # A collapse this long is the new normal: learn the rate afresh from here.
        return dict(baselines) | {PREFIX_KEY: round(rate, 4), f"{PREFIX_KEY}_n": 1, f"{PREFIX_KEY}_low": 0}
    n, usual = int(baselines.get(f"{PREFIX_KEY}_n", 0)), baselines.get(PREFIX_KEY)
    value = rate if usual is None else (1 - BASELINE_WEIGHT) * float(usual) + BASELINE_WEIGHT * rate
    return dict(baselines) | {PREFIX_KEY: round(value, 4), f"{PREFIX_KEY}_n": n + 1, f"{PREFIX_KEY}_low": 0}


def _answered_ttfb(phases: PhaseResult | None) -> float | None:
    return phases.ttfb_s if phases is not None and phases.outcome == Outcome.OK else None


def _unanswered(phases: PhaseResult | None) -> str:
    """Why a request got no answer ("" when it did, or was not sent)."""
    if phases is None or phases.outcome == Outcome.OK:
        return ""
    return (phases.error or str(phases.outcome))[:200]


def ttft_inputs_of(target: ProbeTarget, parts: ProbeParts) -> TtftInputs:
    """What the TTFT breakdown splits (fleet.probes.ttft_breakdown, docs/ttft-breakdown.md):
    the stream's TTFT, the health probe's phases direct and through the gateway, and the
    engine's queue and prefill times."""
    return inputs_from_results(
        phases=parts.phases.to_dict() if parts.phases else None,
        stream=parts.stream.to_dict() if parts.stream else None,
        derived=parts.derived,
        https=target.base_url.lower().startswith("https:"),
        gateway=target.gateway,
        ttft_through_gateway=target.through_gateway,
        gateway_ttfb_s=_answered_ttfb(parts.gateway_phases),
        direct_ttfb_s=_answered_ttfb(parts.phases) if parts.gateway_phases else None,
        gateway_error=_unanswered(parts.gateway_phases),
    )


def with_ttft_breakdown(found: Sequence[Finding], target: ProbeTarget, parts: ProbeParts) -> list[Finding]:
    """TTFT findings carry the breakdown in their evidence ("TTFB 7.2 s > 5 s, so TTFT; TTFT
    6.1 s: 4.8 s queued (waiting for capacity), 1.1 s prefill"), so the instance page, the
    incident's evidence and its notification all say where the time went."""
    if not any(f.category == Category.TTFT for f in found):
        return list(found)
    breakdown = split(ttft_inputs_of(target, parts))
    if not breakdown.available:
        return list(found)
    return [
        replace(
            f,
            evidence=later(
                "%(evidence)s; %(breakdown)s", evidence=f.message or f.evidence, breakdown=breakdown.sentence
            ),
        )
        if f.category == Category.TTFT
        else f
        for f in found
    ]
