"""The guide's alert rule set (5.3.2), corrected: the one table.

The console's own rules (incidents.default_rules, seeded into the database), the
Prometheus rules the config generator writes (diagnostics.configgen.alert_rules) and the
Alertmanager intake's alertname → category map (incidents.alertmanager) are all made from
this table, so a rule has one name, one alertname, one cause and one set of defaults.

Corrections (docs/guide-corrections.md): the KV rule fires on pressure, not on usage
alone (#11); the error rate comes from request_success_total's finished_reason (#5); the
swap rule exists only for vLLM 0.7 (#5).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop as _


@dataclass(frozen=True, kw_only=True)
class GuideAlert:
    key: str  # the console's rule key (AlertRule.key)
    generator_key: str  # the config generator's field prefix ("" where it writes none)
    alertname: str  # the Prometheus alert name ("" for console-only rules)
    name: str  # marked for the catalogue; shown with gettext, stored and generated in English
    signal: str  # what the console compares (incidents.alert_signals)
    threshold: float  # the console's threshold on that signal
    for_seconds: int
    category: str  # taxonomy key; "service down" takes the down finding's category instead
    severity: str  # the console's: critical, major, minor
    prometheus_severity: str  # the label the generated rule carries: critical, warning
    guide_threshold: str | None  # the generated rule's default threshold (None: it has none)
    description: str = ""


GUIDE_ALERTS: tuple[GuideAlert, ...] = (
    GuideAlert(
        key="kv_cache_high", generator_key="kv", alertname="VLLMKVCacheNearFull",
        name=_("KV cache full with requests waiting"), signal="kv_pressure", threshold=0.5,
        for_seconds=120, category="oom.kv_pressure", severity="major",
        prometheus_severity="critical", guide_threshold="0.9",
        description=_("The probes' KV rule: usage above the threshold and requests waiting or "
        "preempted. High usage alone is the cache doing its job and fires nothing."),
    ),
    GuideAlert(
        key="service_down", generator_key="down", alertname="VLLMServiceDown", name=_("Service down"),
        signal="service_down", threshold=0.5, for_seconds=60, category="process.not_started",
        severity="critical", prometheus_severity="critical", guide_threshold=None,
        description=_("The probes judge the instance down; the incident takes the category of the "
        "down finding (this one only when none is named)."),
    ),
    GuideAlert(
        key="error_rate_high", generator_key="error_rate", alertname="VLLMHighErrorRate",
        name=_("Error rate above 5 %"), signal="error_rate", threshold=0.05, for_seconds=300,
        category="server.5xx", severity="critical", prometheus_severity="critical",
        guide_threshold="0.05",
        description=_("Requests finishing with abort or error (there is no vllm:request_failure_total)."),
    ),
    GuideAlert(
        key="ttft_p99_high", generator_key="ttft", alertname="VLLMHighTTFT", name=_("TTFT p99 above 5 s"),
        signal="ttft_p99_s", threshold=5.0, for_seconds=300, category="timeout.ttft",
        severity="major", prometheus_severity="warning", guide_threshold="5",
    ),
    GuideAlert(
        key="queue_backlog", generator_key="queue", alertname="VLLMQueueBacklog",
        name=_("More than 50 requests waiting"), signal="num_requests_waiting", threshold=50,
        for_seconds=180, category="rate_limit.queue", severity="major",
        prometheus_severity="warning", guide_threshold="50",
    ),
    GuideAlert(
        key="gpu_temperature_high", generator_key="gpu_temp", alertname="GPUTemperatureHigh",
        name=_("GPU above 83 °C"), signal="gpu_temperature_c", threshold=83, for_seconds=300,
        category="gpu.thermal", severity="minor", prometheus_severity="warning", guide_threshold="83",
        description=_("A hint; NVML's throttle reasons are the evidence."),
    ),
    GuideAlert(
        key="kv_swap", generator_key="swap", alertname="VLLMKVCacheSwap",
        name=_("KV cache swapped to CPU (vLLM 0.7)"), signal="kv_swap", threshold=0, for_seconds=300,
        category="oom.kv_pressure", severity="minor", prometheus_severity="warning",
        guide_threshold="0", description=_("Only the V0 engine swaps; V1 preempts and recomputes."),
    ),
    GuideAlert(
        key="e2e_p99_high", generator_key="e2e", alertname="VLLMHighLatency",
        name=_("End-to-end p99 above 30 s"), signal="e2e_p99_s", threshold=30.0, for_seconds=300,
        category="timeout.tps", severity="major", prometheus_severity="warning",
        guide_threshold="30",
    ),
    GuideAlert(
        key="capacity_critical", generator_key="", alertname="", name=_("Critical capacity finding"),
        signal="capacity_critical", threshold=0, for_seconds=0, category="oom.kv_pressure",
        severity="major", prometheus_severity="", guide_threshold=None,
        description=_("The scheduled sizing found the flags cannot start or long prompts exhaust "
        "the KV cache."),
    ),
)  # fmt: skip

# Names earlier vLLM dashboards used for the same alerts.
ALERTNAME_ALIASES = {"VLLMGPUCacheNearFull": "VLLMKVCacheNearFull"}


def by_alertname() -> dict[str, GuideAlert]:
    found = {a.alertname: a for a in GUIDE_ALERTS if a.alertname}
    return found | {alias: found[name] for alias, name in ALERTNAME_ALIASES.items()}


def by_generator_key() -> dict[str, GuideAlert]:
    return {a.generator_key: a for a in GUIDE_ALERTS if a.generator_key}
