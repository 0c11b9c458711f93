"""Prometheus alert rules for vLLM: the guide's rules (5.3.2), corrected and written anew.

Corrections (corrections #5, #10, #11, #14): the KV metric follows the version
(`gpu_cache_usage_perc` up to 0.8, `kv_cache_usage_perc` from 0.9); KV usage above 90 % is
normal for a cache, so the near-full rule also needs requests waiting; the error rate comes from
`vllm:request_success_total{finished_reason=~"abort|error"}` because there is no
`vllm:request_failure_total`; the swap rule exists only for 0.7 (V0), the only engine that
swaps; the YAML is generated, not the guide's (which lost its indentation in print).

Every threshold and duration is a number checked by diagnostics.configgen.safety and written
by code; the `{{ $labels... }}` templates in the annotations come from this module only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from django.utils.functional import lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, pgettext_lazy

from core.alert_set import by_generator_key
from diagnostics.configgen import safety
from diagnostics.configgen.base import Check, ConfigFile, Field, Generator
from diagnostics.configgen.vllm_metric_names import (
    DEFAULT_VERSION,
    FAILED_REASONS,
    VERSION_CHOICES,
    VllmMetrics,
    metrics_for,
)

SCRAPE_INTERVAL_S = 15  # assumed; a `for` under two scrapes flaps on one missed scrape
RATE_WINDOW = "5m"


@dataclass(frozen=True)
class RuleSettings:
    """The editable part of one rule: its threshold (None: the rule has none) and `for`."""

    key: str
    alert: str
    severity: str
    title: str  # shown (lazy)
    threshold: str | None
    threshold_label: str  # shown (lazy)
    maximum: float
    for_default: str


# The generator's labels per rule; names, severities and default thresholds come from the
# guide's one alert table (core.alert_set), shared with the console's own rules.
_LABELS: dict[str, tuple[Any, Any, float, str]] = {
    "kv": (gettext_lazy("KV cache near full"), gettext_lazy("KV cache usage above (0-1)"), 1, "2m"),
    "down": (pgettext_lazy("config generator", "Service down"), "", 0, "1m"),
    "error_rate": (
        gettext_lazy("High error rate"),
        gettext_lazy("Failed share of finished requests above (0-1)"),
        1,
        "5m",
    ),
    "ttft": (gettext_lazy("High TTFT p99"), gettext_lazy("TTFT p99 above (s)"), 3600, "5m"),
    "queue": (
        pgettext_lazy("config generator", "Queue backlog"),
        gettext_lazy("Waiting requests above"),
        1e6,
        "3m",
    ),
    "gpu_temp": (
        pgettext_lazy("config generator", "GPU temperature"),
        gettext_lazy("GPU temperature above (°C)"),
        150,
        "5m",
    ),
    "swap": (
        gettext_lazy("KV cache swap (0.7 only)"),
        gettext_lazy("CPU KV cache usage above (0-1)"),
        1,
        "5m",
    ),
    "e2e": (
        gettext_lazy("High end-to-end latency p99"),
        gettext_lazy("E2E latency p99 above (s)"),
        86400,
        "5m",
    ),
}  # key: (title, threshold label, maximum, default for)
# The form's group of each rule: its title and the severity in the reader's language.
_GROUPS = {
    "critical": gettext_lazy("%(rule)s (critical)"),
    "warning": gettext_lazy("%(rule)s (warning)"),
}
RULES: tuple[RuleSettings, ...] = tuple(
    RuleSettings(
        key, alert.alertname, alert.prometheus_severity, title, alert.guide_threshold, label, top, for_
    )
    for key, (title, label, top, for_) in _LABELS.items()
    for alert in (by_generator_key()[key],)
)


def _group_text(severity: str, title: str) -> str:
    return _GROUPS[severity] % {"rule": title}


# The form's group of a rule, in the language of the request that shows it.
_group = lazy(_group_text, str)


def _rule_fields(rule: RuleSettings) -> tuple[Field, ...]:
    group = _group(rule.severity, rule.title)
    fields = []
    if rule.threshold is not None:
        fields.append(
            Field(f"{rule.key}_threshold", rule.threshold_label, rule.threshold, kind="float", group=group)
        )
    fields.append(
        Field(
            f"{rule.key}_for",
            pgettext_lazy("alert rule duration", "for"),
            rule.for_default,
            gettext_lazy("A duration: 90s, 2m, 1h."),
            group=group,
        )
    )
    return tuple(fields)


_TARGETS = pgettext_lazy("config generator", "Targets")
_KV_FIELDS = _rule_fields(RULES[0])

# SGLang (docs/sglang-operations.md): its own rules over the `sglang:` metrics, written to a
# file of their own when the engine choice includes it; the vLLM file stays as it was.
ENGINE_CHOICES = (("vllm", "vLLM"), ("sglang", "SGLang"), ("both", "vLLM + SGLang"))
SGLANG_RULES: tuple[RuleSettings, ...] = (
    RuleSettings("sglang_down", "SGLangServiceDown", "critical", gettext_lazy("SGLang service down"),
                 None, "", 0, "1m"),
    RuleSettings("sglang_stall", "SGLangGenerationStalled", "critical",
                 gettext_lazy("SGLang generation stalled"), None, "", 0, "2m"),
    RuleSettings("sglang_kv", "SGLangKVCacheNearFull", "warning", gettext_lazy("SGLang KV cache near full"),
                 "0.95", gettext_lazy("Token usage above (0-1)"), 1, "2m"),
    RuleSettings("sglang_queue", "SGLangQueueBacklog", "warning", gettext_lazy("SGLang queue backlog"),
                 "50", gettext_lazy("Queued requests above"), 1e6, "3m"),
    RuleSettings("sglang_ttft", "SGLangHighTTFT", "warning", gettext_lazy("SGLang TTFT p95"),
                 "5", gettext_lazy("TTFT p95 above (s)"), 3600, "5m"),
)  # fmt: skip
# The taxonomy category each SGLang alert carries as a label: the Alertmanager intake takes
# a `category` label naming a taxonomy key before it looks at the alertname.
SGLANG_CATEGORIES = {
    "sglang_down": "process.not_started",
    "sglang_stall": "process.hung",
    "sglang_kv": "oom.kv_pressure",
    "sglang_queue": "rate_limit.queue",
    "sglang_ttft": "timeout.ttft",
}
_SGLANG_KV_FIELDS = _rule_fields(SGLANG_RULES[2])
SGLANG_FIELDS: tuple[Field, ...] = (
    *_rule_fields(SGLANG_RULES[0]),
    *_rule_fields(SGLANG_RULES[1]),
    *_SGLANG_KV_FIELDS,
    Field(
        "sglang_kv_min_queue",
        gettext_lazy("... while queued requests exceed"),
        "5",
        kind="int",
        help=gettext_lazy(
            "SGLang calls token usage above 0.9 good utilization; it matters when requests queue."
        ),
        group=_SGLANG_KV_FIELDS[0].group,
    ),
    *(field for rule in SGLANG_RULES[3:] for field in _rule_fields(rule)),
)
FIELDS: tuple[Field, ...] = (
    Field(
        "vllm_version",
        gettext_lazy("vLLM version"),
        DEFAULT_VERSION,
        gettext_lazy("Picks the metric names the rules query."),
        kind="choice",
        choices=VERSION_CHOICES,
        group=_TARGETS,
    ),
    Field(
        "job",
        gettext_lazy("Prometheus job"),
        "vllm",
        gettext_lazy("The job label of the vLLM scrape targets."),
        group=_TARGETS,
    ),
    Field(
        "gpu_temp_metric",
        gettext_lazy("GPU temperature metric"),
        "DCGM_FI_DEV_GPU_TEMP",
        gettext_lazy("DCGM exporter: DCGM_FI_DEV_GPU_TEMP; nvidia_gpu_exporter: nvidia_smi_temperature_gpu."),
        group=_TARGETS,
    ),
    Field(
        "engine",
        gettext_lazy("Engine"),
        "vllm",
        gettext_lazy("Which engines the rules are for; SGLang's rules go in a file of their own."),
        kind="choice",
        choices=ENGINE_CHOICES,
        group=_TARGETS,
    ),
    Field(
        "sglang_job",
        gettext_lazy("SGLang Prometheus job"),
        "sglang",
        gettext_lazy("The job label of the SGLang scrape targets (started with `--enable-metrics`)."),
        group=_TARGETS,
    ),
    *_KV_FIELDS,
    Field(
        "kv_min_waiting",
        gettext_lazy("... while waiting requests exceed"),
        "5",
        kind="int",
        help=gettext_lazy(
            # xgettext:no-python-format
            "KV usage above 90 % is normal for a cache; it matters when requests wait for room."
        ),
        group=_KV_FIELDS[0].group,
    ),
    *(field for rule in RULES[1:] for field in _rule_fields(rule)),
    *SGLANG_FIELDS,
)

PRESETS: dict[str, dict[str, str]] = {
    "guide": {},  # the defaults are the guide's thresholds
    "strict": {"kv_threshold": "0.95", "kv_for": "1m", "down_for": "30s", "error_rate_threshold": "0.02",
               "error_rate_for": "2m", "ttft_threshold": "2", "ttft_for": "3m", "queue_threshold": "20",
               "queue_for": "1m", "gpu_temp_threshold": "80", "gpu_temp_for": "3m", "swap_for": "2m",
               "e2e_threshold": "15", "e2e_for": "3m", "sglang_down_for": "30s", "sglang_stall_for": "1m",
               "sglang_kv_for": "1m", "sglang_queue_threshold": "20", "sglang_queue_for": "1m",
               "sglang_ttft_threshold": "2", "sglang_ttft_for": "3m"},
    "relaxed": {"kv_threshold": "0.98", "kv_for": "5m", "kv_min_waiting": "10", "down_for": "3m",
                "error_rate_threshold": "0.1", "error_rate_for": "10m", "ttft_threshold": "10",
                "ttft_for": "10m", "queue_threshold": "100", "queue_for": "5m", "gpu_temp_threshold": "87",
                "gpu_temp_for": "10m", "swap_for": "10m", "e2e_threshold": "60", "e2e_for": "10m",
                "sglang_down_for": "3m", "sglang_stall_for": "5m", "sglang_kv_threshold": "0.98",
                "sglang_kv_for": "5m", "sglang_kv_min_queue": "10", "sglang_queue_threshold": "100",
                "sglang_queue_for": "5m", "sglang_ttft_threshold": "10", "sglang_ttft_for": "10m"},
}  # fmt: skip
PRESET_LABELS = {
    "guide": gettext_lazy("The guide's thresholds (5.3.2), corrected"),
    "strict": gettext_lazy("Strict: page earlier (latency-sensitive services)"),
    "relaxed": gettext_lazy("Relaxed: fewer pages (batch and offline traffic)"),
}


@dataclass(frozen=True, kw_only=True)
class AlertSpec:
    version_label: str
    metrics: VllmMetrics
    job: str
    gpu_temp_metric: str
    thresholds: Mapping[str, float]  # by rule key
    durations: Mapping[str, float]  # `for`, in seconds, by rule key
    kv_min_waiting: int
    engine: str = "vllm"
    sglang_job: str = "sglang"
    sglang_thresholds: Mapping[str, float] = dataclasses.field(default_factory=dict)  # by SGLang rule key
    sglang_durations: Mapping[str, float] = dataclasses.field(default_factory=dict)
    sglang_kv_min_queue: int = 5

    @property
    def has_vllm(self) -> bool:
        return self.engine in ("vllm", "both")

    @property
    def has_sglang(self) -> bool:
        return self.engine in ("sglang", "both")

    @property
    def has_swap(self) -> bool:
        return self.metrics.cpu_cache_usage is not None


_METRIC_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")


def metric_name(field: str, value: str) -> str:
    """A Prometheus metric name (letters, digits, _ and :), after the common token check."""
    value = safety.token(field, value)
    if not _METRIC_NAME.match(value):
        raise safety.UnsafeValue(
            f"{field}: "
            + _("%(value)s is not a Prometheus metric name (A-Z a-z 0-9 _ :)") % {"value": repr(value)}
        )
    return value


def build(values: Mapping[str, str]) -> AlertSpec:
    thresholds = {
        rule.key: safety.number(
            f"{rule.key}_threshold", values[f"{rule.key}_threshold"], maximum=rule.maximum
        )
        for rule in RULES
        if rule.threshold is not None
    }
    durations = {
        rule.key: safety.seconds(f"{rule.key}_for", values[f"{rule.key}_for"], minimum=0) for rule in RULES
    }
    return AlertSpec(
        version_label=values["vllm_version"],
        metrics=metrics_for(values["vllm_version"]),
        job=safety.token("job", values["job"]),
        gpu_temp_metric=metric_name("gpu_temp_metric", values["gpu_temp_metric"]),
        thresholds=thresholds,
        durations=durations,
        kv_min_waiting=safety.integer("kv_min_waiting", values["kv_min_waiting"], maximum=1_000_000),
        engine=values["engine"],
        sglang_job=safety.token("sglang_job", values["sglang_job"]),
        sglang_thresholds={
            rule.key: safety.number(
                f"{rule.key}_threshold", values[f"{rule.key}_threshold"], maximum=rule.maximum
            )
            for rule in SGLANG_RULES
            if rule.threshold is not None
        },
        sglang_durations={
            rule.key: safety.seconds(f"{rule.key}_for", values[f"{rule.key}_for"], minimum=0)
            for rule in SGLANG_RULES
        },
        sglang_kv_min_queue=safety.integer(
            "sglang_kv_min_queue", values["sglang_kv_min_queue"], maximum=1_000_000
        ),
    )


def prometheus_duration(seconds: float) -> str:
    """Seconds in Prometheus form: 120 -> 2m, 90 -> 90s, 3600 -> 1h, 0.5 -> 500ms."""
    ms = round(seconds * 1000)
    if ms == 0:
        return "0s"
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def number(value: float) -> str:
    """A threshold as a PromQL literal: 0.95, 50, 1e-07."""
    return format(value, ".12g")


def _p99(spec: AlertSpec, histogram: str) -> str:
    selector = f'{histogram}_bucket{{job="{spec.job}"}}'
    return f"histogram_quantile(0.99, sum by (le, instance) (rate({selector}[{RATE_WINDOW}])))"


# vllm:num_requests_waiting_by_reason{reason="capacity"|"deferred"}: read from the generator's
# 0.20 on, with the total as the fallback where an engine does not export it
# (docs/vllm-metrics.md gives the release as inferred).
WAITING_BY_REASON_FROM = (0, 20)


def expressions(spec: AlertSpec) -> dict[str, str]:
    """Each rule's PromQL by rule key; the swap rule only where the version swaps."""
    job, m, t = f'job="{spec.job}"', spec.metrics, spec.thresholds
    success = f"rate(vllm:request_success_total{{{job}}}[{RATE_WINDOW}])"
    failed = f'rate(vllm:request_success_total{{{job},finished_reason=~"{FAILED_REASONS}"}}[{RATE_WINDOW}])'
    waiting = f"sum by (instance) (vllm:num_requests_waiting{{{job}}})"
    if m.version >= WAITING_BY_REASON_FROM:
        # Requests waiting as "deferred" (a LoRA slot, a KV transfer) are not overload: count
        # those waiting for capacity where the engine tells them apart, all of them where not.
        waiting = (
            f'(sum by (instance) (vllm:num_requests_waiting_by_reason{{{job},reason="capacity"}})'
            f" or {waiting})"
        )
    exprs = {
        # The console's one KV rule (fleet.probes.metric_rules.kv_under_pressure): usage above the
        # threshold and requests waiting or preempted.
        "kv": f"max by (instance) ({m.kv_usage}{{{job}}}) > {number(t['kv'])}"
        f" and on (instance) ({waiting} > {spec.kv_min_waiting}"
        f" or sum by (instance) (rate(vllm:num_preemptions_total{{{job}}}[{RATE_WINDOW}])) > 0)",
        "down": f"up{{{job}}} == 0",
        "error_rate": f"sum by (instance) ({failed}) / sum by (instance) ({success})"
        f" > {number(t['error_rate'])}",
        "ttft": f"{_p99(spec, 'vllm:time_to_first_token_seconds')} > {number(t['ttft'])}",
        "queue": f"{waiting} > {number(t['queue'])}",
        "gpu_temp": f"{spec.gpu_temp_metric} > {number(t['gpu_temp'])}",
        "e2e": f"{_p99(spec, 'vllm:e2e_request_latency_seconds')} > {number(t['e2e'])}",
    }
    if m.cpu_cache_usage:
        exprs["swap"] = f"max by (instance) ({m.cpu_cache_usage}{{{job}}}) > {number(t['swap'])}"
    return exprs


def _waiting(minimum: int) -> str:
    return "requests wait" if minimum == 0 else f"more than {minimum} requests wait"


def annotations(spec: AlertSpec, key: str) -> dict[str, str]:
    """summary, description and runbook of one rule, in English, with Prometheus templates."""
    t, d = spec.thresholds, {k: prometheus_duration(v) for k, v in spec.durations.items()}
    instance = "{{ $labels.instance }}"
    texts = {
        "kv": (
            f"KV cache nearly full on {instance} with requests waiting or preempted",
            f"KV cache usage is {{{{ $value | humanizePercentage }}}} (over {number(t['kv'] * 100)}% for "
            f"{d['kv']}) while {_waiting(spec.kv_min_waiting)} or requests are preempted. Usage above 90% "
            "alone is normal under load: vLLM preallocates the KV pool and fills it as a cache, so this rule "
            "also needs waiting or preempted requests. A full pool is not an out-of-memory risk: new "
            "requests queue, running ones may be preempted and recomputed, and TTFT grows.",
            "Check vllm:num_requests_waiting and vllm:num_preemptions_total; add replicas or rate-limit at "
            "the gateway. For more KV room raise --gpu-memory-utilization or lower --max-num-seqs or "
            "--max-model-len.",
        ),
        "down": (
            f"vLLM target {instance} is down",
            f'Prometheus has not scraped {instance} (job "{spec.job}") for {d["down"]}. vLLM opens its port '
            "only after the model is loaded, so an instance that is still starting shows as down too.",
            "Check the process or pod. Exit code 137 is any SIGKILL: look for OOMKilled or the kernel log "
            "before calling it an OOM. Then curl /health: 200 is healthy, 500 or 503 an engine that died.",
        ),
        "error_rate": (
            f"vLLM error rate above {number(t['error_rate'] * 100)}% on {instance}",
            f"{{{{ $value | humanizePercentage }}}} of the requests that finished in the last {RATE_WINDOW} "
            "ended with finished_reason abort or error (vLLM counts failed requests only this way). "
            "Aborts include clients that disconnected or timed out; compare with the gateway's 5xx.",
            "Read the vLLM log around the start of the rise. Check that the timeout chain holds: engine "
            "budget (max_tokens) < gateway proxy_read_timeout < client read timeout.",
        ),
        "ttft": (
            f"TTFT p99 above {number(t['ttft'])}s on {instance}",
            f"p99 time to first token is {{{{ $value | humanize }}}}s over the last {RATE_WINDOW}. "
            "Queueing and long prompts (prefill) both raise it.",
            "Look at vllm:num_requests_waiting and vllm:request_queue_time_seconds: queueing calls for "
            "capacity or rate limiting; long prefills call for shorter prompts or a smaller "
            "--max-num-batched-tokens so decode is not starved.",
        ),
        "queue": (
            f"More than {number(t['queue'])} requests waiting on {instance}",
            "{{ $value | humanize }} requests are waiting for a batch slot or KV cache room.",
            "Scale out or rate-limit at the gateway; check KV cache usage and preemptions.",
        ),
        "gpu_temp": (
            f"GPU {{{{ $labels.gpu }}}} on {instance} above {number(t['gpu_temp'])}°C",
            "GPU temperature is {{ $value | humanize }}°C. Temperature is a hint; whether the GPU really "
            "slows down shows in NVML's clock throttle reasons (HW slowdown, SW thermal, power cap).",
            "Run nvidia-smi -q -d PERFORMANCE for the throttle reasons; check airflow, fans and the "
            "data-centre inlet temperature.",
        ),
        "swap": (
            f"vLLM is swapping KV cache to CPU on {instance}",
            "CPU KV cache usage is {{ $value | humanizePercentage }}: the V0 engine (0.7) swaps preempted "
            "sequences to CPU memory, and decoding slows. The V1 engine (0.8 and later) never swaps.",
            "Lower --max-num-seqs or give the KV cache more room; the V1 engine (0.8+) does not swap.",
        ),
        "e2e": (
            f"End-to-end p99 latency above {number(t['e2e'])}s on {instance}",
            f"p99 end-to-end request latency is {{{{ $value | humanize }}}}s over the last {RATE_WINDOW}.",
            "Split it: TTFT (queueing, prefill) versus inter-token latency (decode). Long generations "
            "(max_tokens) raise it without anything being wrong.",
        ),
    }
    summary, description, runbook = texts[key]
    return {"summary": summary, "description": description, "runbook": runbook}


def rules(spec: AlertSpec) -> dict[str, list[dict[str, Any]]]:
    """The rules by group name (vllm_critical, vllm_warning), in the guide's order."""
    exprs = expressions(spec)
    groups: dict[str, list[dict[str, Any]]] = {"vllm_critical": [], "vllm_warning": []}
    for rule in RULES:
        if rule.key not in exprs:
            continue
        groups[f"vllm_{rule.severity}"].append(
            {
                "alert": rule.alert,
                "expr": exprs[rule.key],
                "for": prometheus_duration(spec.durations[rule.key]),
                "labels": {"severity": rule.severity},
                "annotations": annotations(spec, rule.key),
            }
        )
    return groups


def render(spec: AlertSpec) -> list[ConfigFile]:
    """vllm-alerts.yml, sglang-alerts.yml or both, as the engine choice says."""
    files = [_vllm_file(spec)] if spec.has_vllm else []
    if spec.has_sglang:
        files.append(_sglang_file(spec))
    return files


def _vllm_file(spec: AlertSpec) -> ConfigFile:
    groups = [{"name": name, "rules": group_rules} for name, group_rules in rules(spec).items()]
    body = yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=1000)
    header = (
        f"# Prometheus alert rules for vLLM {spec.version_label}, job {spec.job}.\n"
        "# Generated by LLM Ops Console.\n"
        "# The guide's rules (5.3.2), corrected: version-specific KV metric, KV alert needs waiting\n"
        "# requests, error rate from request_success_total{finished_reason}, swap rule for 0.7 only.\n"
        "# Check with: promtool check rules vllm-alerts.yml\n"
    )
    return ConfigFile("vllm-alerts.yml", header + body, "yaml")


# --- SGLang -----------------------------------------------------------------------------------


def _sglang_sum(metric: str, job: str) -> str:
    """A per-scheduler gauge as one figure per instance: the largest over the TP ranks of a DP
    rank (each reports the same with --enable-metrics-for-all-schedulers), summed over DP ranks."""
    return f"sum by (instance) (max by (instance, dp_rank) ({metric}{{{job}}}))"


def sglang_expressions(spec: AlertSpec) -> dict[str, str]:
    """Each SGLang rule's PromQL by rule key."""
    job, t = f'job="{spec.sglang_job}"', spec.sglang_thresholds
    queued = _sglang_sum("sglang:num_queue_reqs", job)
    ttft = f"sglang:time_to_first_token_seconds_bucket{{{job}}}"
    return {
        "sglang_down": f"up{{{job}}} == 0",
        # The value is the running requests; generation throughput is the condition.
        "sglang_stall": f"{_sglang_sum('sglang:num_running_reqs', job)} > 0"
        f" and on (instance) max by (instance) (sglang:gen_throughput{{{job}}}) == 0",
        "sglang_kv": f"max by (instance) (sglang:token_usage{{{job}}}) > {number(t['sglang_kv'])}"
        f" and on (instance) {queued} > {spec.sglang_kv_min_queue}",
        "sglang_queue": f"{queued} > {number(t['sglang_queue'])}",
        "sglang_ttft": f"histogram_quantile(0.95, sum by (le, instance) (rate({ttft}[{RATE_WINDOW}])))"
        f" > {number(t['sglang_ttft'])}",
    }


def sglang_annotations(spec: AlertSpec, key: str) -> dict[str, str]:
    """summary, description and runbook of one SGLang rule, in English, with Prometheus templates."""
    t = spec.sglang_thresholds
    d = {k: prometheus_duration(v) for k, v in spec.sglang_durations.items()}
    instance = "{{ $labels.instance }}"
    texts = {
        "sglang_down": (
            f"SGLang target {instance} is down",
            f'Prometheus has not scraped {instance} (job "{spec.sglang_job}") for {d["sglang_down"]}. SGLang '
            "serves /metrics only when started with --enable-metrics, and opens its port only after the "
            "weights are loaded and the CUDA graphs captured.",
            "Check the process or container and its log. Then curl /health_generate: 200 means the scheduler "
            "generated a token; 503 or no answer within 20 s means it is stuck or starting.",
        ),
        "sglang_stall": (
            f"SGLang on {instance} generates nothing with requests running",
            f"sglang:gen_throughput has been 0 for {d['sglang_stall']} while sglang:num_running_reqs is "
            "{{ $value | humanize }}. A scheduler that hangs altogether stops updating these gauges; its "
            "watchdog (--watchdog-timeout, 300 s by default) then ends the server and the down alert "
            "follows.",
            "curl /health_generate on the instance; read the log for 'watchdog timeout', NCCL or "
            "CUDA errors; py-spy dump --pid PID of the scheduler for the bug report; restart the instance.",
        ),
        "sglang_kv": (
            f"SGLang KV cache nearly full on {instance} with requests queued",
            f"Token usage (the KV cache pool) is {{{{ $value | humanizePercentage }}}} (over "
            f"{number(t['sglang_kv'] * 100)}% for {d['sglang_kv']}) while more than "
            f"{spec.sglang_kv_min_queue} requests queue. Usage above 0.9 alone is what SGLang calls good "
            "utilization; with a queue the "
            "pool is the limit, and 'KV cache pool is full. Retract requests.' in the log means running "
            "requests are retracted and recomputed.",
            "Give the pool more room (a higher --mem-fraction-static if 5-8 GB stay free for activations, "
            "--kv-cache-dtype fp8_e4m3, a larger --tp-size) or admit less (--max-running-requests, a shorter "
            "--context-length, gateway limits); --schedule-conservativeness 1.3 when retractions are "
            "frequent.",
        ),
        "sglang_queue": (
            f"More than {number(t['sglang_queue'])} requests queued on SGLang {instance}",
            "{{ $value | humanize }} requests wait in the scheduler's queue (sglang:num_queue_reqs); "
            "queueing time is part of the TTFT.",
            "Compare sglang:num_running_reqs with --max-running-requests and sglang:token_usage: at the cap "
            "with token usage below 0.9, raise --max-running-requests or lower --schedule-conservativeness "
            "(0.3); with token usage near 1, the KV cache is the limit. Add replicas or rate-limit "
            "at the gateway.",
        ),
        "sglang_ttft": (
            f"SGLang TTFT p95 above {number(t['sglang_ttft'])}s on {instance}",
            f"p95 time to first token is {{{{ $value | humanize }}}}s over the last {RATE_WINDOW} "
            "(sglang:time_to_first_token_seconds). Queueing and long prefills both raise it.",
            "Look at sglang:num_queue_reqs for queueing and sglang:cache_hit_rate for prefixes "
            "computed again; long prompts are prefilled in chunks of --chunked-prefill-size tokens between "
            "decode steps.",
        ),
    }
    summary, description, runbook = texts[key]
    return {"summary": summary, "description": description, "runbook": runbook}


def sglang_rules(spec: AlertSpec) -> dict[str, list[dict[str, Any]]]:
    """The SGLang rules by group name (sglang_critical, sglang_warning)."""
    exprs = sglang_expressions(spec)
    groups: dict[str, list[dict[str, Any]]] = {"sglang_critical": [], "sglang_warning": []}
    for rule in SGLANG_RULES:
        groups[f"sglang_{rule.severity}"].append(
            {
                "alert": rule.alert,
                "expr": exprs[rule.key],
                "for": prometheus_duration(spec.sglang_durations[rule.key]),
                "labels": {"severity": rule.severity, "category": SGLANG_CATEGORIES[rule.key]},
                "annotations": sglang_annotations(spec, rule.key),
            }
        )
    return groups


def _sglang_file(spec: AlertSpec) -> ConfigFile:
    groups = [{"name": name, "rules": group_rules} for name, group_rules in sglang_rules(spec).items()]
    body = yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=1000)
    header = (
        f"# Prometheus alert rules for SGLang, job {spec.sglang_job}.\n"
        "# Generated by LLM Ops Console (docs/sglang-operations.md).\n"
        "# SGLang exports the sglang:* metrics only when started with --enable-metrics.\n"
        "# Check with: promtool check rules sglang-alerts.yml\n"
    )
    return ConfigFile("sglang-alerts.yml", header + body, "yaml")


def checks(spec: AlertSpec) -> list[Check]:
    found = (
        [*_threshold_checks(spec), *_duration_checks(spec), *_version_checks(spec)] if spec.has_vllm else []
    )
    if spec.has_sglang:
        found += sglang_checks(spec)
    return found


def sglang_checks(spec: AlertSpec) -> list[Check]:
    found = [
        Check(
            "ok",
            _("SGLang rules read the `sglang:` metrics of job %(job)s") % {"job": spec.sglang_job},
            _(
                "SGLang exports them only when started with `--enable-metrics`; without it `/metrics` "
                "answers 404 and the target counts as down."
            ),
        ),
        Check(
            "ok",
            _("The stall rule reads gauges the scheduler updates while it decodes"),
            _(
                "A scheduler that hangs altogether stops updating them; its watchdog "
                "(`--watchdog-timeout`, 300 s) then ends the server and the down alert fires."
            ),
        ),
    ]
    if spec.sglang_thresholds["sglang_kv"] < 0.9:
        found.append(
            Check(
                "warning",
                _(
                    "The SGLang KV alert fires at %(threshold)s: SGLang calls token usage above 0.9 "
                    "good utilization"
                )
                % {"threshold": number(spec.sglang_thresholds["sglang_kv"])},
                fix=_("Keep it at 0.95 or above; the queue condition says when it matters."),
            )
        )
    if spec.engine == "both" and spec.job == spec.sglang_job:
        found.append(
            Check(
                "warning",
                _("vLLM and SGLang rules share the job %(job)s") % {"job": spec.job},
                _(
                    "Each engine's rules select their targets by job; with one job the vLLM rules "
                    "query SGLang targets too."
                ),
                _("Give the SGLang targets a job of their own."),
            )
        )
    for rule in SGLANG_RULES:
        if spec.sglang_durations[rule.key] < 2 * SCRAPE_INTERVAL_S:
            found.append(
                Check(
                    "warning",
                    _("%(alert)s: `for` %(duration)s is shorter than two scrapes")
                    % {"alert": rule.alert, "duration": prometheus_duration(spec.sglang_durations[rule.key])},
                    _("With a %(interval)s s scrape, one late or missed scrape fires or clears it.")
                    % {"interval": SCRAPE_INTERVAL_S},
                    _("Use at least %(seconds)ss.") % {"seconds": 2 * SCRAPE_INTERVAL_S},
                )
            )
    return found


def _threshold_checks(spec: AlertSpec) -> list[Check]:
    t, found = spec.thresholds, []
    if t["kv"] < 0.9:
        found.append(
            Check(
                "warning",
                _("The KV alert fires at %(threshold)s: under normal load") % {"threshold": number(t["kv"])},
                _("vLLM fills its KV pool as a cache; usage above 0.9 is normal when busy."),
                _("Keep it at 0.95 or above and rely on waiting requests and TTFT."),
            )
        )
    if t["error_rate"] > 0.5:
        found.append(
            Check(
                "warning",
                _("The error-rate alert waits until most requests fail"),
                _("It fires above %(percent)s%% failed requests.")
                % {"percent": number(t["error_rate"] * 100)},
                _("The guide uses 5%; 10% is already a bad outage."),
            )
        )
    if t["ttft"] >= t["e2e"]:
        found.append(
            Check(
                "warning",
                _("The TTFT threshold is not below the end-to-end threshold"),
                _("TTFT is part of the end-to-end latency, so the TTFT alert can never fire first."),
                _("Keep TTFT p99 well below E2E p99 (the guide: 5 s and 30 s)."),
            )
        )
    if t["gpu_temp"] > 90:
        found.append(
            Check(
                "warning",
                _("GPU temperature alert at %(threshold)s°C is late") % {"threshold": number(t["gpu_temp"])},
                _("Data-centre GPUs start to slow down in the mid-80s °C."),
                _("Alert at 83°C and read the clock throttle reasons for the evidence."),
            )
        )
    return found  # fmt: skip


def _duration_checks(spec: AlertSpec) -> list[Check]:
    found = []
    for rule in RULES:
        if spec.durations[rule.key] < 2 * SCRAPE_INTERVAL_S:
            duration = prometheus_duration(spec.durations[rule.key])
            found.append(
                Check(
                    "warning",
                    _("%(alert)s: `for` %(duration)s is shorter than two scrapes")
                    % {"alert": rule.alert, "duration": duration},
                    _("With a %(interval)s s scrape, one late or missed scrape fires or clears it.")
                    % {"interval": SCRAPE_INTERVAL_S},
                    _("Use at least %(seconds)ss.") % {"seconds": 2 * SCRAPE_INTERVAL_S},
                )
            )
    return found


def _version_checks(spec: AlertSpec) -> list[Check]:
    m = spec.metrics
    found = [
        Check(
            "ok",
            _("KV usage read from %(metric)s") % {"metric": m.kv_usage},
            _(
                "gpu_cache_usage_perc up to 0.8, kv_cache_usage_perc from 0.9 "
                "(the old name is gone from 0.12)."
            ),
        ),
        Check(
            "ok",
            _("Error rate from %(metric)s")
            % {"metric": "vllm:request_success_total{finished_reason=~abort|error}"},
            _("The guide's vllm:request_failure_total does not exist in any vLLM version."),
        ),
    ]
    if spec.has_swap:
        found.append(
            Check("ok", _("KV swap rule included"), _("vLLM 0.7 runs the V0 engine, which swaps to CPU."))
        )
    else:
        found.append(
            Check(
                "ok",
                _("No KV swap rule for vLLM %(version)s") % {"version": spec.version_label},
                _(
                    "The V1 engine (0.8 and later) never swaps: vllm:cpu_cache_usage_perc does not "
                    "exist, and preempted requests are recomputed instead."
                ),
            )
        )
    return found


GENERATOR = Generator(
    key="alerts",
    label=gettext_noop("Prometheus alert rules"),
    description=gettext_noop(
        "The guide's vLLM alert rules (5.3.2), corrected for the chosen vLLM version: KV cache, "
        "service down, error rate, TTFT, queue, GPU temperature, swap (0.7 only), end-to-end latency."
    ),
    fields=FIELDS,
    build=build,
    render=render,
    checks=checks,
    presets=PRESETS,
    preset_labels=PRESET_LABELS,
)
