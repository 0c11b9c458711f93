"""Probe results on the instance page: "probe now", its progress, and the charts."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core.roles import Role, role_required
from fleet import charts, probe_service
from fleet.models import Instance, ProbeRun
from fleet.tasks import probe_instance

RANGES = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
HTMX_STOP_POLLING = 286


@require_POST
@role_required(Role.ENGINEER)
def probe_now(request: HttpRequest, pk: int) -> HttpResponse:
    instance = get_object_or_404(Instance, pk=pk)
    run = probe_service.request_probe(instance=instance, requested_by=request.user.get_username())
    transaction.on_commit(lambda: probe_instance.delay(run_id=run.pk))
    return render(request, "fleet/instances/_probe_run.html", {"run": run}, status=202)


@require_GET
@role_required(Role.VIEWER)
def run_status(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(ProbeRun.objects.select_related("instance"), pk=pk)
    response = render(request, "fleet/instances/_probe_run.html", {"run": run})
    if run.is_finished:
        response.status_code = HTMX_STOP_POLLING
    return response


@require_GET
@role_required(Role.VIEWER)
def instance_charts(request: HttpRequest, pk: int) -> HttpResponse:
    instance = get_object_or_404(Instance.objects.select_related("state"), pk=pk)
    chosen = request.GET.get("range", "1h")
    window = RANGES.get(chosen, RANGES["1h"])
    since = timezone.now() - window
    context = {
        "instance": instance,
        "range": chosen if chosen in RANGES else "1h",
        "ranges": list(RANGES),
        "panels": charts.instance_panels(instance=instance, since=since),
        "phases": charts.phase_breakdown(_latest_phases(instance)),
    }
    return render(request, "fleet/instances/_charts.html", context)


def _latest_phases(instance: Instance) -> dict | None:
    state = getattr(instance, "state", None)
    return state.kind_result("health").get("phases") if state else None
