"""A Grafana dashboard for vLLM: the guide's four rows (5.3.3) with the metric names of the
chosen vLLM version (diagnostics.configgen.vllm_metric_names).

Overview (up, QPS, success rate, waiting), latency (TTFT, end-to-end, inter-token latency at
p50/p95/p99), resources (GPU memory, KV cache, GPU utilization and temperature, process
memory), throughput (prompt and generation tokens/s, running vs waiting). The success rate
comes from `vllm:request_success_total{finished_reason}`, not the guide's non-existent
`request_failure_total`; swap series appear for 0.7 (V0) only.

The datasource is the `${DS_PROMETHEUS}` variable and vLLM targets are picked with the
`instance` variable; user values reach the JSON only after the safety checks, and json.dumps
quotes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, pgettext_lazy

from diagnostics.configgen import safety
from diagnostics.configgen.base import Check, ConfigFile, Field, Generator
from diagnostics.configgen.vllm_metric_names import (
    DEFAULT_VERSION,
    FAILED_REASONS,
    GPU_EXPORTER_CHOICES,
    GPU_EXPORTERS,
    VERSION_CHOICES,
    GpuMetrics,
    VllmMetrics,
    metrics_for,
)

SCHEMA_VERSION = 39
GRID_WIDTH = 24
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
RATE = "$__rate_interval"
QUANTILES = ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"))
REFRESH_CHOICES = (("10s", "10s"), ("30s", "30s"), ("1m", "1m"), ("5m", "5m"))

FIELDS: tuple[Field, ...] = (
    Field(
        "vllm_version",
        gettext_lazy("vLLM version"),
        DEFAULT_VERSION,
        gettext_lazy("Picks the metric names the panels query."),
        kind="choice",
        choices=VERSION_CHOICES,
    ),
    Field(
        "job",
        gettext_lazy("Prometheus job"),
        "vllm",
        gettext_lazy("The job label of the vLLM scrape targets."),
    ),
    Field(
        "title", pgettext_lazy("config generator", "Dashboard title"), "vLLM overview"
    ),  # the default is the file's: English
    Field(
        "refresh",
        pgettext_lazy("config generator", "Refresh every"),
        "30s",
        kind="choice",
        choices=REFRESH_CHOICES,
    ),
    Field(
        "gpu_exporter",
        gettext_lazy("GPU exporter"),
        "dcgm",
        gettext_lazy("Where the GPU memory, utilization and temperature panels read from."),
        kind="choice",
        choices=GPU_EXPORTER_CHOICES,
    ),
)


@dataclass(frozen=True, kw_only=True)
class DashboardSpec:
    version_label: str
    metrics: VllmMetrics
    job: str
    title: str
    refresh: str
    gpu_exporter: str

    @property
    def gpu(self) -> GpuMetrics:
        return GPU_EXPORTERS[self.gpu_exporter]

    @property
    def selector(self) -> str:
        return f'job="{self.job}", instance=~"$instance"'


def build(values: Mapping[str, str]) -> DashboardSpec:
    title = safety.text("title", values["title"], max_length=120)
    if not title:
        raise safety.UnsafeValue("title: " + _("a dashboard needs a title"))
    return DashboardSpec(
        version_label=values["vllm_version"],
        metrics=metrics_for(values["vllm_version"]),
        job=safety.token("job", values["job"]),
        title=title,
        refresh=values["refresh"],
        gpu_exporter=values["gpu_exporter"],
    )


@dataclass(frozen=True)
class Panel:
    """One panel before layout: its targets as (legend, expr) pairs, in refId order."""

    title: str
    kind: str  # timeseries or stat
    unit: str
    targets: tuple[tuple[str, str], ...]
    width: int = 8
    height: int = 8
    description: str = ""
    mappings: tuple[dict[str, Any], ...] = ()
    overrides: tuple[dict[str, Any], ...] = ()


def _series(spec: DashboardSpec, metric: str, extra: str = "") -> str:
    """`metric{job="...", instance=~"$instance"}`, with more label matchers after the selector."""
    return f"{metric}{{{spec.selector}{extra}}}"


def _rate(spec: DashboardSpec, metric: str, extra: str = "") -> str:
    return f"rate({_series(spec, metric, extra)}[{RATE}])"


def _quantiles(spec: DashboardSpec, histogram: str) -> tuple[tuple[str, str], ...]:
    bucket = _rate(spec, f"{histogram}_bucket")
    return tuple((name, f"histogram_quantile({q}, sum by (le) ({bucket}))") for q, name in QUANTILES)


def overview(spec: DashboardSpec) -> list[Panel]:
    success = f"sum({_rate(spec, 'vllm:request_success_total')})"
    failed_reasons = f', finished_reason=~"{FAILED_REASONS}"'
    failed = f"sum({_rate(spec, 'vllm:request_success_total', failed_reasons)})"
    up_text = {"0": {"text": "DOWN", "color": "red"}, "1": {"text": "UP", "color": "green"}}
    return [
        Panel(
            "Service up",
            "stat",
            "none",
            (("{{instance}}", _series(spec, "up")),),
            width=6,
            height=4,
            description="Whether Prometheus can scrape each vLLM target. vLLM opens its port only after "
            "the model is loaded, so a starting instance shows as down.",
            mappings=({"type": "value", "options": up_text},),
        ),
        Panel(
            "QPS (finished requests/s)",
            "stat",
            "reqps",
            (("QPS", success),),
            width=6,
            height=4,
            description="Requests finishing per second: vllm:request_success_total, every finished_reason.",
        ),
        Panel(
            "Success rate",
            "stat",
            "percentunit",
            (("success", f"1 - ({failed} or vector(0)) / {success}"),),
            width=6,
            height=4,
            description="Share of finished requests whose finished_reason is not abort or error (vLLM "
            "counts failed requests only this way); aborts include clients that went away.",
        ),
        Panel(
            "Waiting requests",
            "stat",
            "none",
            (("waiting", f"sum({_series(spec, 'vllm:num_requests_waiting')})"),),
            width=6,
            height=4,
            description="Requests queued for a batch slot or KV cache room.",
        ),
    ]


def latency(spec: DashboardSpec) -> list[Panel]:
    itl = spec.metrics.inter_token_latency
    return [
        Panel(
            "TTFT p50 / p95 / p99",
            "timeseries",
            "s",
            _quantiles(spec, "vllm:time_to_first_token_seconds"),
            description="Time to first token: queueing plus prefill.",
        ),
        Panel(
            "End-to-end latency p50 / p95 / p99",
            "timeseries",
            "s",
            _quantiles(spec, "vllm:e2e_request_latency_seconds"),
        ),
        Panel(
            "Inter-token latency p50 / p95 / p99",
            "timeseries",
            "s",
            _quantiles(spec, itl),
            description=f"From {itl}. A request's output speed is its inverse: 0.02 s between tokens is "
            "50 tokens/s.",
        ),
    ]


def resources(spec: DashboardSpec) -> list[Panel]:
    m, gpu = spec.metrics, spec.gpu
    kv = [("KV cache {{instance}}", f"max by (instance) ({_series(spec, m.kv_usage)})")]
    if m.cpu_cache_usage:
        kv.append(("CPU swap {{instance}}", f"max by (instance) ({_series(spec, m.cpu_cache_usage)})"))
    temperature_axis = {
        "matcher": {"id": "byFrameRefID", "options": "B"},
        "properties": [{"id": "unit", "value": "celsius"}, {"id": "custom.axisPlacement", "value": "right"}],
    }
    return [
        Panel(
            "GPU memory used",
            "timeseries",
            "percentunit",
            (("{{instance}} GPU {{gpu}}", gpu.memory_ratio),),
            width=6,
            description="Share of each GPU's memory in use. vLLM takes most of it at start-up "
            "(--gpu-memory-utilization), so a high value is expected.",
        ),
        Panel(
            "KV cache usage",
            "timeseries",
            "percentunit",
            tuple(kv),
            width=6,
            description=f"From {m.kv_usage}. Above 90% is normal under load (it is a cache); watch waiting "
            "requests and TTFT.",
        ),
        Panel(
            "GPU utilization and temperature",
            "timeseries",
            "percentunit",
            (
                ("util {{instance}} GPU {{gpu}}", gpu.utilization),
                ("°C {{instance}} GPU {{gpu}}", gpu.temperature),
            ),
            width=6,
            description="Temperature on the right axis. It is a hint: throttling shows in NVML's clock "
            "throttle reasons.",
            overrides=(temperature_axis,),
        ),
        Panel(
            "CPU memory (vLLM process)",
            "timeseries",
            "bytes",
            (("{{instance}}", _series(spec, "process_resident_memory_bytes")),),
            width=6,
            description="Resident memory of the API server process. Absent with --api-server-count > 1 "
            "(multiprocess metrics).",
        ),
    ]


def throughput(spec: DashboardSpec) -> list[Panel]:
    counts = [
        ("running", f"sum({_series(spec, 'vllm:num_requests_running')})"),
        ("waiting", f"sum({_series(spec, 'vllm:num_requests_waiting')})"),
    ]
    if spec.metrics.num_requests_swapped:
        counts.append(("swapped", f"sum({_series(spec, spec.metrics.num_requests_swapped)})"))
    per_instance = "sum by (instance) ({})"
    return [
        Panel(
            "Prompt tokens/s",
            "timeseries",
            "short",
            (("{{instance}}", per_instance.format(_rate(spec, "vllm:prompt_tokens_total"))),),
            description="Prefill tokens per second, cached prompt tokens included.",
        ),
        Panel(
            "Generation tokens/s",
            "timeseries",
            "short",
            (("{{instance}}", per_instance.format(_rate(spec, "vllm:generation_tokens_total"))),),
        ),
        Panel("Running vs waiting requests", "timeseries", "none", tuple(counts)),
    ]


ROWS = (("Overview", overview), ("Latency", latency), ("Resources", resources), ("Throughput", throughput))


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": panel.width, "h": panel.height},
        "fieldConfig": {
            "defaults": {
                "unit": panel.unit,
                **({"mappings": list(panel.mappings)} if panel.mappings else {}),
            },
            "overrides": list(panel.overrides),
        },
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}
        if panel.kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value", "graphMode": "area"},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (legend, expr) in enumerate(panel.targets)
        ],
    }
    return result


def panels(spec: DashboardSpec) -> list[dict[str, Any]]:
    """Rows and their panels, laid out left to right on Grafana's 24-column grid."""
    result: list[dict[str, Any]] = []
    y = 0
    for title, row_panels in ROWS:
        result.append({"id": len(result) + 1, "type": "row", "title": title, "collapsed": False,
                       "gridPos": {"x": 0, "y": y, "w": GRID_WIDTH, "h": 1}, "panels": []})  # fmt: skip
        y, x, row_height = y + 1, 0, 0
        for panel in row_panels(spec):
            if x + panel.width > GRID_WIDTH:
                y, x, row_height = y + row_height, 0, 0
            result.append(_panel_json(panel, len(result) + 1, x, y))
            x, row_height = x + panel.width, max(row_height, panel.height)
        y += row_height
    return result


def templating(spec: DashboardSpec) -> list[dict[str, Any]]:
    query = f'label_values(up{{job="{spec.job}"}}, instance)'
    return [
        {"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
        {"name": "instance", "label": "vLLM instance", "type": "query", "datasource": DATASOURCE,
         "query": {"query": query, "refId": "instance"}, "definition": query, "refresh": 2,
         "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "options": [], "sort": 1,
         "hide": 0},
    ]  # fmt: skip


def dashboard(spec: DashboardSpec) -> dict[str, Any]:
    uid = "vllm-" + hashlib.sha1(f"{spec.title}|{spec.job}|{spec.version_label}".encode()).hexdigest()[:12]
    return {
        "title": spec.title,
        "uid": uid,
        "description": f"vLLM {spec.version_label}, job {spec.job}: generated by LLM Ops Console from the "
        "guide's panel list (5.3.3).",
        "tags": ["vllm", "llm-ops-console"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "timezone": "browser",
        "time": {"from": "now-6h", "to": "now"},
        "refresh": spec.refresh,
        "annotations": {"list": []},
        "templating": {"list": templating(spec)},
        "panels": panels(spec),
    }


def render(spec: DashboardSpec) -> list[ConfigFile]:
    return [
        ConfigFile(
            "vllm-dashboard.json", json.dumps(dashboard(spec), indent=2, ensure_ascii=False) + "\n", "json"
        )
    ]


def checks(spec: DashboardSpec) -> list[Check]:
    m = spec.metrics
    found = [
        Check(
            "ok",
            _("KV cache panel reads %(kv)s; inter-token latency reads %(itl)s")
            % {"kv": m.kv_usage, "itl": m.inter_token_latency},
            _(
                "Metric names follow vLLM's renames (kv_cache_usage_perc from 0.9, "
                "inter_token_latency_seconds from 0.11)."
            ),
        ),
        Check(
            "ok",
            _("Success rate from %(metric)s") % {"metric": "vllm:request_success_total{finished_reason}"},
            _("The guide's vllm:request_failure_total does not exist in any vLLM version."),
        ),
        Check(
            "ok",
            _("GPU panels need the %(exporter)s scraped")
            % {"exporter": dict(GPU_EXPORTER_CHOICES)[spec.gpu_exporter]},
            _("vLLM exports no GPU memory, utilization or temperature of its own."),
            _("Scrape the exporter in the same Prometheus; its targets are not filtered by job or instance."),
        ),
    ]
    if m.cpu_cache_usage:
        found.append(Check("ok", _("Swap series shown (vLLM 0.7, V0 engine)")))
    if spec.refresh == "10s":
        found.append(
            Check(
                "warning",
                _("Refreshing every 10s is faster than a usual 15s scrape"),
                _("Every refresh re-runs all queries while the data changes every scrape."),
                _("Use 30s unless the scrape interval is shorter."),
            )
        )
    return found


GENERATOR = Generator(
    key="grafana",
    label=gettext_noop("Grafana dashboard"),
    description=gettext_noop(
        "The guide's vLLM dashboard (5.3.3): overview, latency, resources and throughput rows with "
        "the metric names of the chosen vLLM version."
    ),
    fields=FIELDS,
    build=build,
    render=render,
    checks=checks,
)
