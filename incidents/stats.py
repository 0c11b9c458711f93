"""Review statistics for team leads: what fails (shares by family and category), how fast we
respond (MTTA: detected -> acknowledged, MTTR: started -> resolved), how both move week by
week, and where it happens (the instances with the most incidents).

MTTA is over the incidents a person acknowledged (resolving or mitigating is not an
acknowledgement), so the review says how many of all that is. Drill incidents are practice,
not failures: every review leaves them out.

The statistics are plain functions over IncidentRecord, so tests can compute them by hand.
The ORM appears only in filter_incidents (the one set of filters shared by the page, the CSV
and the CLI) and load_records."""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext

from core.spreadsheet_cells import formula_safe
from core.taxonomy import CATEGORIES, family, label
from fleet.models import GpuHost, Instance
from incidents.models import CATEGORY_CHOICES, Incident, Severity, Source, Status

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys([family(key) for key in CATEGORIES] + ["other"]))
SHORTCUTS = ("7d", "30d", "90d")
DEFAULT_SINCE = "30d"
ALL_TIME = "all"  # as a `since`: no start, like a blank one
_RELATIVE = re.compile(r"^(\d{1,4})([dw])$")


# Filters ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ReviewFilters:
    """Which incidents a review covers; blank strings and None mean "any"."""

    since: datetime | None = None
    until: datetime | None = None
    family: str = ""
    category: str = ""
    severity: str = ""
    status: str = ""
    host: str = ""
    instance: str = ""
    model: str = ""


def parse_moment(value: str, *, now: datetime, end_of_day: bool = False) -> datetime:
    """A point in time from '30d' or '2w' (that long before `now`), an ISO date (its midnight
    in the console's time zone, or the next midnight with `end_of_day`, so that an `until`
    date counts whole) or an ISO date and time. Raises ValueError with a readable message."""
    text = value.strip()
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        return now - timedelta(days=amount * (7 if unit == "w" else 1))
    try:
        if len(text) == 10:
            day = date.fromisoformat(text) + timedelta(days=1 if end_of_day else 0)
            return timezone.make_aware(datetime.combine(day, time.min))
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            gettext(
                "%(value)s is not a time: use 7d, 30d, 90d (days ago), 2w (weeks ago), "
                "a date like 2025-01-31 or a date and time like 2025-01-31T14:00."
            )
            % {"value": repr(value)}
        ) from None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def filter_incidents(*, filters: ReviewFilters) -> QuerySet[Incident]:
    """The incidents the filters select, by when they started, drills left out. A host matches
    incidents on the host itself or on one of its instances; a model matches the incident's
    affected models or the model its instances serve."""
    f = filters
    exact = {
        "started_at__gte": f.since,
        "started_at__lt": f.until,
        "category": f.category,
        "severity": f.severity,
        "status": f.status,
    }
    incidents = Incident.objects.exclude(source=Source.DRILL).filter(
        **{lookup: value for lookup, value in exact.items() if value}
    )
    if f.family:
        incidents = incidents.filter(Q(category=f.family) | Q(category__startswith=f.family + "."))
    related = [
        (f.host, Q(hosts__name=f.host) | Q(instances__host__name=f.host)),
        (f.instance, Q(instances__name=f.instance)),
        # JSON containment is not portable to SQLite, so match the stored list's text.
        (f.model, Q(models_affected__icontains=f'"{f.model}"') | Q(instances__served_model_name=f.model)),
    ]
    for value, condition in related:
        if value:  # a subquery, not a join, so an incident on two matching instances counts once
            incidents = incidents.filter(pk__in=Incident.objects.filter(condition).values("pk"))
    return incidents


# Records ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class IncidentRecord:
    """What the statistics need of one incident, times in the console's time zone."""

    id: int
    category: str
    started_at: datetime
    detected_at: datetime
    acknowledged_at: datetime | None = None
    resolved_at: datetime | None = None
    title: str = ""
    severity: str = Severity.MAJOR
    status: str = Status.OPEN
    hosts: tuple[str, ...] = field(default=())
    instances: tuple[str, ...] = field(default=())
    models: tuple[str, ...] = field(default=())

    @property
    def family(self) -> str:
        return family(self.category)

    @property
    def time_to_acknowledge(self) -> timedelta | None:
        """None until acknowledged, and for an acknowledgement recorded before detection (an
        edit error), which would otherwise pull the mean below what anyone experienced."""
        return _elapsed(self.detected_at, self.acknowledged_at)

    @property
    def time_to_resolve(self) -> timedelta | None:
        return _elapsed(self.started_at, self.resolved_at)


def _elapsed(start: datetime, end: datetime | None) -> timedelta | None:
    if end is None or end < start:
        return None
    return end - start


def to_records(incidents: Iterable[Incident]) -> list[IncidentRecord]:
    """One record per incident; prefetch hosts and instances (load_records does)."""
    local = timezone.localtime
    return [
        IncidentRecord(
            id=incident.pk,
            title=incident.title,
            category=incident.category,
            severity=incident.severity,
            status=incident.status,
            started_at=local(incident.started_at),
            detected_at=local(incident.detected_at),
            acknowledged_at=local(incident.acknowledged_at) if incident.acknowledged_at else None,
            resolved_at=local(incident.resolved_at) if incident.resolved_at else None,
            hosts=tuple(sorted(host.name for host in incident.hosts.all())),
            instances=tuple(sorted(instance.name for instance in incident.instances.all())),
            models=tuple(str(model) for model in incident.models_affected or ()),
        )
        for incident in incidents
    ]


def load_records(*, filters: ReviewFilters) -> list[IncidentRecord]:
    incidents = filter_incidents(filters=filters).prefetch_related(
        Prefetch("hosts", queryset=GpuHost.objects.only("name")),
        Prefetch("instances", queryset=Instance.objects.only("name")),
    )
    return to_records(incidents.order_by("started_at", "pk"))


# Statistics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Share:
    key: str
    count: int
    percent: float


def shares(keys: Iterable[str]) -> list[Share]:
    """How often each key occurs and its share of all, the most frequent first."""
    counts = Counter(keys)
    total = sum(counts.values())
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [Share(key, count, 100 * count / total) for key, count in ordered]


def family_shares(records: Iterable[IncidentRecord]) -> list[Share]:
    return shares(record.family for record in records)


def category_shares(records: Iterable[IncidentRecord]) -> list[Share]:
    return shares(record.category for record in records)


def status_counts(records: Iterable[IncidentRecord]) -> dict[str, int]:
    """Open, mitigated and resolved counts, each present even when zero."""
    counts = Counter(record.status for record in records)
    return {status.value: counts[status.value] for status in Status}


def severity_counts(records: Iterable[IncidentRecord]) -> dict[str, int]:
    counts = Counter(record.severity for record in records)
    return {severity.value: counts[severity.value] for severity in Severity}


@dataclass(frozen=True)
class DurationStats:
    """Mean and median in minutes over the incidents that have both timestamps (`count`)."""

    count: int
    mean_minutes: float | None
    median_minutes: float | None


def duration_stats(durations: Iterable[timedelta | None]) -> DurationStats:
    minutes = [d.total_seconds() / 60 for d in durations if d is not None]
    if not minutes:
        return DurationStats(0, None, None)
    return DurationStats(len(minutes), statistics.fmean(minutes), statistics.median(minutes))


@dataclass(frozen=True)
class ResponseTimes:
    key: str
    incidents: int
    mtta: DurationStats
    mttr: DurationStats


def response_times(records: list[IncidentRecord], *, key: str = "all") -> ResponseTimes:
    return ResponseTimes(
        key=key,
        incidents=len(records),
        mtta=duration_stats(record.time_to_acknowledge for record in records),
        mttr=duration_stats(record.time_to_resolve for record in records),
    )


def response_by_family(records: list[IncidentRecord]) -> list[ResponseTimes]:
    """MTTA and MTTR per family, in the order of family_shares (the most frequent first)."""
    groups: dict[str, list[IncidentRecord]] = defaultdict(list)
    for record in records:
        groups[record.family].append(record)
    return [response_times(groups[share.key], key=share.key) for share in family_shares(records)]


@dataclass(frozen=True)
class Week:
    week: str  # ISO week, like 2025-W03
    starts: date  # its Monday
    incidents: int
    mtta: DurationStats
    mttr: DurationStats


def week_start(moment: datetime) -> date:
    day = moment.date()
    return day - timedelta(days=day.weekday())


def weekly(records: list[IncidentRecord]) -> list[Week]:
    """Incidents, MTTA and MTTR per ISO week of the start, from the first week with an
    incident to the last, quiet weeks included so that a trend line does not skip them."""
    groups: dict[date, list[IncidentRecord]] = defaultdict(list)
    for record in records:
        groups[week_start(record.started_at)].append(record)
    if not groups:
        return []
    weeks, monday = [], min(groups)
    while monday <= max(groups):
        times = response_times(groups[monday])
        year, number, _ = monday.isocalendar()
        weeks.append(Week(f"{year}-W{number:02d}", monday, times.incidents, times.mtta, times.mttr))
        monday += timedelta(days=7)
    return weeks


def top_instances(records: Iterable[IncidentRecord], *, limit: int = 10) -> list[tuple[str, int]]:
    """The instances named by the most incidents, the most first, ties by name."""
    counts = Counter(name for record in records for name in record.instances)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]


# The figures the page, the CLI and its --json share -------------------------------------------


def review_figures(records: list[IncidentRecord]) -> dict[str, Any]:
    """Every statistic of the review as plain JSON types, percentages and minutes to 0.1."""
    overall = response_times(records)
    return {
        "total": len(records),
        "status": status_counts(records),
        "severity": severity_counts(records),
        "families": [_share(share) for share in family_shares(records)],
        "categories": [_share(share, _category_label(share.key)) for share in category_shares(records)],
        "response": {
            "overall": _response(overall),
            "by_family": [_response(times) for times in response_by_family(records)],
        },
        "weeks": [_week(week) for week in weekly(records)],
        "top_instances": [{"instance": name, "incidents": n} for name, n in top_instances(records)],
    }


def _category_label(key: str) -> str:
    """The taxonomy's name, or "Other", in the active language."""
    return str(dict(CATEGORY_CHOICES).get(key, label(key)))


def _share(share: Share, title: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"key": share.key, "count": share.count, "percent": round(share.percent, 1)}
    if title is not None:
        item["label"] = title
    return item


def _week(week: Week) -> dict[str, Any]:
    return {
        "week": week.week,
        "starts": week.starts.isoformat(),
        "incidents": week.incidents,
        "mtta": _duration(week.mtta),
        "mttr": _duration(week.mttr),
    }


def _response(times: ResponseTimes) -> dict[str, Any]:
    return {
        "key": times.key,
        "incidents": times.incidents,
        "mtta": _duration(times.mtta),
        "mttr": _duration(times.mttr),
    }


def _duration(stats: DurationStats) -> dict[str, Any]:
    """Minutes to 0.1 (the charts' and the CLI's unit) and whole seconds (for people: 9 min 20 s)."""

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    def seconds(value: float | None) -> int | None:
        return None if value is None else round(value * 60)

    mean, median = rounded(stats.mean_minutes), rounded(stats.median_minutes)
    return {
        "count": stats.count,
        "mean": mean,
        "median": median,
        "mean_s": seconds(stats.mean_minutes),
        "median_s": seconds(stats.median_minutes),
    }


# CSV ----------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "id", "title", "category", "family", "severity", "status", "started", "detected", "acknowledged",
    "resolved", "tta_minutes", "ttr_minutes", "hosts", "instances", "models",
)  # fmt: skip


def csv_row(record: IncidentRecord) -> list[str | int]:
    """One incident as CSV_COLUMNS: ISO times, minutes to 0.1, several names joined by ";"."""

    def moment(value: datetime | None) -> str:
        return value.isoformat() if value else ""

    def minutes(value: timedelta | None) -> str:
        return "" if value is None else f"{value.total_seconds() / 60:.1f}"

    # Every text cell people or alerts wrote, or may have, is one a spreadsheet shows as
    # typed (formula_safe); the id and the minutes are the console's own figures.
    r, f = record, formula_safe
    return [
        r.id, f(r.title), f(r.category), f(r.family), f(r.severity), f(r.status), moment(r.started_at),
        moment(r.detected_at), moment(r.acknowledged_at), moment(r.resolved_at),
        minutes(r.time_to_acknowledge), minutes(r.time_to_resolve),
        f(";".join(r.hosts)), f(";".join(r.instances)), f(";".join(r.models)),
    ]  # fmt: skip
