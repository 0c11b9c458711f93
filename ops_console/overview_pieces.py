"""The overview as pieces with HTML ids (ops_console.overview_delta): what each shows, how
it is rendered (a template, or ops_console.overview_html for the repeated ones), and how the
partial nests them."""

from __future__ import annotations

from ops_console import overview_html
from ops_console.overview_delta import Piece, fingerprint
from ops_console.overview_layout import Group, Overview

# Each piece's template, or its renderer; the delta renders a changed piece alone with it.
TEMPLATES = {
    "tiles": "fleet/overview/_tiles.html",
    "counts": "fleet/overview/_counts.html",
    "maintenance": "fleet/overview/_maintenance.html",
    "capacity": "fleet/overview/_capacity.html",
    "groups": "fleet/overview/_groups.html",
    "healthy": "fleet/overview/_healthy.html",
}
HTML = {"group": overview_html.group, "tile": overview_html.tile}


def _group(group: Group) -> Piece:
    tiles = tuple(Piece(id=f"tile-{t.pk}", kind="tile", item=t, own=fingerprint(t)) for t in group.tiles)
    head = (group.name, group.url, group.place, group.badge, group.quiet, group.expand_url)
    return Piece(
        id=f"group-{group.pk}",
        kind="group",
        item=group,
        own=fingerprint(head, [t.id for t in tiles]),
        children=tiles,
    )


def _maintenance(overview: Overview) -> str:
    return fingerprint([
        (o.window.pk, o.window.name, str(o.window.instance or ""), str(o.window.host or ""), o.starts_at,
         o.ends_at, o.active, o.window.recurrence)
        for o in overview.maintenance
    ])  # fmt: skip


def _capacity(overview: Overview) -> str:
    return fingerprint(overview.capacity, overview.capacity_more)


def pieces(overview: Overview, *, language: str) -> Piece:
    """The tree of what a tab shows for `overview`; the root names the view and language."""
    groups = tuple(_group(g) for g in overview.groups)
    page = overview.page
    return Piece(
        id="tiles",
        kind="tiles",
        item=overview,
        own=fingerprint(overview.filter, language),
        children=(
            Piece(id="overview-counts", kind="counts", item=overview, own=fingerprint(overview.counts)),
            Piece(id="overview-maintenance", kind="maintenance", item=overview, own=_maintenance(overview)),
            Piece(id="overview-capacity", kind="capacity", item=overview, own=_capacity(overview)),
            Piece(
                id="overview-groups",
                kind="groups",
                item=overview,
                own=fingerprint(
                    [g.id for g in groups], page.number, page.paginator.count, overview.fleet_size == 0
                ),
                children=groups,
            ),
            Piece(id="overview-healthy", kind="healthy", item=overview, own=fingerprint(overview.healthy)),
        ),
    )
