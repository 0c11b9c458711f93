"""The fleet overview: a tile per instance, grouped by host, refreshed by polling."""

from __future__ import annotations

from itertools import groupby

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.models import Instance, Verdict
from ops_console.htmx import wants_partial
from ops_console.roles import Role, role_required

POLL_SECONDS = 10


def _tiles(state: str) -> tuple[list, dict[str, int]]:
    instances = list(Instance.objects.select_related("host", "state").order_by("host__name", "name"))
    counts = {v.value: 0 for v in Verdict}
    for instance in instances:
        counts[instance.verdict] += 1
    shown = [i for i in instances if not state or i.verdict == state]
    groups = [(host, list(items)) for host, items in groupby(shown, key=lambda i: i.host)]
    return groups, counts


@role_required(Role.VIEWER)
def overview(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in Verdict.values:
        state = ""
    groups, counts = _tiles(state)
    context = {
        "groups": groups,
        "counts": counts,
        "state": state,
        "verdicts": Verdict.choices,
        "poll_seconds": POLL_SECONDS,
        "tab": "overview",
    }
    template = "fleet/overview/_tiles.html" if wants_partial(request, "tiles") else "fleet/overview/page.html"
    return render(request, template, context)
