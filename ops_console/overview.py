"""The fleet overview: problems first, healthy hosts collapsed, refreshed by polling what
changed (docs/fleet-overview.md).

Mounted by ops_console because it joins the apps: the fleet's verdicts, the capacity
check's findings (diagnostics) and the maintenance windows (incidents). The counts, the
sections and the tiles are one partial (#tiles); its poller asks for what changed since
the version it carries (ops_console.overview_delta)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import get_language

from core.htmx import wants_partial
from core.roles import Role, role_required
from fleet.probe_service import stale_after
from fleet.shown_state import STATES
from incidents.maintenance import covered, current_and_upcoming
from ops_console import overview_delta as delta
from ops_console.overview_html import Words
from ops_console.overview_layout import Filter
from ops_console.overview_layout import overview as lay_out
from ops_console.overview_pieces import HTML, TEMPLATES, pieces
from ops_console.overview_query import Scope, open_capacity
from ops_console.schedules import probe_intervals

POLLER = "overview-poll"  # the poller's id: polls come with this HX-Target


def _scope(windows: list) -> Scope:
    hosts, instances = covered(windows)
    return Scope(
        now=timezone.now(),
        stale_after=stale_after(probe_intervals())["health"],
        hosts_in_maintenance=frozenset(hosts),
        instances_in_maintenance=frozenset(instances),
    )


def _filter(request: HttpRequest) -> Filter:
    state = request.GET.get("state", "")
    return Filter(state=state if state in STATES else "", host=request.GET.get("host", ""),
                  page=request.GET.get("page", "1"))  # fmt: skip


def _poll_answer(request: HttpRequest, root: delta.Piece, before: dict | None, context: dict) -> HttpResponse:
    """The changed pieces and the counts, or the whole partial when the tab's version is not
    known here; each swapped by its id (hx-swap-oob)."""
    found = delta.changed(root, before) if before is not None else None
    if found is None:
        shown = [root]  # the whole partial, its own poller included
    else:
        counts = [p for p in root.children if p.kind == "counts" and p not in found]
        shown = [*counts, *found]
    words = Words()
    parts = [
        HTML[p.kind](p.item, words, oob=True)
        if p.kind in HTML
        else render_to_string(TEMPLATES[p.kind], {**context, "oob": True}, request)
        for p in shown
    ]
    if found is not None:
        parts.append(render_to_string("fleet/overview/_poll.html", {**context, "oob": True}, request))
    return HttpResponse("".join(parts))


@role_required(Role.VIEWER)
def overview(request: HttpRequest) -> HttpResponse:
    windows = current_and_upcoming()
    shown = lay_out(chosen=_filter(request), scope=_scope(windows), windows=windows, capacity=open_capacity())
    root = pieces(shown, language=get_language())
    snapshot = delta.snapshot(root)
    version = delta.version_of(snapshot)
    context = {"ov": shown, "version": version, "poll_seconds": settings.OVERVIEW_POLL_S, "tab": "overview"}
    if wants_partial(request, POLLER):
        since = request.GET.get("since", "")
        if since == version:
            delta.keep(version, snapshot)
            return HttpResponse(status=204)  # nothing changed: htmx swaps nothing
        before = delta.recall(since)
        delta.remember(version, snapshot)
        return _poll_answer(request, root, before, context)
    delta.remember(version, snapshot)
    template = "fleet/overview/_tiles.html" if wants_partial(request, "tiles") else "fleet/overview/page.html"
    return render(request, template, context)
