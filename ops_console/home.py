"""The home page: what the on-call engineer needs first, read in a fixed number of queries.

Open incidents by severity, the instances that are not up (with the probes' reason), the
open capacity findings, the latest inventory changes, and the inventory counts. Like the
overview (ops_console.overview) it joins fleet, diagnostics and incidents, so it lives
here; it shows an instance's state the way the overview's tiles do (fleet.shown_state).
Drills are practice: their hosts, instances and incidents are left out."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.contenttypes.models import ContentType
from django.db.models import Case, Count, IntegerField, Prefetch, Q, Value, When
from django.utils import timezone

from diagnostics.models import CapacityFinding
from fleet.models import ChangeAction, ChangeLogEntry, Gateway, Gpu, GpuHost, Instance
from fleet.probe_service import stale_after
from fleet.shown_state import shown_state, state_label
from incidents.maintenance import Occurrence, covered, current_and_upcoming
from incidents.models import Incident, Severity, Source
from ops_console.schedules import probe_intervals

# The shown states that need someone, worst first; up, unknown (never probed) and
# maintenance (expected, alerts silenced) do not.
NOT_UP = ("down", "failing", "degraded", "stale")
INCIDENT_LIMIT = 50
FINDING_LIMIT = 20
CHANGE_LIMIT = 10


@dataclass(frozen=True, kw_only=True)
class IncidentGroup:
    severity: str
    label: str
    incidents: list[Incident]


@dataclass(frozen=True, kw_only=True)
class InstanceProblem:
    instance: Instance
    state: str  # a shown state of fleet.shown_state: one of NOT_UP
    label: str  # what the badge says, "failing 2× in a row" for example
    reason: str
    since: datetime | None  # when the stored verdict began; None for stale
    last_probe_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class Change:
    entry: ChangeLogEntry
    url: str  # the object's page; "" once the object is gone
    fields: list[str]


@dataclass(frozen=True, kw_only=True)
class FleetInstances:
    problems: list[InstanceProblem]
    monitored: int
    in_maintenance: int


@dataclass(frozen=True, kw_only=True)
class HomeStatus:
    incident_groups: list[IncidentGroup]
    incident_count: int
    instances: FleetInstances
    findings: list[CapacityFinding]
    changes: list[Change]
    counts: dict[str, int]
    checked_at: datetime = field(default_factory=timezone.now)

    @property
    def more_incidents(self) -> int:
        """Open incidents beyond those the groups hold."""
        return self.incident_count - sum(len(g.incidents) for g in self.incident_groups)

    @property
    def all_clear(self) -> bool:
        """Nothing needs the on-call engineer: no open incident, every monitored instance
        up (or in maintenance), no open capacity finding."""
        return not (self.incident_count or self.instances.problems or self.findings)


def open_incidents(*, limit: int = INCIDENT_LIMIT) -> tuple[list[IncidentGroup], int]:
    """The unresolved incidents that are not drills, grouped by severity, critical first,
    newest first in each group; and how many there are in all (the groups hold `limit`)."""
    unresolved = Incident.objects.unresolved().exclude(source=Source.DRILL)
    rank = Case(
        *[When(severity=value, then=Value(i)) for i, value in enumerate(Severity.values)],
        default=Value(len(Severity.values)),
        output_field=IntegerField(),
    )
    affected = Prefetch("instances", queryset=Instance.objects.select_related("host").order_by("name"))
    shown = list(
        unresolved.annotate(rank=rank)
        .order_by("rank", "-started_at", "-id")
        .prefetch_related(affected, "hosts")[:limit]
    )
    total = len(shown) if len(shown) < limit else unresolved.count()
    by_severity: dict[str, list[Incident]] = defaultdict(list)
    for incident in shown:
        by_severity[incident.severity].append(incident)
    labels = dict(Severity.choices)
    groups = [
        IncidentGroup(severity=s, label=labels.get(s, s), incidents=by_severity[s])
        for s in [*Severity.values, *sorted(set(by_severity) - set(Severity.values))]
        if by_severity[s]
    ]
    return groups, total


def _problem(instance: Instance, state: str) -> InstanceProblem:
    stored = instance.state
    label = instance.state_text if state != "stale" else state_label("stale")
    return InstanceProblem(
        instance=instance,
        state=state,
        label=label,
        reason=stored.reason,
        since=stored.since if state != "stale" else None,
        last_probe_at=stored.last_probe_at,
    )


def with_shown_state(
    instances: list[Instance], *, now: datetime, windows: list[Occurrence]
) -> list[Instance]:
    """Set `instance.shown` to the state the console shows (fleet.shown_state): the stored
    verdict, unless the health probe is stale or a maintenance window covers it now.
    `instances` need their host and state. The overview counts the same in SQL
    (ops_console.overview_query), checked against this case by case."""
    stale_window = stale_after(probe_intervals())["health"]
    hosts, in_window = covered(windows)
    for instance in instances:
        probed = instance.state.last_probe_at if instance.verdict != "unknown" else None
        instance.shown = shown_state(
            verdict=instance.verdict,
            last_probe_at=probed,
            now=now,
            stale_after=stale_window,
            in_maintenance=instance.host_id in hosts or instance.pk in in_window,
        )
    return instances


def instances_not_up(*, now: datetime, windows: list[Occurrence]) -> FleetInstances:
    """The monitored instances whose shown state is down, failing, degraded or stale, worst
    first, with the probes' reason; and how many are monitored and in maintenance now."""
    instances = list(Instance.objects.monitored().select_related("host", "state").order_by("name"))
    with_shown_state(instances, now=now, windows=windows)
    problems = [_problem(i, i.shown) for i in instances if i.shown in NOT_UP]
    problems.sort(key=lambda p: NOT_UP.index(p.state))  # stable: by name within a state
    in_maintenance = sum(i.shown == "maintenance" for i in instances)
    return FleetInstances(problems=problems, monitored=len(instances), in_maintenance=in_maintenance)


def open_capacity_findings(*, limit: int = FINDING_LIMIT) -> list[CapacityFinding]:
    """The open critical and warning capacity findings (info ones are not a page's first
    news), critical first, then the most recently seen."""
    rank = Case(When(severity=CapacityFinding.Severity.CRITICAL, then=Value(0)), default=Value(1))
    found = CapacityFinding.objects.active().exclude(severity=CapacityFinding.Severity.INFO)
    found = found.filter(instance__host__drill=False).select_related("instance__host")
    return list(found.order_by(rank, "-last_seen", "-id")[:limit])


def _pages(entries: list[ChangeLogEntry]) -> dict[tuple[int, int], str]:
    """{(content type id, object id): the object's page} for the entries' objects that
    still exist: one query per model that the entries name."""
    wanted: dict[ContentType, set[int]] = defaultdict(set)
    for entry in entries:
        if entry.action != ChangeAction.DELETE:
            wanted[entry.content_type].add(entry.object_id)
    pages = {}
    for content_type, ids in wanted.items():
        model = content_type.model_class()
        if model is not None and hasattr(model, "get_absolute_url"):
            for obj in model._default_manager.filter(pk__in=ids):
                pages[(content_type.pk, obj.pk)] = obj.get_absolute_url()
    return pages


def recent_changes(*, limit: int = CHANGE_LIMIT) -> list[Change]:
    """The latest inventory changes, each with the link to its object while it exists."""
    entries = list(ChangeLogEntry.objects.select_related("content_type")[:limit])
    pages = _pages(entries)
    return [
        Change(
            entry=entry,
            url=pages.get((entry.content_type_id, entry.object_id), ""),
            fields=sorted(entry.changes) if entry.action == ChangeAction.UPDATE else [],
        )
        for entry in entries
    ]


def inventory_counts() -> dict[str, int]:
    instances = Instance.objects.aggregate(all=Count("id"), enabled=Count("id", filter=Q(enabled=True)))
    return {
        "hosts": GpuHost.objects.count(),
        "gpus": Gpu.objects.count(),
        "instances": instances["all"],
        "enabled_instances": instances["enabled"],
        "gateways": Gateway.objects.count(),
    }


def home_status(*, now: datetime | None = None) -> HomeStatus:
    """Everything the home page shows but the GPU memory chart."""
    now = now or timezone.now()
    groups, incident_count = open_incidents()
    return HomeStatus(
        incident_groups=groups,
        incident_count=incident_count,
        instances=instances_not_up(now=now, windows=current_and_upcoming(now)),
        findings=open_capacity_findings(),
        changes=recent_changes(),
        counts=inventory_counts(),
        checked_at=now,
    )
