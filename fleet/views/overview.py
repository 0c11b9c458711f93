"""The fleet overview: a tile per instance, grouped by host, refreshed by polling."""

from __future__ import annotations

from itertools import groupby

from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from diagnostics.models import CapacityFinding
from fleet.models import Instance, Verdict
from incidents.maintenance import current_and_upcoming
from core.htmx import wants_partial
from core.roles import Role, role_required

POLL_SECONDS = 10


def _tiles(state: str) -> tuple[list, dict[str, int]]:
    findings = CapacityFinding.objects.active().order_by("severity", "-last_seen")
    instances = list(
        Instance.objects.select_related("host", "state")
        .prefetch_related(Prefetch("capacity_findings", queryset=findings, to_attr="open_capacity"))
        .order_by("host__name", "name")
    )
    counts = {v.value: 0 for v in Verdict}
    for instance in instances:
        counts[instance.verdict] += 1
    shown = [i for i in instances if not state or i.verdict == state]
    groups = [(host, list(items)) for host, items in groupby(shown, key=lambda i: i.host)]
    return groups, counts


def _capacity(groups: list) -> list:
    """(instance, finding) for the open critical and warning capacity findings shown."""
    return [(i, f) for _, items in groups for i in items for f in i.open_capacity if f.severity != "info"]


@role_required(Role.VIEWER)
def overview(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in Verdict.values:
        state = ""
    groups, counts = _tiles(state)
    context = {
        "groups": groups,
        "capacity": _capacity(groups),
        "maintenance": current_and_upcoming(),
        "counts": counts,
        "state": state,
        "verdicts": Verdict.choices,
        "poll_seconds": POLL_SECONDS,
        "tab": "overview",
    }
    template = "fleet/overview/_tiles.html" if wants_partial(request, "tiles") else "fleet/overview/page.html"
    return render(request, template, context)
