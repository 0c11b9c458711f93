"""Probe results on the instance page: its live state, "probe now" with its progress, and
the charts. The state and the charts poll; a requested run is polled until it ends."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from core import figures
from core.roles import Role, role_required
from fleet import chart_series, charts, probe_service
from fleet.agent.status import condition_of
from fleet.host_condition import instance_line
from fleet.models import Instance, ProbeKindChoice, ProbeRun, ProbeSettings
from fleet.probes.outcomes import Outcome
from fleet.probes.parts import ProbeKind
from fleet.tasks import probe_instance

RANGES = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
PROBED_EVENT = "instance-probed"  # the state and the charts reload on it
QUEUE_GRACE_S = 15  # for a worker to take a requested run up, and to judge and store it

OUTCOMES = {
    Outcome.OK: _("ok"),
    Outcome.REFUSED: _("connection refused"),
    Outcome.DNS_FAILURE: _("DNS lookup failed"),
    Outcome.CONNECT_TIMEOUT: _("connect timed out"),
    Outcome.READ_TIMEOUT: _("timed out waiting for the answer"),
    Outcome.RESET: _("connection reset"),
    Outcome.BAD_STATUS: _("error status"),
    Outcome.GARBAGE: _("unreadable answer"),
    Outcome.TOO_LARGE: _("answer too large"),
    Outcome.TLS_ERROR: _("TLS error"),
    Outcome.ERROR: _("error"),
}


def run_time_limit_s(probe_settings: ProbeSettings) -> int:
    """How long the page waits for a requested run: the probe's longest deadline plus
    QUEUE_GRACE_S, never past the task's hard time limit (the worker is killed there)."""
    limits = probe_service.limits_from(probe_settings)
    longest = max(limits.total_deadline_s, limits.stream_deadline_s)
    return int(min(longest + QUEUE_GRACE_S, probe_instance.time_limit or longest + QUEUE_GRACE_S))


@dataclass(frozen=True)
class Step:
    """One probe kind of a requested run: running, ok, failed, or abandoned (time limit)."""

    kind: str
    label: str
    state: str
    outcome: str = ""
    error: str = ""
    elapsed_s: float | None = None


def _steps(run: ProbeRun, *, timed_out: bool) -> list[Step]:
    progress = (run.result or {}).get("progress") or {}
    labels = dict(ProbeKindChoice.choices)
    steps = []
    for kind in (k.value for k in ProbeKind if k.value in progress):
        note = progress[kind]
        if not note:
            state = "abandoned" if timed_out or run.is_finished else "running"
            steps.append(Step(kind, labels[kind], state))
            continue
        outcome = note.get("outcome", "")
        state = "ok" if outcome == Outcome.OK else "failed"
        label = OUTCOMES.get(outcome, outcome)
        steps.append(Step(kind, labels[kind], state, label, note.get("error", ""), note.get("elapsed_s")))
    return steps


def _render_run(request: HttpRequest, run: ProbeRun, *, status: int = 200) -> HttpResponse:
    limit_s = run_time_limit_s(ProbeSettings.current())
    elapsed_s = (timezone.now() - run.started_at).total_seconds()
    timed_out = not run.is_finished and elapsed_s > limit_s
    context = {
        "run": run,
        "steps": _steps(run, timed_out=timed_out),
        "limit_s": limit_s,
        "elapsed_s": int(elapsed_s),
        "timed_out": timed_out,
        "took_s": (run.finished_at - run.started_at).total_seconds() if run.finished_at else None,
    }
    response = render(request, "fleet/instances/_probe_run.html", context, status=status)
    if run.is_finished or timed_out:
        response.status_code = HTMX_STOP_POLLING
        response["HX-Trigger"] = PROBED_EVENT
    return response


@require_POST
@role_required(Role.ENGINEER)
def probe_now(request: HttpRequest, pk: int) -> HttpResponse:
    instance = get_object_or_404(Instance, pk=pk)
    run = probe_service.request_probe(instance=instance, requested_by=request.user.get_username())
    transaction.on_commit(lambda: probe_instance.delay(run_id=run.pk))
    return _render_run(request, run, status=202)


@require_GET
@role_required(Role.VIEWER)
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's progress, kind by kind; 286 (stop polling) once it ended or its time passed."""
    run = get_object_or_404(ProbeRun.objects.select_related("instance"), pk=pk)
    return _render_run(request, run)


@require_GET
@role_required(Role.VIEWER)
def instance_state(request: HttpRequest, pk: int) -> HttpResponse:
    """The state block (verdict, reason, findings), polled by the instance page."""
    instance = get_object_or_404(Instance.objects.select_related("state", "host", "host__agent"), pk=pk)
    context = {"object": instance, "poll_seconds": settings.OVERVIEW_POLL_S}
    if instance.verdict in ("down", "failing"):  # is it the instance, or its host?
        condition = condition_of(instance.host)
        context |= {
            "host_line": instance_line(verdict=instance.verdict, host=condition),
            "host_up": condition.host_up,
        }
    return render(request, "fleet/instances/_state.html", context)


@require_GET
@role_required(Role.VIEWER)
def instance_charts(request: HttpRequest, pk: int) -> HttpResponse:
    instance = chart_series.charted_instance(pk)
    if instance is None:
        raise Http404
    chosen = request.GET.get("range", "1h")
    chosen = chosen if chosen in RANGES else "1h"
    since = timezone.now() - RANGES[chosen]
    panels = charts.instance_panels(instance=instance, since=since, raw_hours=instance.raw_hours)
    phases = charts.phase_breakdown(instance.phases)
    context = {
        "charts_url": reverse("fleet:instance-charts", args=[instance.pk]),
        "range": chosen,
        "ranges": list(RANGES),
        "panels": [panel | {"json": figures.to_json(panel["figure"])} for panel in panels],
        "phases": phases and figures.to_json(phases),
        # New samples come at most once a probe interval: no sense in redrawing faster.
        "poll_seconds": max(settings.OVERVIEW_POLL_S, min(probe_service.DEFAULT_INTERVALS_S.values())),
    }
    return render(request, "fleet/instances/_charts.html", context)
