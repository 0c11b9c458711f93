"""Plotly figures of the inventory, built here and drawn by plotly.js in the page."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from fleet import gpu_catalog
from fleet.models import Gpu, MetricSample, ProbeSettings
from fleet.probe_service import DEFAULT_INTERVALS_S, HOST_CHECKS_INTERVAL_S
from fleet.retention import BUCKET_SECONDS
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
        "margin": {"l": 55, "r": 10, "t": 28, "b": 45},
        "yaxis": {"title": {"text": unit}},
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        "hovermode": "x unified",
    }


@dataclass(frozen=True)
class Panel:
    title: Any  # a lazy translation
    series: tuple[tuple[str, Any], ...]  # (series name from fleet.series, legend label)
    axis: Any  # the y-axis title, with its unit
    percent: bool = False  # the series are fractions (0.42), drawn as percent (42)
    full_scale: bool = False  # the y-axis spans 0-100 (a share of something)


_S = _("seconds (s)")
# The instance page's charts: each reads declared series (fleet.series), it declares none.
PANELS: tuple[Panel, ...] = (
    Panel(
        _("Time to first token"), (("ttft_p50_s", "p50"), ("ttft_p95_s", "p95"), ("ttft_p99_s", "p99")), _S
    ),
    Panel(_("End-to-end latency"), (("e2e_p50_s", "p50"), ("e2e_p95_s", "p95"), ("e2e_p99_s", "p99")), _S),
    Panel(
        _("KV cache usage"),
        (("kv_cache_usage", _("GPU")), ("kv_swap", _("CPU (swapped)"))),
        _("KV cache used (%)"),
        percent=True,
        full_scale=True,
    ),
    Panel(
        _("Requests"),
        (("num_requests_running", _("running")), ("num_requests_waiting", _("waiting"))),
        _("requests"),
    ),
    Panel(
        _("Tokens per second"),
        (
            ("prompt_tokens_per_s", _("prompt")),
            ("generation_tokens_per_s", _("generation")),
            ("stream_tokens_per_s", _("probe stream")),
        ),
        _("tokens/s"),
    ),
    Panel(_("Finished requests"), (("requests_per_s", _("finished")),), _("requests/s")),
    Panel(
        _("Errors"), (("error_rate", _("abort or error")),), _("requests ending in error (%)"), percent=True
    ),
    Panel(_("Preemptions"), (("preemptions_per_s", _("preemptions")),), _("preemptions/s")),
    Panel(
        _("Prompt length"),
        (("prompt_length_p50", "p50"), ("prompt_length_p95", "p95"), ("prompt_length_p99", "p99")),
        _("tokens"),
    ),
    Panel(
        _("GPU memory and utilization"),
        (("gpu_memory_used_pct", _("memory used")), ("gpu_sm_utilization_pct", _("SM utilization"))),
        _("percent (%)"),
        full_scale=True,
    ),
    Panel(_("GPU temperature"), (("gpu_temperature_c", _("hottest GPU")),), _("temperature (°C)")),
    # From the host's agent: a steady climb is the guide's tokenizer leak (2.4.2).
    Panel(_("Engine process memory (RSS)"), (("engine_rss_gib", _("RSS")),), _("host memory (GiB)")),
    Panel(
        _("Probe latency"),
        (
            ("probe_connect_s", _("connect")),
            ("probe_ttfb_s", "TTFB"),
            ("probe_total_s", _("total")),
            ("stream_ttft_s", _("stream TTFT")),
        ),
        _S,
    ),
)

GAP_FACTOR = 2.5  # a gap of more than this many sampling intervals is missing samples


def with_gaps(
    points: list[tuple[datetime, float]], *, every_s: float, coarse_before: datetime | None = None
) -> list[tuple[datetime, float | None]]:
    """The points with a None (a break in the line) wherever more than GAP_FACTOR sampling
    intervals pass between two samples. Samples older than coarse_before are the retention's
    averages, one per BUCKET_SECONDS, and are expected that far apart."""
    out: list[tuple[datetime, float | None]] = list(points[:1])
    for (before, _value), (after, value) in pairwise(points):
        coarse = coarse_before is not None and before < coarse_before
        expected = max(every_s, BUCKET_SECONDS) if coarse else every_s
        if (after - before).total_seconds() > GAP_FACTOR * expected:
            out.append((before + (after - before) / 2, None))
        out.append((after, value))
    return out


def _trace(panel: Panel, points: list, label: Any) -> go.Scatter:
    scale = 100.0 if panel.percent else 1.0
    return go.Scatter(
        x=[timezone.localtime(ts).isoformat() for ts, _v in points],
        y=[None if v is None else v * scale for _ts, v in points],
        name=str(label),
        mode="lines+markers",
        marker={"size": 4},
        connectgaps=False,
    )


def _panel_layout(panel: Panel, index: int, window: tuple[datetime, datetime]) -> dict:
    layout = _layout(str(panel.axis))
    zone = timezone.get_current_timezone_name()
    layout["xaxis"] = {
        "title": {"text": str(_("time (%(zone)s)") % {"zone": zone})},
        "range": [timezone.localtime(t).isoformat() for t in window],  # the chosen range, on every chart
    }
    layout["uirevision"] = f"panel-{index}"  # zoom and hidden traces survive a refresh
    if panel.full_scale:
        layout["yaxis"]["range"] = [0, 100]
    elif panel.percent:
        layout["yaxis"]["rangemode"] = "tozero"
    return layout


def sampling_interval_s(points: list[tuple[datetime, float]], *, default_s: float) -> float:
    """Seconds between a series' samples: the median spacing of its points, at least the
    default interval of its probe kind (a schedule slowed in the admin shows in the data)."""
    spacing = sorted((b - a).total_seconds() for (a, _a), (b, _b) in pairwise(points))
    return max(default_s, spacing[len(spacing) // 2]) if spacing else default_s


def _every_s(points: list, name: str, coarse_before: datetime) -> float:
    raw = [p for p in points if p[0] >= coarse_before]
    kind = BY_NAME[name].kind
    return sampling_interval_s(raw, default_s=DEFAULT_INTERVALS_S.get(kind, HOST_CHECKS_INTERVAL_S))


def instance_panels(*, instance, since) -> list[dict]:
    """One small time-series figure per panel of PANELS, empty ones left out; lines break
    where samples are missing."""
    coarse_before = timezone.now() - timedelta(hours=ProbeSettings.current().raw_retention_hours)
    names = {n for panel in PANELS for n, _label in panel.series}
    stored = MetricSample.objects.points(instances=[instance], names=names, since=since).get(instance.pk, {})
    panels = []
    for index, panel in enumerate(PANELS):
        traces = [
            _trace(
                panel,
                with_gaps(
                    stored[n], every_s=_every_s(stored[n], n, coarse_before), coarse_before=coarse_before
                ),
                label,
            )
            for n, label in panel.series
            if n in stored
        ]
        if traces:
            figure = go.Figure(traces, layout=_panel_layout(panel, index, (since, timezone.now())))
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
    ("connect_s", _("connect")),
    ("tls_s", "TLS"),
    ("ttfb_s", "TTFB"),
    ("total_s", _("total")),
)


def phase_breakdown(phases: dict | None) -> dict | None:
    """The latest health probe's curl-style phases as one stacked bar (each phase's own share)."""
    if not phases:
        return None
    previous, traces, bar = 0.0, [], str(_("latest probe"))
    for key, phase in PHASES:
        label = str(phase)
        cumulative = phases.get(key)
        if cumulative is None:
            continue
        traces.append(
            go.Bar(
                y=[bar],
                x=[max(cumulative - previous, 0.0)],
                name=label,
                orientation="h",
                hovertemplate=f"{label}: %{{x:.3f}} s<extra></extra>",
            )
        )
        previous = max(previous, cumulative)
    layout = {**_layout("", 160), "barmode": "stack", "xaxis": {"title": {"text": str(_("seconds (s)"))}}}
    figure = go.Figure(traces, layout=layout)
    return json.loads(pio.to_json(figure))
