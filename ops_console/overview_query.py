"""The overview's reads, in SQL written once. Each instance's shown state (fleet.shown_state)
is computed in SQL, so the fleet is counted per host and state in one grouped query however
large it is; only the instances a page shows are loaded as rows, with the few columns their
tiles show.

The statements are plain strings run on `django.db.connection.cursor()`, not querysets: the
ORM compiled the CASE/EXISTS expressions afresh on every request, which cost more than the
queries themselves. They use only what SQLite and PostgreSQL both read alike (CASE WHEN,
LEFT JOIN, GROUP BY, LIMIT/OFFSET); values are bound as parameters, and only placeholders
(a `%s` per maintenance or page host id) are formatted in.

The overview never loads InstanceState's last_scrape, kinds, failures or baselines, nor the
host agent's snapshot or GPU reading: kilobytes of JSON per row that no tile shows."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache

from django.db import connection
from django.utils.dateparse import parse_datetime

from diagnostics.models import CapacityFinding
from fleet.models import GpuHost, HostAgent, Instance, InstanceState
from fleet.models.instances import Engine
from fleet.shown_state import STATES

# Worst first: how problems are ordered on the page. "up" here is up with something to say
# (a probe finding or an open capacity finding).
RANK = {"down": 0, "failing": 1, "degraded": 2, "stale": 3, "unknown": 4, "maintenance": 5, "up": 6}

# One row per overview instance (drill hosts left out) with `shown` (fleet.shown_state in
# SQL: maintenance, then unknown for disabled or never probed, then stale, then the
# verdict), `clean` (1: no probe finding) and `noted` (1: an open critical or warning
# capacity finding). `findings = '[]'` compares JSON text on SQLite and jsonb on PostgreSQL
# (the literal is read as jsonb there); both store an empty list as `[]`. The few noted
# instances are joined as a set: cheaper than a correlated EXISTS per instance on SQLite.
INSTANCES = """
SELECT i.id, i.name, i.host_id, h.name AS host_name, i.enabled, i.engine, i.engine_version,
       i.served_model_name, s.verdict, s.consecutive_failures, s.last_probe_at, s.findings,
       CASE {maintenance}
            WHEN NOT i.enabled OR s.id IS NULL OR s.verdict = 'unknown' THEN 'unknown'
            WHEN s.last_probe_at < %s THEN 'stale'
            WHEN s.verdict IN ({states}) THEN s.verdict
            ELSE 'unknown' END AS shown,
       CASE WHEN s.findings = '[]' THEN 1 ELSE 0 END AS clean,
       CASE WHEN n.instance_id IS NULL THEN 0 ELSE 1 END AS noted
FROM {instance} i
JOIN {host} h ON h.id = i.host_id
LEFT JOIN {state} s ON s.instance_id = i.id
LEFT JOIN (
    SELECT DISTINCT c.instance_id FROM {finding} c WHERE c.cleared_at IS NULL AND c.severity <> 'info'
) n ON n.instance_id = i.id
WHERE NOT h.drill
"""
MAINTENANCE = "WHEN i.host_id IN ({hosts}) OR i.id IN ({instances}) THEN 'maintenance'"

# The fleet counted per host, shown state and what the instances have to say; the hosts'
# columns joined to the counts (a few rows per host).
HOSTS = """
SELECT g.host_id, h.name, h.datacenter, h.rack, a.id, a.last_heartbeat_at, g.shown, g.clean,
       g.noted, g.n
FROM (
    SELECT t.host_id, t.shown, t.clean, t.noted, COUNT(*) AS n
    FROM ({instances}) t
    GROUP BY t.host_id, t.shown, t.clean, t.noted
) g
JOIN {host} h ON h.id = g.host_id
LEFT JOIN {agent} a ON a.host_id = h.id
"""

# Up with nothing to say: collapsed into its host's count.
NOT_QUIET = "NOT (t.shown = 'up' AND t.clean = 1 AND t.noted = 0)"
TILE_COLUMNS = """t.id, t.name, t.host_id, t.enabled, t.engine, t.engine_version, t.served_model_name,
       t.verdict, t.consecutive_failures, t.last_probe_at, t.findings, t.shown, t.clean, t.noted"""
# The tiles of the hosts a collapsed page shows: their instances that are not quiet.
NOISY_ON_HOSTS = f"""
SELECT {TILE_COLUMNS} FROM ({{instances}}) t
WHERE t.host_id IN ({{hosts}}) AND {NOT_QUIET}
ORDER BY t.name
"""
# A filter's page of tiles (its conditions formatted in from FILTERS, values bound).
FILTERED = f"""
SELECT {TILE_COLUMNS} FROM ({{instances}}) t
WHERE 1 = 1 {{where}}
ORDER BY t.host_name, t.name
LIMIT %s OFFSET %s
"""
ON_HOSTS = "AND t.host_id IN ({hosts})"
IN_STATE = "AND t.shown = %s"
SHOWN = "SELECT t.id, t.shown FROM ({instances}) t"
# The open capacity findings, worst first.
CAPACITY = """
SELECT c.id, c.instance_id, i.name, c.severity, c.title, c.numbers, c.first_seen
FROM {finding} c
JOIN {instance} i ON i.id = c.instance_id
JOIN {host} h ON h.id = i.host_id
WHERE c.cleared_at IS NULL AND NOT h.drill
ORDER BY CASE c.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
         c.last_seen DESC, c.id DESC
"""


@cache
def _tables() -> dict[str, str]:
    quote = connection.ops.quote_name
    models = {
        "instance": Instance,
        "host": GpuHost,
        "state": InstanceState,
        "agent": HostAgent,
        "finding": CapacityFinding,
    }
    return {name: quote(model._meta.db_table) for name, model in models.items()}


def _placeholders(ids: Sequence[int]) -> str:
    """`%s, %s, …` for `ids`; NULL (matches nothing) when there are none."""
    return ", ".join(["%s"] * len(ids)) or "NULL"


@dataclass(frozen=True)
class StateRow:
    """The columns of an InstanceState that its reason and an instance's label read."""

    verdict: str
    consecutive_failures: int
    last_probe_at: datetime | None
    findings: list

    # The model's own rules, read from these columns (they read nothing else).
    reason_html = InstanceState.reason_html


@dataclass(frozen=True)
class TileRow:
    """An instance as a tile shows it, with its state row (None when never probed)."""

    pk: int
    name: str
    host_id: int
    enabled: bool
    engine: str
    engine_version: str
    served_model_name: str
    state: StateRow | None
    shown: str
    quiet: bool

    verdict = Instance.verdict
    state_message = Instance.state_message
    state_text = Instance.state_text

    def get_engine_display(self) -> str:
        return str(Engine(self.engine).label) if self.engine in Engine.values else self.engine


@dataclass(frozen=True, kw_only=True)
class Scope:
    """What turns a stored verdict into a shown state now: the clock, the health probe's
    staleness window and the maintenance windows active now."""

    now: datetime
    stale_after: timedelta
    hosts_in_maintenance: frozenset[int] = frozenset()
    instances_in_maintenance: frozenset[int] = frozenset()

    def instances_sql(self) -> tuple[str, list]:
        """INSTANCES for this scope, and its parameters."""
        hosts, instances = sorted(self.hosts_in_maintenance), sorted(self.instances_in_maintenance)
        covered = hosts or instances
        maintenance = (
            MAINTENANCE.format(hosts=_placeholders(hosts), instances=_placeholders(instances))
            if covered
            else ""
        )
        sql = _instances_sql().replace("{maintenance}", maintenance)
        cutoff = connection.ops.adapt_datetimefield_value(self.now - self.stale_after)
        return sql, [*hosts, *instances, cutoff]


@cache
def _instances_sql() -> str:
    states = ", ".join(f"'{s}'" for s in STATES)  # our own constants, not input
    return INSTANCES.format(maintenance="{maintenance}", states=states, **_tables())


def _rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _when(value: datetime | str | None) -> datetime | None:
    """A datetime column as read raw: SQLite gives naive UTC (or text), PostgreSQL aware."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


def is_quiet(*, shown: str, clean: int | bool | None, noted: int | bool) -> bool:
    return shown == "up" and bool(clean) and not noted


def shown_states(scope: Scope) -> dict[int, str]:
    """{instance id: shown state} of every overview instance (for checks, not the page)."""
    inner, params = scope.instances_sql()
    return dict(_rows(SHOWN.format(instances=inner), params))


@dataclass(kw_only=True)
class HostRow:
    """A host as the overview counts it: its instances per shown state, and how many of them
    are up and quiet."""

    id: int
    name: str
    datacenter: str
    rack: str
    enrolled: bool
    last_heartbeat_at: datetime | None
    by_state: dict[str, int] = field(default_factory=dict)
    quiet: int = 0

    MISSING_AFTER = HostAgent.MISSING_AFTER
    is_missing = HostAgent.is_missing  # reads last_heartbeat_at and MISSING_AFTER only

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    @property
    def noisy(self) -> int:
        """Instances with something to show: not up, or up with a finding."""
        return self.total - self.quiet

    @property
    def rank(self) -> int:
        """Its worst instance's rank (RANK); a host with nothing but quiet instances ranks last."""
        worst = [RANK[s] for s, n in self.by_state.items() if n and (s != "up" or self.quiet < n)]
        return min(worst, default=len(RANK))


def host_rows(scope: Scope) -> list[HostRow]:
    """Every host with overview instances, by name, counted in one query grouped by host,
    shown state and what the instances have to say (a few rows per host, not one per
    instance)."""
    inner, params = scope.instances_sql()
    hosts: dict[int, HostRow] = {}
    for host_id, name, datacenter, rack, agent_id, beat, shown, clean, noted, n in _rows(
        HOSTS.format(instances=inner, **_tables()), params
    ):
        host = hosts.get(host_id)
        if host is None:
            host = hosts[host_id] = HostRow(
                id=host_id,
                name=name,
                datacenter=datacenter,
                rack=rack,
                enrolled=agent_id is not None,
                last_heartbeat_at=_when(beat),
            )
        host.by_state[shown] = host.by_state.get(shown, 0) + n
        if is_quiet(shown=shown, clean=clean, noted=noted):
            host.quiet += n
    return sorted(hosts.values(), key=lambda h: h.name)


def _tiles(rows: list[tuple]) -> list[TileRow]:
    tiles = []
    for pk, name, host, enabled, engine, version, model, verdict, failures, probed, findings, *said in rows:
        shown, clean, noted = said
        if isinstance(findings, str):
            findings = json.loads(findings)
        state = StateRow(verdict, failures, _when(probed), findings or []) if verdict is not None else None
        quiet = is_quiet(shown=shown, clean=clean, noted=noted)
        tiles.append(TileRow(pk, name, host, bool(enabled), engine, version, model, state, shown, quiet))
    return tiles


def noisy_tiles(scope: Scope, *, host_ids: Sequence[int]) -> list[TileRow]:
    """The instances on `host_ids` that are not up and quiet, by name."""
    if not host_ids:
        return []
    inner, params = scope.instances_sql()
    sql = NOISY_ON_HOSTS.format(instances=inner, hosts=_placeholders(host_ids))
    return _tiles(_rows(sql, [*params, *host_ids]))


def tile_page(
    scope: Scope, *, host_ids: Sequence[int] | None, state: str, offset: int, limit: int
) -> list[TileRow]:
    """A page of tiles, by host name and name: the instances on `host_ids` (all hosts when
    None) in shown state `state` (any when empty)."""
    inner, params = scope.instances_sql()
    where, values = [], []
    if host_ids is not None:
        where.append(ON_HOSTS.format(hosts=_placeholders(host_ids)))
        values += host_ids
    if state:
        where.append(IN_STATE)
        values.append(state)
    sql = FILTERED.format(instances=inner, where=" ".join(where))
    return _tiles(_rows(sql, [*params, *values, limit, offset]))


@dataclass(frozen=True)
class FindingRow:
    """An open capacity finding with the columns the overview shows, and its instance's name."""

    pk: int
    instance_id: int
    instance_name: str
    severity: str
    title: str
    numbers: dict
    first_seen: datetime

    # The model's own rules, read from these columns (they read nothing else).
    _text = CapacityFinding._text
    shown_title = CapacityFinding.shown_title


def open_capacity() -> list[FindingRow]:
    """Open capacity findings on the overview's hosts, worst first."""
    found = []
    for pk, instance_id, name, severity, title, numbers, first_seen in _rows(
        CAPACITY.format(**_tables()), []
    ):
        numbers = json.loads(numbers) if isinstance(numbers, str) else numbers
        found.append(FindingRow(pk, instance_id, name, severity, title, numbers or {}, _when(first_seen)))
    return found


def by_instance(findings: list[FindingRow]) -> dict[int, list[FindingRow]]:
    found: dict[int, list[FindingRow]] = defaultdict(list)
    for finding in findings:
        found[finding.instance_id].append(finding)
    return found
