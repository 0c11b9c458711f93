"""The fleet overview: a tile per instance, grouped by host, refreshed by polling.

Mounted by ops_console because it joins the apps: the fleet's verdicts, the capacity
check's findings (diagnostics) and the maintenance windows (incidents). The tiles, the
per-state counts and the filter are one partial, so they refresh together and agree."""

from __future__ import annotations

from datetime import datetime
from itertools import groupby

from django.conf import settings
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from core.htmx import wants_partial
from core.roles import Role, role_required
from diagnostics.models import CapacityFinding
from fleet.agent.status import condition_of
from fleet.host_condition import AGENT_MISSING, HOST_DOWN, HOST_UNREACHABLE, HostCondition
from fleet.models import Instance
from fleet.probe_service import stale_after
from fleet.shown_state import STATES, shown_state
from incidents.maintenance import current_and_upcoming
from ops_console.schedules import probe_intervals


def _covered(windows: list) -> tuple[set[int], set[int]]:
    """Host ids and instance ids that an active maintenance window covers now."""
    active = [o.window for o in windows if o.active]
    return {w.host_id for w in active if w.host_id}, {w.instance_id for w in active if w.instance_id}


def with_shown_state(instances: list[Instance], *, now: datetime, windows: list) -> list[Instance]:
    """Set `instance.shown` to the state the console shows (fleet.shown_state): the stored
    verdict, unless the health probe is stale or a maintenance window covers it now. The
    overview's tiles and the home page read it; `instances` need their host and state."""
    stale_window = stale_after(probe_intervals())["health"]
    hosts, covered = _covered(windows)
    for instance in instances:
        probed = instance.state.last_probe_at if instance.verdict != "unknown" else None
        instance.shown = shown_state(
            verdict=instance.verdict,
            last_probe_at=probed,
            now=now,
            stale_after=stale_window,
            in_maintenance=instance.host_id in hosts or instance.pk in covered,
        )
    return instances


def _tiles(state: str, windows: list) -> tuple[list, dict[str, int]]:
    findings = CapacityFinding.objects.active().order_by("severity", "-last_seen")
    instances = with_shown_state(
        list(
            Instance.objects.filter(host__drill=False)
            .select_related("host", "host__agent", "state")
            .prefetch_related(Prefetch("capacity_findings", queryset=findings, to_attr="open_capacity"))
            .order_by("host__name", "name")
        ),
        now=timezone.now(),
        windows=windows,
    )
    counts = dict.fromkeys(STATES, 0)
    for instance in instances:
        counts[instance.shown] += 1
    shown = [i for i in instances if not state or i.shown == state]
    groups = [(host, list(items)) for host, items in groupby(shown, key=lambda i: i.host)]
    return [(host, items, _condition(host, items)) for host, items in groups], counts


def _condition(host, items: list[Instance]) -> HostCondition | None:  # noqa: ANN001
    """The host's condition when it is news: its agent missing, or the host down."""
    found = condition_of(
        host, instances=[(i.verdict, i.state.findings if hasattr(i, "state") else []) for i in items]
    )
    return found if found.condition in (AGENT_MISSING, HOST_DOWN, HOST_UNREACHABLE) else None


def _capacity(groups: list) -> list:
    """(instance, finding) for the open critical and warning capacity findings shown."""
    return [(i, f) for _, items, _ in groups for i in items for f in i.open_capacity if f.severity != "info"]


@role_required(Role.VIEWER)
def overview(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in STATES:
        state = ""
    windows = current_and_upcoming()
    groups, counts = _tiles(state, windows)
    context = {
        "groups": groups,
        "capacity": _capacity(groups),
        "maintenance": windows,
        "counts": counts,
        "state": state,
        "states": STATES,
        "poll_seconds": settings.OVERVIEW_POLL_S,
        "tab": "overview",
    }
    template = "fleet/overview/_tiles.html" if wants_partial(request, "tiles") else "fleet/overview/page.html"
    return render(request, template, context)
