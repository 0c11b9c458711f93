"""What the overview shows, laid out: problems first, healthy hosts collapsed, pages.

Without a filter the page lists the hosts that have something to say (an instance not up,
or up with a probe finding or an open capacity finding; or the host's agent silent), worst
first, a tile for each such instance and a link to the host's quiet others; every other host
is one chip with its count. A state or host filter lists its instances' tiles, a page at a
time. Each part is plain data (Tile, Group, Chip, Note), so the delta protocol can fingerprint
what a tab shows without rendering it (ops_console.overview_delta)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.urls import get_script_prefix

from diagnostics.models import CapacityFinding
from fleet.host_condition import AGENT_MISSING, HOST_DOWN, HOST_UNREACHABLE, host_condition
from fleet.models import HostAgent
from fleet.shown_state import STATES
from ops_console.overview_memo import Links, Said, overview_url
from ops_console.overview_query import (
    RANK,
    FindingRow,
    HostRow,
    Scope,
    TileRow,
    by_instance,
    host_rows,
    noisy_tiles,
    tile_page,
)

PROBLEM_HOSTS_PER_PAGE = 20
TILES_PER_PAGE = 48
CAPACITY_SHOWN = 20
NEWS = (AGENT_MISSING, HOST_DOWN, HOST_UNREACHABLE)  # host conditions worth a badge


@dataclass(frozen=True)
class Filter:
    """What the tab asked for: a shown state, a host (by name), a page."""

    state: str = ""
    host: str = ""
    page: str = "1"

    @property
    def collapsed(self) -> bool:
        """No filter: problems first and healthy hosts collapsed."""
        return not self.state and not self.host

    def url(self, **changes: str) -> str:
        """The overview's URL for this filter with `changes` (a page change keeps the rest;
        any other change goes back to the first page)."""
        values = {"state": self.state, "host": self.host, "page": ""} | changes
        return overview_url(get_script_prefix(), values["state"], values["host"], values["page"])


@dataclass(frozen=True, kw_only=True)
class Tile:
    pk: int
    name: str
    url: str
    shown: str
    label: str
    about: str
    reason_html: str
    capacity_severity: str
    capacity_title: str
    probed_since: str


@dataclass(frozen=True, kw_only=True)
class Note:
    """An open capacity finding as the capacity section lists it."""

    pk: int
    severity: str
    severity_label: str
    title: str
    instance: str
    url: str  # the instance's page
    since: str


@dataclass(frozen=True, kw_only=True)
class Badge:
    """A host's condition when it is news (agent missing, host down or unreachable)."""

    condition: str
    label: str
    title: str
    host_up: bool | None


@dataclass(frozen=True, kw_only=True)
class Group:
    pk: int
    name: str
    url: str
    place: str
    badge: Badge | None
    tiles: tuple[Tile, ...]
    quiet: int  # its up and quiet instances, not shown as tiles (collapsed view only)
    expand_url: str


@dataclass(frozen=True, kw_only=True)
class Chip:
    """A healthy host collapsed: all its instances up and quiet."""

    pk: int
    name: str
    count: int
    url: str


@dataclass(kw_only=True)
class Overview:
    filter: Filter
    counts: dict[str, int]
    filters: list[tuple[str, str, int]]  # (state, url, count)
    all_url: str
    maintenance: list
    capacity: list[Note]
    capacity_more: int
    groups: list[Group]
    page: Page
    healthy: list[Chip] = field(default_factory=list)
    fleet_size: int = 0

    @property
    def prev_url(self) -> str:
        return self.filter.url(page=str(self.page.number - 1)) if self.page.has_previous() else ""

    @property
    def next_url(self) -> str:
        return self.filter.url(page=str(self.page.number + 1)) if self.page.has_next() else ""

    @property
    def all_hosts_url(self) -> str:
        """The host filter dropped, the state kept."""
        return self.filter.url(host="")

    @property
    def poll_url(self) -> str:
        return self.filter.url(page=str(self.page.number))


def _silent(host: HostRow, now: datetime) -> bool:
    """The host's agent is enrolled and has not reported within MISSING_AFTER."""
    return host.enrolled and host.is_missing(now=now)


def _badge(host: HostRow, noisy: Sequence[TileRow], now: datetime) -> Badge | None:
    """fleet.agent.status.condition_of for a host whose quiet instances (up, no findings)
    were counted, not loaded: each stands in as ("up", [])."""
    if not noisy and not _silent(host, now):
        return None  # an agent that beats, or none and nothing failing: not news
    pairs = [("up", [])] * host.quiet + [
        (i.verdict, i.state.findings if i.verdict != "unknown" else []) for i in noisy
    ]
    found = host_condition(
        enrolled=host.enrolled,
        last_heartbeat_at=host.last_heartbeat_at,
        missing_after=HostAgent.MISSING_AFTER,
        instances=pairs,
        now=now,
    )
    if found.condition not in NEWS:
        return None
    return Badge(
        condition=found.condition, label=found.label, title=found.message.translated(), host_up=found.host_up
    )


def _tile(instance: TileRow, capacity: list[FindingRow], ctx: _Context) -> Tile:
    state = instance.state
    shown = instance.shown
    worst = capacity[0] if capacity else None
    return Tile(
        pk=instance.pk,
        name=instance.name,
        url=ctx.links.instance(instance.pk),
        shown=shown,
        label=ctx.said.label(instance),
        about=f"{ctx.said.engine(instance)} {instance.engine_version} · {instance.served_model_name}",
        reason_html=state.reason_html if state is not None else "",
        capacity_severity=worst.severity if worst else "",
        capacity_title=worst.shown_title if worst else "",
        probed_since=ctx.said.since(state.last_probe_at) if state is not None and state.last_probe_at else "",
    )


def _note(finding: FindingRow, ctx: _Context) -> Note:
    return Note(
        pk=finding.pk,
        severity=finding.severity,
        severity_label=ctx.said.severity(finding.severity),
        title=finding.shown_title,
        instance=finding.instance_name,
        url=ctx.links.instance(finding.instance_id),
        since=ctx.said.since(finding.first_seen),
    )


def _group(host: HostRow, tiles: list[Tile], badge: Badge | None, *, quiet: int, links: Links) -> Group:
    return Group(
        pk=host.id,
        name=host.name,
        url=links.host(host.id),
        place=f"{host.datacenter} / {host.rack}" if host.rack else host.datacenter,
        badge=badge,
        tiles=tuple(tiles),
        quiet=quiet,
        expand_url=links.host_tiles(host.name),
    )


def _groups(
    hosts: Sequence[HostRow], instances: list[TileRow], ctx: _Context, *, collapsed: bool
) -> list[Group]:
    """A group per host of `hosts`, in their order, with the tiles of `instances` on it."""
    on_host: dict[int, list[TileRow]] = {h.id: [] for h in hosts}
    for instance in instances:
        on_host.setdefault(instance.host_id, []).append(instance)
    groups = []
    for host in hosts:
        mine = on_host[host.id]
        if collapsed:
            mine.sort(key=lambda i: (RANK.get(i.shown, len(RANK)), i.name))
        noisy = [*(i for i in mine if not i.quiet), *ctx.extra_noisy.get(host.id, [])]
        tiles = [_tile(i, ctx.capacity.get(i.pk, []), ctx) for i in mine]
        badge = _badge(host, noisy, ctx.now)
        groups.append(_group(host, tiles, badge, quiet=host.quiet if collapsed else 0, links=ctx.links))
    return groups


@dataclass(kw_only=True)
class _Context:
    scope: Scope
    now: datetime
    capacity: dict[int, list[FindingRow]]
    links: Links = field(default_factory=lambda: Links())
    said: Said = field(init=False)
    extra_noisy: dict[int, list[TileRow]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.said = Said(self.now)


def _collapsed(hosts: list[HostRow], ctx: _Context, page_number: str) -> tuple[list[Group], Page, list[Chip]]:
    problems, healthy = [], []
    for h in hosts:
        if h.noisy or _silent(h, ctx.now):
            problems.append(h)
        else:
            healthy.append(Chip(pk=h.id, name=h.name, count=h.total, url=ctx.links.host_tiles(h.name)))
    problems.sort(key=lambda h: (h.rank, h.name))
    page = Paginator(problems, PROBLEM_HOSTS_PER_PAGE).get_page(page_number)
    shown = list(page.object_list)
    instances = noisy_tiles(ctx.scope, host_ids=[h.id for h in shown])
    return _groups(shown, instances, ctx, collapsed=True), page, healthy


def _filtered(hosts: list[HostRow], ctx: _Context, chosen: Filter) -> tuple[list[Group], Page]:
    if chosen.host:
        hosts = [h for h in hosts if h.name == chosen.host]
    total = sum(h.by_state.get(chosen.state, 0) if chosen.state else h.total for h in hosts)
    page = Paginator(range(total), TILES_PER_PAGE).get_page(chosen.page)
    start = page.start_index() - 1 if total else 0
    instances = tile_page(
        ctx.scope,
        host_ids=[h.id for h in hosts] if chosen.host else None,
        state=chosen.state,
        offset=start,
        limit=TILES_PER_PAGE,
    )
    ids = {i.host_id for i in instances}
    shown = [h for h in hosts if h.id in ids]
    # A badge judges all the host's instances: load the others not quiet where it can matter.
    unsure = [h.id for h in shown if h.noisy and (not h.enrolled or _silent(h, ctx.now))]
    if unsure:
        loaded = {i.pk for i in instances}
        for other in noisy_tiles(ctx.scope, host_ids=unsure):
            if other.pk not in loaded:
                ctx.extra_noisy.setdefault(other.host_id, []).append(other)
    return _groups(shown, instances, ctx, collapsed=False), page


def overview(*, chosen: Filter, scope: Scope, windows: list, capacity: list[FindingRow]) -> Overview:
    """The overview for `chosen` at scope.now."""
    hosts = host_rows(scope)
    counts = dict.fromkeys(STATES, 0)
    for host in hosts:
        for state, n in host.by_state.items():
            counts[state] += n
    ctx = _Context(scope=scope, now=scope.now, capacity=by_instance(capacity))
    healthy: list[Chip] = []
    if chosen.collapsed:
        groups, page, healthy = _collapsed(hosts, ctx, chosen.page)
    else:
        groups, page = _filtered(hosts, ctx, chosen)
    of_note = [f for f in capacity if f.severity != CapacityFinding.Severity.INFO] if chosen.collapsed else []
    return Overview(
        filter=chosen,
        counts=counts,
        filters=[(s, chosen.url(state=s), counts[s]) for s in STATES],
        all_url=chosen.url(state=""),
        maintenance=windows,
        capacity=[_note(f, ctx) for f in of_note[:CAPACITY_SHOWN]],
        capacity_more=max(0, len(of_note) - CAPACITY_SHOWN),
        groups=groups,
        page=page,
        healthy=healthy,
        fleet_size=sum(counts.values()),
    )
