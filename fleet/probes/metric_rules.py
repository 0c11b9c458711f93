"""Findings from an engine's metrics (derived over the window between two scrapes).

The guide's rules (2.2.2, 2.2.3, 5.3) with the corrections of docs/guide-corrections.md: KV-cache usage above
the threshold is informational unless requests wait or are preempted (#11: it is a
cache); preemptions are KV pressure, not an OOM (#3); swap exists only in 0.7 (#5); the
error ratio comes from request_success_total{finished_reason="abort"|"error"} (#5). An
engine with work queued but no tokens is judged with the other kinds (fleet.probes.judgement).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from core.i18n import Message, later
from fleet.probes.engines import dialect_for
from fleet.probes.findings import Category, Finding, Severity, Thresholds
from fleet.probes.scrape import ScrapeResult
from fleet.probes.target import ProbeTarget

Rule = Callable[[Mapping[str, float], ProbeTarget, Thresholds], Finding | None]


def _finding(code: str, category: str, evidence: Message, severity: Severity = "degraded") -> Finding:
    return Finding(code=code, category=category, severity=severity, evidence=evidence, source="metrics")


def _backlog(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    waiting = d.get("num_requests_waiting")
    if waiting is None or waiting <= th.waiting:
        return None
    return _finding(
        "queue.backlog",
        Category.QUEUE,
        later("%(waiting)g requests waiting > %(limit)g, so a backlog", waiting=waiting, limit=th.waiting),
    )


def _batch_full(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    running, limit = d.get("num_requests_running"), target.max_num_seqs
    if running is None or not limit or running < th.running_fraction * limit:
        return None
    return _finding(
        "batch.full",
        Category.QUEUE,
        later(
            "%(running)g running of max_num_seqs %(limit)s (%(share).0f%% ≥ %(threshold).0f%%), "
            "so the batch is full",
            running=running,
            limit=limit,
            share=100 * running / limit,
            threshold=100 * th.running_fraction,
        ),
    )


def _preempting(d: Mapping[str, float], th: Thresholds) -> bool:
    return d.get("preemptions_per_s", 0.0) > th.preemptions_per_s


def _preemptions(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    if not _preempting(d, th):
        return None
    return _finding(
        "kv.preemptions",
        Category.KV_PRESSURE,
        later(
            "%(rate).2f preemptions/s > %(limit)g: the KV cache is full and requests are recomputed "
            "(not an OOM)",
            rate=d["preemptions_per_s"],
            limit=th.preemptions_per_s,
        ),
    )


def kv_under_pressure(d: Mapping[str, float], th: Thresholds) -> bool:
    """The one KV rule (corrections #11): usage above the threshold AND requests waiting
    or preempted. High usage alone is the cache doing its job. The console's alert rule
    reads this finding, and the generated Prometheus rule encodes the same condition."""
    usage = d.get("kv_cache_usage")
    if usage is None or usage <= th.kv_cache_usage:
        return False
    return d.get("num_requests_waiting", 0.0) > th.kv_min_waiting or _preempting(d, th)


def _kv_usage(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    usage = d.get("kv_cache_usage")
    if usage is None or usage <= th.kv_cache_usage:
        return None
    waiting = d.get("num_requests_waiting", 0.0)
    if kv_under_pressure(d, th):
        return _finding(
            "kv.pressure",
            Category.KV_PRESSURE,
            later(
                "KV cache %(usage).0f%% used > %(limit).0f%% with %(waiting)g waiting and %(rate).2f "
                "preemptions/s: requests wait for KV blocks",
                usage=100 * usage,
                limit=100 * th.kv_cache_usage,
                waiting=waiting,
                rate=d.get("preemptions_per_s", 0.0),
            ),
        )
    return _finding(
        "kv.high",
        Category.KV_PRESSURE,
        later(
            "KV cache %(usage).0f%% used > %(limit).0f%%, with nothing waiting and nothing preempted: "
            "the cache is doing its job (not a fault)",
            usage=100 * usage,
            limit=100 * th.kv_cache_usage,
        ),
        "info",
    )


def _swap(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    cpu, swapped = d.get("cpu_cache_usage", 0.0), d.get("num_requests_swapped", 0.0)
    if cpu <= 0 and swapped <= 0:
        return None
    return _finding(
        "kv.swap",
        Category.TPS,
        later(
            "KV blocks swapped to CPU (cpu_cache_usage %(cpu).0f%%, %(swapped)g requests swapped), so TPS "
            "drops (vLLM 0.7 / V0 only)",
            cpu=100 * cpu,
            swapped=swapped,
        ),
    )


def _ttft_p95(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    p95 = d.get("ttft_p95_s")
    if p95 is None or p95 <= th.ttft_p95_s:
        return None
    return _finding(
        "ttft_p95.high",
        Category.TTFT,
        later(
            "TTFT p95 %(p95).2f s > %(limit)g s over the last %(window).0f s",
            p95=p95,
            limit=th.ttft_p95_s,
            window=d.get("window_s", 0),
        ),
    )


def _errors(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    errors, total = d.get("request_errors_per_s", 0.0), d.get("requests_per_s", 0.0)
    if errors <= 0 or total <= 0 or errors / total <= th.error_ratio:
        return None
    return _finding(
        "requests.failing",
        Category.REQUEST_ERRORS,
        later(
            "%(errors).2f of %(total).2f requests/s ended in abort or error (%(share).0f%% > %(limit).0f%%), "
            "by request_success_total's finished_reason",
            errors=errors,
            total=total,
            share=100 * errors / total,
            limit=100 * th.error_ratio,
        ),
    )


RULES: tuple[Rule, ...] = (
    _backlog,
    _batch_full,
    _preemptions,
    _kv_usage,
    _swap,
    _ttft_p95,
    _errors,
)


def metric_findings(
    derived: Mapping[str, float], target: ProbeTarget, thresholds: Thresholds
) -> list[Finding]:
    return [f for rule in RULES if (f := rule(derived, target, thresholds)) is not None]


def scrape_findings(scrape: ScrapeResult | None) -> list[Finding]:
    """The metrics themselves: unreadable, or readable with no engine series in them."""
    if scrape is None or not scrape.supported:
        return []
    if scrape.outcome != "ok":
        return [
            _finding(
                "metrics.unavailable",
                Category.METRICS,
                later("%(path)s: %(error)s", path="/metrics", error=scrape.error),
                "info",
            )
        ]
    if scrape.scrape is not None and scrape.scrape.empty:
        return [
            _finding(
                "metrics.missing",
                Category.METRICS,
                later(
                    "%(path)s has no engine series (%(why)s)",
                    path="/metrics",
                    why=later(dialect_for(scrape.scrape.engine).no_metric_series),
                ),
                "info",
            )
        ]
    return []
