"""Plotly figures of the inventory, built here and drawn by plotly.js in the page."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io as pio

from fleet import gpu_catalog
from fleet.models import Gpu, MetricSample
from fleet.series import BY_NAME


def gpu_memory_by_host() -> dict:
    """Stacked bars: GiB of GPU memory on each host, one colour per GPU model."""
    per_model: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    hosts: dict[str, None] = {}  # ordered set: hosts in the order the GPUs come
    for host_name, model, memory_mib in Gpu.objects.values_list("host__name", "model", "memory_mib"):
        hosts.setdefault(host_name)
        per_model[model][host_name] += memory_mib / 1024
    figure = go.Figure(
        [
            go.Bar(
                name=gpu_catalog.CATALOGUE[m].name if m in gpu_catalog.CATALOGUE else m,
                x=list(hosts),
                y=[round(per_model[m][h], 1) for h in hosts],
            )
            for m in sorted(per_model)
        ]
    )
    figure.update_layout(
        barmode="stack",
        height=320,
        margin={"l": 50, "r": 10, "t": 10, "b": 40},
        yaxis_title="GiB",
        legend={"orientation": "h", "y": -0.2},
    )
    return json.loads(pio.to_json(figure))


def _layout(unit: str, height: int = 220) -> dict:
    return {
        "height": height,
        "margin": {"l": 50, "r": 10, "t": 10, "b": 30},
        "yaxis": {"title": unit},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "x unified",
    }


@dataclass(frozen=True)
class Panel:
    title: str
    series: tuple[tuple[str, str], ...]  # (series name from fleet.series, legend label)

    @property
    def unit(self) -> str:
        return BY_NAME[self.series[0][0]].unit


# The instance page's charts: each reads declared series (fleet.series), it declares none.
PANELS: tuple[Panel, ...] = (
    Panel("Time to first token", (("ttft_p50_s", "p50"), ("ttft_p95_s", "p95"), ("ttft_p99_s", "p99"))),
    Panel("End-to-end latency", (("e2e_p50_s", "p50"), ("e2e_p95_s", "p95"), ("e2e_p99_s", "p99"))),
    Panel("KV cache usage", (("kv_cache_usage", "used"), ("kv_swap", "CPU (swapped)"))),
    Panel("Requests", (("num_requests_running", "running"), ("num_requests_waiting", "waiting"))),
    Panel(
        "Tokens per second",
        (
            ("prompt_tokens_per_s", "prompt"),
            ("generation_tokens_per_s", "generation"),
            ("stream_tokens_per_s", "probe stream"),
        ),
    ),
    Panel("Finished requests", (("requests_per_s", "per s"),)),
    Panel("Errors", (("error_rate", "abort or error"),)),
    Panel("Preemptions", (("preemptions_per_s", "preemptions"),)),
    Panel(
        "Prompt length",
        (("prompt_length_p50", "p50"), ("prompt_length_p95", "p95"), ("prompt_length_p99", "p99")),
    ),
    Panel(
        "GPU memory and utilization",
        (("gpu_memory_used_pct", "memory used"), ("gpu_sm_utilization_pct", "SM utilization")),
    ),
    Panel("GPU temperature", (("gpu_temperature_c", "hottest GPU"),)),
    Panel(
        "Probe latency",
        (
            ("probe_connect_s", "connect"),
            ("probe_ttfb_s", "TTFB"),
            ("probe_total_s", "total"),
            ("stream_ttft_s", "stream TTFT"),
        ),
    ),
)


def instance_panels(*, instance, since) -> list[dict]:
    """One small time-series figure per panel of PANELS, empty ones left out."""
    names = {n for panel in PANELS for n, _ in panel.series}
    stored = MetricSample.objects.points(instances=[instance], names=names, since=since).get(instance.pk, {})
    panels = []
    for index, panel in enumerate(PANELS):
        traces = [
            go.Scatter(
                x=[ts.isoformat() for ts, _ in stored[n]],
                y=[v for _, v in stored[n]],
                name=label,
                mode="lines+markers",
                marker={"size": 4},
            )
            for n, label in panel.series
            if n in stored
        ]
        if traces:
            figure = go.Figure(traces, layout=_layout(panel.unit))
            panels.append(
                {
                    "id": f"panel-{index}",
                    "figure_id": f"panel-{index}-figure",
                    "title": panel.title,
                    "figure": json.loads(pio.to_json(figure)),
                }
            )
    return panels


PHASES = (
    ("dns_s", "DNS"),
    ("connect_s", "connect"),
    ("tls_s", "TLS"),
    ("ttfb_s", "TTFB"),
    ("total_s", "total"),
)


def phase_breakdown(phases: dict | None) -> dict | None:
    """The latest health probe's curl-style phases as one stacked bar (each phase's own share)."""
    if not phases:
        return None
    previous, traces = 0.0, []
    for key, label in PHASES:
        cumulative = phases.get(key)
        if cumulative is None:
            continue
        traces.append(
            go.Bar(
                y=["latest probe"],
                x=[max(cumulative - previous, 0.0)],
                name=label,
                orientation="h",
                hovertemplate=f"{label}: %{{x:.3f}} s<extra></extra>",
            )
        )
        previous = max(previous, cumulative)
    figure = go.Figure(traces, layout={**_layout("", 160), "barmode": "stack", "xaxis": {"title": "s"}})
    return json.loads(pio.to_json(figure))
