"""Findings from an engine's metrics (derived over the window between two scrapes).

The guide's rules (2.2.2, 2.2.3, 5.3) with the corrections of docs/guide-corrections.md: KV-cache usage above
the threshold is informational unless requests wait or are preempted (#11: it is a
cache); preemptions are KV pressure, not an OOM (#3); swap exists only in 0.7 (#5); the
error ratio comes from request_success_total{finished_reason="abort"|"error"} (#5). An
engine with work queued but no tokens is judged with the other kinds (fleet.probes.judgement).

vLLM's newer metrics (docs/vllm-metrics-judgements.md): requests waiting with the reason
"deferred" are not overload, so the backlog and KV rules count the capacity waits where the
engine says why requests wait; a sleeping engine is said (its verdict is decided in
fleet.probes.judgement); speculative decoding that accepts too little to pay for its drafts;
LoRA adapters waiting with no slot for them. The prefix-cache collapse needs the instance's
usual hit rate and is judged in fleet.probes.judgement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from core.i18n import Message, later
from fleet.probes.engines import dialect_for
from fleet.probes.findings import Category, Finding, Severity, Thresholds
from fleet.probes.scrape import ScrapeResult
from fleet.probes.target import ProbeTarget

Rule = Callable[[Mapping[str, float], ProbeTarget, Thresholds], Finding | None]


def _finding(code: str, category: str, evidence: Message, severity: Severity = "degraded") -> Finding:
    return Finding(code=code, category=category, severity=severity, evidence=evidence, source="metrics")


def waiting_for_capacity(d: Mapping[str, float]) -> float | None:
    """The requests waiting for KV cache or batch room: vLLM's by-reason gauge's "capacity"
    where the engine exports it (requests "deferred" by the LoRA budget or a pending KV
    transfer are not overload), else every waiting request."""
    if "num_requests_waiting_capacity" in d:
        return d["num_requests_waiting_capacity"]
    return d.get("num_requests_waiting")


def _backlog(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    waiting = waiting_for_capacity(d)
    if waiting is None or waiting <= th.waiting:
        return None
    if "num_requests_waiting_capacity" in d:
        evidence = later(
            "%(waiting)g requests waiting for capacity > %(limit)g (and %(deferred)g deferred), so a backlog",
            waiting=waiting,
            limit=th.waiting,
            deferred=d.get("num_requests_waiting_deferred", 0.0),
        )
    else:
        evidence = later(
            "%(waiting)g requests waiting > %(limit)g, so a backlog", waiting=waiting, limit=th.waiting
        )
    return _finding("queue.backlog", Category.QUEUE, evidence)


def _deferred(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    deferred = d.get("num_requests_waiting_deferred", 0.0)
    if deferred <= 0:
        return None
    return _finding(
        "queue.deferred",
        Category.QUEUE,
        later(
            "%(deferred)g requests are deferred (held back by a transient constraint: the LoRA adapter "
            "budget or a KV transfer still pending) and %(capacity)g wait for capacity: deferred "
            "requests are not overload",
            deferred=deferred,
            capacity=d.get("num_requests_waiting_capacity", 0.0),
        ),
        "info",
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
    return (waiting_for_capacity(d) or 0.0) > th.kv_min_waiting or _preempting(d, th)


def _kv_usage(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    usage = d.get("kv_cache_usage")
    if usage is None or usage <= th.kv_cache_usage:
        return None
    waiting = waiting_for_capacity(d) or 0.0
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


def asleep(d: Mapping[str, float]) -> bool:
    """The engine reports itself asleep (vllm:engine_sleep_state, level 1 or 2)."""
    return d.get("engine_sleep_level", 0.0) > 0


def _asleep(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    if not asleep(d):
        return None
    level = int(d["engine_sleep_level"])
    meaning = (
        later("weights offloaded to CPU memory, KV cache discarded")
        if level == 1
        else later("weights and KV cache discarded")
    )
    return _finding(
        "engine.asleep",
        Category.ASLEEP,
        later(
            "Asleep (level %(level)s: %(meaning)s): the engine was put to sleep and generates nothing "
            "until it is woken (%(path)s); it is not down",
            level=level,
            meaning=meaning,
            path="/wake_up",
        ),
        "info",
    )


def spec_decode_speedup(d: Mapping[str, float], th: Thresholds) -> float | None:
    """The estimated speed with speculative decoding against without it: a step verifying
    k drafted tokens costs about 1 + k × spec_decode_token_cost of a plain decode step and
    yields 1 + a tokens (a accepted per draft, plus the bonus token every step makes).
    None where the window holds too few drafts to say."""
    drafts = d.get("spec_decode_drafts_per_s", 0.0) * d.get("window_s", 0.0)
    accepted, length = d.get("spec_decode_mean_accepted_tokens"), d.get("spec_decode_draft_length")
    if drafts < th.spec_decode_min_drafts or accepted is None or not length:
        return None
    return (1 + accepted) / (1 + length * th.spec_decode_token_cost)


def _spec_decode(d: Mapping[str, float], target: ProbeTarget, th: Thresholds) -> Finding | None:
    speedup = spec_decode_speedup(d, th)
    if speedup is None or speedup >= 1:
        return None
    length, accepted = d["spec_decode_draft_length"], d["spec_decode_mean_accepted_tokens"]
    return _finding(
        "spec_decode.costly",
        Category.SPEC_DECODE,
        later(
            "Speculative decoding accepts %(accepted).2f of %(drafted).1f drafted tokens per draft "
            "(%(rate).0f%%, mean acceptance length %(length).2f): at %(cost)g of a decode step per "
            "drafted token a step costs %(step).2f and yields %(tokens).2f tokens, about %(speedup).2f× "
            "the speed without it, so the drafts cost more than they save (below %(limit).0f%% "
            "acceptance); lower %(option)s, use a better draft, or turn it off",
            option="num_speculative_tokens",
            accepted=accepted,
            drafted=length,
            rate=100 * accepted / length,
            length=1 + accepted,
            cost=th.spec_decode_token_cost,
            step=1 + length * th.spec_decode_token_cost,
            tokens=1 + accepted,
            speedup=speedup,
            limit=100 * th.spec_decode_token_cost,
        ),
    )


def _lora_starving(
    d: Mapping[str, float], target: ProbeTarget, th: Thresholds, info: Mapping[str, Any]
) -> Finding | None:
    """Adapters with requests waiting and none of their requests running, while requests
    wait: with no adapter running (they are not being loaded), or with every max_lora slot
    taken by other adapters (too few slots for the adapters in use)."""
    starved, running = d.get("lora_starved_adapters", 0.0), d.get("lora_running_adapters", 0.0)
    slots, waiting = d.get("lora_max_adapters"), d.get("num_requests_waiting", 0.0)
    if starved <= 0 or waiting <= 0:
        return None
    names = str(info.get("lora_starved") or info.get("lora_waiting") or "?")
    if running <= 0:
        evidence = later(
            "LoRA adapters have requests waiting (%(names)s) but no adapter is running, with "
            "%(waiting)g requests waiting: the adapters are not being loaded (look for a bad adapter "
            "path or a load error in the engine log)",
            names=names,
            waiting=waiting,
        )
    elif slots and running >= slots:
        evidence = later(
            "Every LoRA slot (--max-loras %(slots)g) is taken by running adapters (%(running)s) while "
            "adapters with requests waiting get none (%(names)s), with %(waiting)g requests waiting: "
            "the adapters starve; raise --max-loras or route these adapters to other replicas",
            slots=slots,
            running=str(info.get("lora_running") or "?"),
            names=names,
            waiting=waiting,
        )
    else:
        return None
    return _finding("lora.starving", Category.LORA_SLOTS, evidence)


RULES: tuple[Rule, ...] = (
    _asleep,
    _backlog,
    _deferred,
    _batch_full,
    _preemptions,
    _kv_usage,
    _swap,
    _ttft_p95,
    _errors,
    _spec_decode,
)


def metric_findings(
    derived: Mapping[str, float],
    target: ProbeTarget,
    thresholds: Thresholds,
    *,
    info: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """The findings of the derived figures; `info` is the text the scrape read from labels
    (ScrapeResult.info: the LoRA adapters' names), for the evidence."""
    found = [f for rule in RULES if (f := rule(derived, target, thresholds)) is not None]
    lora = _lora_starving(derived, target, thresholds, info or {})
    return found + ([lora] if lora else [])


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
