"""Plotly figures of the inventory, built here and drawn by plotly.js in the page."""

from __future__ import annotations

import json
from collections import defaultdict

import plotly.graph_objects as go
import plotly.io as pio

from fleet import gpu_catalog
from fleet.models import Gpu


def gpu_memory_by_host() -> dict:
    """Stacked bars: GiB of GPU memory on each host, one colour per GPU model."""
    per_model: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    hosts: list[str] = []
    for host_name, model, memory_mib in Gpu.objects.values_list("host__name", "model", "memory_mib"):
        if host_name not in hosts:
            hosts.append(host_name)
        per_model[model][host_name] += memory_mib / 1024
    figure = go.Figure(
        [
            go.Bar(
                name=gpu_catalog.CATALOGUE[m].name if m in gpu_catalog.CATALOGUE else m,
                x=hosts,
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
