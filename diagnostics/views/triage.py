"""Log triage: a paste gets its answer at once; an upload is read by a worker with a
progress bar that polls until the run is done."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from core.htmx import wants_partial
from core.roles import Role, role_required
from diagnostics import triage_service
from diagnostics.models import TriageRun
from diagnostics.triage.engine import TriageInputError

HTMX_STOP_POLLING = 286


@require_http_methods(["GET", "POST"])
@role_required(Role.ENGINEER)
def triage(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {"text": "", "runs": TriageRun.objects.all()[:10]}
    if request.method != "POST":
        return render(request, "diagnostics/triage/page.html", context)
    try:
        upload = request.FILES.get("file")
        if upload:
            run = triage_service.start_upload(upload=upload, user=request.user.get_username())
            return redirect("diagnostics:triage-run", pk=run.pk)
        context["text"] = request.POST.get("text", "")
        context["result"] = triage_service.triage_paste(context["text"])
        context["chart"] = access_chart(context["result"].get("access_log"))
    except RequestDataTooBig:
        context["error"] = "The paste is too large; upload the log as a file."
    except TriageInputError as exc:
        context["error"] = str(exc)
    return render(request, "diagnostics/triage/page.html", context, status=400 if "error" in context else 200)


@require_GET
@role_required(Role.ENGINEER)
def run_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(TriageRun, pk=pk)
    result = run.result or {}
    context = {"run": run, "result": result, "chart": access_chart(result.get("access_log"))}
    if wants_partial(request, "triage-run"):
        response = render(request, "diagnostics/triage/_run.html", context)
        if run.is_finished:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "diagnostics/triage/run.html", context)


def access_chart(access: dict[str, Any] | None) -> dict | None:
    """Requests, 429s and 5xx per window, and the top talkers' requests: the spike."""
    if not access or not access.get("per_window"):
        return None
    windows = list(access["per_window"])
    figure = go.Figure()
    for key, name in (("requests", "all requests"), ("429", "429"), ("5xx", "5xx")):
        figure.add_trace(go.Scatter(x=windows, y=[access["per_window"][w][key] for w in windows], name=name))
    for ip, points in access.get("per_window_top", {}).items():
        figure.add_trace(
            go.Bar(x=list(points), y=list(points.values()), name=ip, opacity=0.45, visible="legendonly")
        )
    figure.update_layout(
        height=320,
        margin={"l": 50, "r": 10, "t": 10, "b": 40},
        yaxis_title=f"per {access['window_minutes']} min",
        legend={"orientation": "h", "y": -0.25},
        hovermode="x unified",
    )
    return json.loads(pio.to_json(figure))
