"""The Drills page: the shipped scenarios with their expectations, a Run button (SRE and
above) that starts a stored drill run, and the run's page, whose progress partial polls
until the drill is done and then shows the report with each expectation met or not."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from core.htmx import wants_partial
from core.i18n import Message, later
from core.roles import Role, has_role, role_required
from fleet.simulator.scenarios import Scenario, ScenarioError
from incidents import words
from incidents.drills import service
from incidents.drills.descriptions import described
from incidents.models import DrillRun


@require_GET
@role_required(Role.VIEWER)
def index(request: HttpRequest) -> HttpResponse:
    context = {
        "scenarios": [
            (name, scenario, described(scenario.description), summary(scenario))
            for name, scenario in service.shipped()
        ],
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


def summary(scenario: Scenario) -> list[SafeString]:
    """The expectations in a few words each, for the list, in the reader's language; the
    instance names marked as names (translate="no")."""
    expect = scenario.expect
    lines: list[Message] = []
    for e in expect.instances:
        verdicts = _or([words.verdict(v) for v in e.verdicts]) if e.verdicts else later("any verdict")
        values = {"instance": _names([e.instance]), "time": escape(e.label), "verdicts": verdicts}
        lines.append(
            later(
                "%(instance)s by %(time)s: %(verdicts)s, %(category)s", category=escape(e.finding), **values
            )
            if e.finding
            else later("%(instance)s by %(time)s: %(verdicts)s", **values)
        )
    if expect.count_min is not None or expect.count_max is not None:
        low, high = expect.count_min, expect.count_max
        lines.append(
            later("incidents: %(count)s", count=low)
            if low == high
            else later("incidents: %(low)s to %(high)s", low=low or 0, high=high or later("any"))
        )
    lines += [
        later(
            "incident %(category)s on %(instances)s",
            category=escape(i.category),
            instances=_names(i.instances),
        )
        for i in expect.incidents
    ]
    # Safe: the catalogue's text around values that are escaped here or are numbers and keys.
    return [mark_safe(line.translated()) for line in lines]  # noqa: S308


def _names(names: tuple[str, ...] | list[str]) -> SafeString:
    """Instance names, escaped; on a page in another language than the scenarios' own
    (English) marked translate="no", as names stay as they are."""
    joined = format_html_join(", ", "{}", ((n,) for n in names))
    if (get_language() or "en").startswith("en"):
        return joined
    return format_html('<span translate="no">{}</span>', joined)


def _or(verdicts: list[Message | str]) -> Message | str:
    if len(verdicts) == 1:
        return verdicts[0]
    return later("%(some)s or %(last)s", some=_or(verdicts[:-1]), last=verdicts[-1])
