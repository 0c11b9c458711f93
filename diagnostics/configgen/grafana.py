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
# SGLang (docs/sglang-operations.md): a row of its own over the `sglang:` metrics.
ENGINE_CHOICES = (("vllm", "vLLM"), ("sglang", "SGLang"), ("both", "vLLM + SGLang"))
DEFAULT_TITLE = "vLLM overview"
DEFAULT_TITLES = {"vllm": DEFAULT_TITLE, "sglang": "SGLang overview", "both": "vLLM and SGLang overview"}

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
        "engine",
        gettext_lazy("Engine"),
        "vllm",
        gettext_lazy("vLLM's four rows, an SGLang row, or both."),
        kind="choice",
        choices=ENGINE_CHOICES,
    ),
    Field(
        "sglang_job",
        gettext_lazy("SGLang Prometheus job"),
        "sglang",
        gettext_lazy("The job label of the SGLang scrape targets (started with `--enable-metrics`)."),
    ),
    Field(
        "title", pgettext_lazy("config generator", "Dashboard title"), DEFAULT_TITLE
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
    engine: str = "vllm"
    sglang_job: str = "sglang"

    @property
    def has_vllm(self) -> bool:
        return self.engine in ("vllm", "both")

    @property
    def has_sglang(self) -> bool:
        return self.engine in ("sglang", "both")

    @property
    def sglang_selector(self) -> str:
        return f'job="{self.sglang_job}", instance=~"$sglang_instance"'

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
    engine = values["engine"]
    if title == DEFAULT_TITLE:  # the untouched default names the engines shown
        title = DEFAULT_TITLES.get(engine, DEFAULT_TITLE)
    return DashboardSpec(
        version_label=values["vllm_version"],
        metrics=metrics_for(values["vllm_version"]),
        job=safety.token("job", values["job"]),
        title=title,
        refresh=values["refresh"],
        gpu_exporter=values["gpu_exporter"],
        engine=engine,
        sglang_job=safety.token("sglang_job", values["sglang_job"]),
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


def _sglang(spec: DashboardSpec, metric: str) -> str:
    return f"{metric}{{{spec.sglang_selector}}}"


def _sglang_sum(spec: DashboardSpec, metric: str, by: str = "") -> str:
    """A per-scheduler gauge summed over DP ranks, the TP ranks of one DP rank counted once
    (they report the same with --enable-metrics-for-all-schedulers)."""
    inner = f"max by (instance, dp_rank) ({_sglang(spec, metric)})"
    return f"sum by ({by}) ({inner})" if by else f"sum({inner})"


def _sglang_quantiles(spec: DashboardSpec, histogram: str) -> tuple[tuple[str, str], ...]:
    bucket = f"rate({_sglang(spec, histogram + '_bucket')}[{RATE}])"
    return tuple((name, f"histogram_quantile({q}, sum by (le) ({bucket}))") for q, name in QUANTILES)


def sglang_row(spec: DashboardSpec) -> list[Panel]:
    """SGLang's row: its own names for the same questions (sglang:num_queue_reqs is vLLM's
    waiting, sglang:token_usage its KV cache usage) and what only SGLang reports."""
    up_text = {"0": {"text": "DOWN", "color": "red"}, "1": {"text": "UP", "color": "green"}}
    return [
        Panel(
            "SGLang up",
            "stat",
            "none",
            (("{{instance}}", _sglang(spec, "up")),),
            width=6,
            height=4,
            description="Whether Prometheus can scrape each SGLang target. SGLang serves /metrics only when "
            "started with --enable-metrics, and opens its port after loading and CUDA graph capture.",
            mappings=({"type": "value", "options": up_text},),
        ),
        Panel(
            "Running requests",
            "stat",
            "none",
            (("running", _sglang_sum(spec, "sglang:num_running_reqs")),),
            width=6,
            height=4,
            description="sglang:num_running_reqs: requests in the decode batch, capped by "
            "--max-running-requests.",
        ),
        Panel(
            "Queued requests",
            "stat",
            "none",
            (("queued", _sglang_sum(spec, "sglang:num_queue_reqs")),),
            width=6,
            height=4,
            description="sglang:num_queue_reqs: requests waiting for the scheduler; their wait is part of "
            "the TTFT.",
        ),
        Panel(
            "Token usage (KV cache)",
            "stat",
            "percentunit",
            (("token usage", f"max({_sglang(spec, 'sglang:token_usage')})"),),
            width=6,
            height=4,
            description="sglang:token_usage: the used share of the KV cache pool. Above 0.9 is good "
            "utilization; with requests queued it is the limit.",
        ),
        Panel(
            "SGLang TTFT p50 / p95 / p99",
            "timeseries",
            "s",
            _sglang_quantiles(spec, "sglang:time_to_first_token_seconds"),
            description="Time to first token: queueing plus prefill (in chunks of --chunked-prefill-size).",
        ),
        Panel(
            "SGLang inter-token latency p50 / p95 / p99",
            "timeseries",
            "s",
            _sglang_quantiles(spec, "sglang:inter_token_latency_seconds"),
        ),
        Panel(
            "SGLang end-to-end latency p50 / p95 / p99",
            "timeseries",
            "s",
            _sglang_quantiles(spec, "sglang:e2e_request_latency_seconds"),
        ),
        Panel(
            "Generation throughput (tokens/s)",
            "timeseries",
            "short",
            (("{{instance}}", _sglang_sum(spec, "sglang:gen_throughput", by="instance")),),
            description="sglang:gen_throughput, updated while the scheduler decodes: 0 with requests "
            "running means it makes no progress.",
        ),
        Panel(
            "Token usage and prefix cache hit rate",
            "timeseries",
            "percentunit",
            (
                ("token usage {{instance}}", f"max by (instance) ({_sglang(spec, 'sglang:token_usage')})"),
                ("cache hit {{instance}}", f"max by (instance) ({_sglang(spec, 'sglang:cache_hit_rate')})"),
            ),
            description="A falling cache hit rate means shared prefixes are prefilled again (routing, "
            "--disable-radix-cache).",
        ),
        Panel(
            "SGLang running vs queued requests",
            "timeseries",
            "none",
            (
                ("running {{instance}}", _sglang_sum(spec, "sglang:num_running_reqs", by="instance")),
                ("queued {{instance}}", _sglang_sum(spec, "sglang:num_queue_reqs", by="instance")),
            ),
        ),
    ]


def rows(spec: DashboardSpec) -> list[tuple[str, Any]]:
    """The guide's four vLLM rows, the SGLang row, or both, as the engine choice says."""
    found = list(ROWS) if spec.has_vllm else []
    if spec.has_sglang:
        found.append(("SGLang", sglang_row))
    return found


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
    for title, row_panels in rows(spec):
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
    if not spec.has_vllm:
        return [_datasource_variable(), _sglang_variable(spec)]
    found = _vllm_templating(spec)
    if spec.has_sglang:
        found.append(_sglang_variable(spec))
    return found


def _datasource_variable() -> dict[str, Any]:
    return {"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []}  # fmt: skip


def _sglang_variable(spec: DashboardSpec) -> dict[str, Any]:
    query = f'label_values(up{{job="{spec.sglang_job}"}}, instance)'
    return {"name": "sglang_instance", "label": "SGLang instance", "type": "query", "datasource": DATASOURCE,
            "query": {"query": query, "refId": "sglang_instance"}, "definition": query, "refresh": 2,
            "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "options": [], "sort": 1,
            "hide": 0}  # fmt: skip


def _vllm_templating(spec: DashboardSpec) -> list[dict[str, Any]]:
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
    key = f"{spec.title}|{spec.job}|{spec.version_label}"
    if spec.engine != "vllm":
        key += f"|{spec.engine}|{spec.sglang_job}"
    uid = ("vllm-" if spec.has_vllm else "sglang-") + hashlib.sha1(key.encode()).hexdigest()[:12]
    described = []
    if spec.has_vllm:
        described.append(
            f"vLLM {spec.version_label}, job {spec.job}: generated by LLM Ops Console from the "
            "guide's panel list (5.3.3)."
        )
    if spec.has_sglang:
        described.append(
            f"SGLang, job {spec.sglang_job}: generated by LLM Ops Console; SGLang exports these metrics only "
            "when started with --enable-metrics."
        )
    tags = (["vllm"] if spec.has_vllm else []) + (["sglang"] if spec.has_sglang else []) + ["llm-ops-console"]
    return {
        "title": spec.title,
        "uid": uid,
        "description": " ".join(described),
        "tags": tags,
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
    found = _vllm_checks(spec) if spec.has_vllm else []
    if spec.has_sglang:
        found.append(
            Check(
                "ok",
                _("The SGLang panels read the `sglang:` metrics of job %(job)s") % {"job": spec.sglang_job},
                _(
                    "SGLang exports them only when started with `--enable-metrics`; without it `/metrics` "
                    "answers 404 and the target counts as down."
                ),
            )
        )
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


def _vllm_checks(spec: DashboardSpec) -> list[Check]:
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
