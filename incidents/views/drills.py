"""The Drills page: the shipped scenarios with their expectations, a Run button (SRE and
above) that starts a stored drill run, and the run's page, whose progress partial polls
until the drill is done and then shows the report with each expectation met or not."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.htmx import wants_partial
from core.roles import Role, has_role, role_required
from fleet.simulator.scenarios import Scenario, ScenarioError
from incidents.drills import service
from incidents.models import DrillRun

HTMX_STOP_POLLING = 286


@require_GET
@role_required(Role.VIEWER)
def index(request: HttpRequest) -> HttpResponse:
    context = {
        "scenarios": [(name, scenario, summary(scenario)) for name, scenario in service.shipped()],
        "runs": DrillRun.objects.all()[:15],
        "can_run": has_role(request.user, Role.SRE),
    }
    return render(request, "incidents/drills.html", context)


@require_POST
@role_required(Role.SRE)
def start(request: HttpRequest) -> HttpResponse:
    try:
        run = service.start(scenario=request.POST.get("scenario", ""), user=request.user.get_username())
    except ScenarioError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    return redirect("drills:run", pk=run.pk)


@require_GET
@role_required(Role.VIEWER)
def run_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(DrillRun, pk=pk)
    context = {"run": run, "report": run.report or {}}
    if wants_partial(request, "drill-run"):
        response = render(request, "incidents/drill_run_progress.html", context)
        if run.is_finished:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "incidents/drill_run.html", context)


def summary(scenario: Scenario) -> list[str]:
    """The expectations in a few words each, for the list."""
    expect = scenario.expect
    lines = [
        f"{e.instance} by {e.label}: {' or '.join(e.verdicts) or 'any verdict'}"
        + (f", {e.finding}" if e.finding else "")
        for e in expect.instances
    ]
    if expect.count_min is not None or expect.count_max is not None:
        low, high = expect.count_min, expect.count_max
        lines.append(f"incidents: {low}" if low == high else f"incidents: {low or 0} to {high or 'any'}")
    lines += [f"incident {i.category} on {', '.join(i.instances)}" for i in expect.incidents]
    return lines
