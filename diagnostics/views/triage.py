"""Log triage: a paste gets its answer at once; an upload is read by a worker with a
progress bar that polls until the run is done. An access log leads with its story."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HTMX_STOP_POLLING

from core import figures
from core.htmx import wants_partial
from core.i18n import shown
from core.roles import Role, role_required
from diagnostics import triage_service
from diagnostics.models import TriageRun
from diagnostics.triage.access_story import describe
from diagnostics.triage.engine import TriageInputError
from diagnostics.triage.shown import shown_result, shown_story, with_code

CLASS_COLOURS = {"2xx": "#1d8a5b", "3xx": "#7f9cc4", "4xx": "#98a2b3", "429": "#d68910", "5xx": "#c0392b"}


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
        context.update(_result_context(triage_service.triage_paste(context["text"])))
    except RequestDataTooBig:
        context["error"] = _("The paste is too large; upload the log as a file.")
    except TriageInputError as exc:
        context["error"] = with_code(shown(exc.message))
    return render(request, "diagnostics/triage/page.html", context, status=400 if "error" in context else 200)


@require_GET
@role_required(Role.ENGINEER)
def run_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(TriageRun, pk=pk)
    result = run.result or {}
    error = with_code(shown(result.get("error_message"), fallback=run.error))
    context = {"run": run, "error": error, **_result_context(result)}
    if wants_partial(request, "triage-run"):
        response = render(request, "diagnostics/triage/_run.html", context)
        if run.is_finished:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "diagnostics/triage/run.html", context)


def _result_context(result: dict[str, Any]) -> dict[str, Any]:
    """A stored or fresh result, its story and chart, worded in the reader's language."""
    story = describe(result.get("access_story"))
    return {"result": shown_result(result), "story": shown_story(story), "chart": access_chart(story)}


def access_chart(story: dict[str, Any] | None) -> dict | None:
    """Requests per window by status class, stacked: when the 429s or the 5xx came."""
    if not story or not story.get("timeline"):
        return None
    windows = list(story["timeline"])
    bars = []
    for name, colour in CLASS_COLOURS.items():
        counts = [story["timeline"][w].get(name, 0) for w in windows]
        if any(counts):
            bars.append(figures.bar(x=windows, y=counts, name=name, marker={"color": colour}))
    return figures.figure(
        bars,
        barmode="stack",
        bargap=0.1,
        height=240,
        margin={"l": 45, "r": 10, "t": 30, "b": 30},
        yaxis=figures.axis(_("requests per window")),
        legend={"orientation": "h", "y": 1.15, "x": 0, "traceorder": "normal"},
        showlegend=True,
        hovermode="x unified",
    )
