"""Plotly figures of the inventory as plain data (core.figures), drawn by plotly.js in the page."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import Any

from django.utils import timezone
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from core import figures
from fleet import gpu_catalog
from fleet.chart_lines import Line, bucket_lines, local_texts, raw_lines, sampling_interval_s
from fleet.chart_series import MAX_POINTS, bucket_width_s
from fleet.models import Gpu, ProbeSettings
from fleet.probe_service import DEFAULT_INTERVALS_S, HOST_CHECKS_INTERVAL_S
from fleet.series import BY_NAME

__all__ = ["PANELS", "instance_panels", "phase_breakdown"]


def gpu_memory_by_host() -> dict:
    """Stacked bars: GiB of GPU memory on each host, one colour per GPU model."""
    per_model: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    hosts: dict[str, None] = {}  # ordered set: hosts in the order the GPUs come
    for host_name, model, memory_mib in Gpu.objects.values_list("host__name", "model", "memory_mib"):
        hosts.setdefault(host_name)
        per_model[model][host_name] += memory_mib / 1024
    bars = [
        figures.bar(
            name=gpu_catalog.CATALOGUE[m].name if m in gpu_catalog.CATALOGUE else m,
            x=list(hosts),
            y=[round(per_model[m][h], 1) for h in hosts],
        )
        for m in sorted(per_model)
    ]
    return figures.figure(
        bars,
        barmode="stack",
        height=320,
        margin={"l": 50, "r": 10, "t": 10, "b": 40},
        yaxis=figures.axis("GiB"),
        legend={"orientation": "h", "y": -0.2},
    )


def _layout(unit: str, height: int = 220) -> dict:
    return {
        "height": height,
        "margin": {"l": 55, "r": 10, "t": 28, "b": 45},
        "yaxis": figures.axis(unit),
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


# Up to this span every sample is drawn (a few hundred points a series); longer ranges are
# read as buckets of their lowest and highest values (fleet.chart_series).
RAW_SPAN_S = MAX_POINTS // 2 * min(DEFAULT_INTERVALS_S.values())
_NAMES = frozenset(n for panel in PANELS for n, _label in panel.series)
_SCALES = {n: 100.0 for panel in PANELS if panel.percent for n, _label in panel.series}


def _trace(line: Line, label: Any) -> dict:
    """A line as a scatter trace: every sample with its marker, or evenly spaced buckets."""
    y = figures.Written(line.y, line.y_texts)
    if line.x is not None:
        x = figures.Written(line.x, line.x_texts or [])
        return figures.scatter(
            name=label, x=x, y=y, mode="lines+markers", marker={"size": 4}, connectgaps=False
        )
    return figures.scatter(
        name=label,
        x0=local_texts([line.x0_s])[0],
        dx=int(line.dx_s * 1000),  # milliseconds on a date axis
        y=y,
        mode="lines",
        connectgaps=False,
    )


@dataclass(frozen=True)
class _Words:
    """The panels' words in one language, looked up once per process and language rather
    than once per trace and request."""

    titles: tuple[str, ...]
    axes: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]  # each panel's series labels, in PANELS' order
    time: str


@lru_cache(maxsize=8)
def _words(language: str | None) -> _Words:  # noqa: ARG001 - the cache's key
    return _Words(
        titles=tuple(str(p.title) for p in PANELS),
        axes=tuple(str(p.axis) for p in PANELS),
        labels=tuple(tuple(str(label) for _n, label in p.series) for p in PANELS),
        time=str(_("time (%(zone)s)")),
    )


def _panel_layout(panel: Panel, index: int, window: list[str], words: _Words) -> dict:
    layout = _layout(words.axes[index])
    layout["xaxis"] = figures.axis(
        words.time % {"zone": timezone.get_current_timezone_name()},
        range=window,  # the chosen range, on every chart
        type="date",  # raw samples come as milliseconds, which would read as plain numbers
    )
    layout["uirevision"] = f"panel-{index}"  # zoom and hidden traces survive a refresh
    if panel.full_scale:
        layout["yaxis"]["range"] = [0, 100]
    elif panel.percent:
        layout["yaxis"]["rangemode"] = "tozero"
    return layout


def _default_every_s(name: str) -> float:
    return DEFAULT_INTERVALS_S.get(BY_NAME[name].kind, HOST_CHECKS_INTERVAL_S)


def _lines(*, instance, since: datetime, now: datetime, raw_hours: int) -> dict[str, Line]:  # noqa: ANN001
    """Every sample for a short range (a series sampled faster than usual in buckets), buckets
    of lowest and highest values for a long one."""
    coarse_before = (now - timedelta(hours=raw_hours)).timestamp()
    span_s = (now - since).total_seconds()
    width_s = bucket_width_s(span_s)
    buckets = partial(
        bucket_lines,
        instance=instance,
        since=since,
        now=now,
        width_s=width_s,
        scales=_SCALES,
        every_s=_default_every_s,
        coarse_before=int(coarse_before // width_s),
    )
    if span_s > RAW_SPAN_S:
        return buckets(names=_NAMES)

    def every_s(name: str, points: list) -> float:
        raw = [p for p in points if p[0] >= coarse_before]
        return sampling_interval_s(raw, default_s=_default_every_s(name))

    lines = raw_lines(
        instance=instance,
        names=_NAMES,
        since=since,
        now=now,
        scales=_SCALES,
        every_s=every_s,
        coarse_before=coarse_before,
    )
    dense = {name for name, line in lines.items() if len(line.y) > MAX_POINTS}
    return lines | (buckets(names=dense) if dense else {})


def instance_panels(*, instance, since, raw_hours: int | None = None) -> list[dict]:  # noqa: ANN001
    """One small time-series figure per panel of PANELS, empty ones left out; lines break
    where samples are missing. At most MAX_POINTS points a trace, spikes kept. raw_hours:
    the retention's raw_retention_hours where the caller has read it (ProbeSettings)."""
    now = timezone.now()
    if raw_hours is None:
        raw_hours = ProbeSettings.current().raw_retention_hours
    lines = _lines(instance=instance, since=since, now=now, raw_hours=raw_hours)
    window = local_texts([since.timestamp(), now.timestamp()])
    words = _words(get_language())
    panels = []
    for index, panel in enumerate(PANELS):
        labels = words.labels[index]
        traces = [_trace(lines[n], labels[i]) for i, (n, _label) in enumerate(panel.series) if n in lines]
        if traces:
            panels.append(
                {
                    "id": f"panel-{index}",
                    "figure_id": f"panel-{index}-figure",
                    "title": words.titles[index],
                    "figure": figures.figure(traces, **_panel_layout(panel, index, window, words)),
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
            figures.bar(
                y=[bar],
                x=[max(cumulative - previous, 0.0)],
                name=label,
                orientation="h",
                hovertemplate=f"{label}: %{{x:.3f}} s<extra></extra>",
            )
        )
        previous = max(previous, cumulative)
    layout = {**_layout("", 160), "barmode": "stack", "xaxis": figures.axis(_("seconds (s)"))}
    return figures.figure(traces, **layout)
