"""Plotly figures of the inventory, built here and drawn by plotly.js in the page."""

from __future__ import annotations

import json
from collections import defaultdict

import plotly.graph_objects as go
import plotly.io as pio

from fleet import gpu_catalog
from fleet.models import Gpu, MetricSample
from fleet.sample_names import PANELS, SAMPLE_NAMES


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


def instance_panels(*, instance, since) -> list[dict]:
    """One small time-series figure per panel of fleet.sample_names.PANELS, empty ones left out."""
    series: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    rows = (
        MetricSample.objects.filter(instance=instance, name__in=SAMPLE_NAMES, ts__gte=since)
        .order_by("ts")
        .values_list("name", "ts", "value")
    )
    for name, ts, value in rows:
        series[name][0].append(ts.isoformat())
        series[name][1].append(value)
    panels = []
    for index, panel in enumerate(PANELS):
        traces = [
            go.Scatter(x=series[n][0], y=series[n][1], name=label, mode="lines+markers", marker={"size": 4})
            for n, label in panel.series
            if n in series
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
