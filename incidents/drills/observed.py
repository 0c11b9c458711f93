"""What a drill saw, in scenario time: each instance's verdict and findings after every
sweep, the faults the scenario applied, and the incidents on the scratch inventory."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from core.i18n import Message, later
from fleet.models import InstanceState
from incidents import words
from incidents.models import Incident, TimelineEntry

FIRED = (TimelineEntry.Kind.OPENED, TimelineEntry.Kind.ALERT_FIRED)


@dataclass(frozen=True, kw_only=True)
class Observation:
    at_s: float
    instance: str
    verdict: str
    categories: tuple[str, ...] = ()

    def describe(self) -> str:
        return str(self.describe_message())

    def describe_message(self) -> Message | str:
        """The verdict, and the findings' categories when there are any."""
        if not self.categories:
            return words.verdict(self.verdict)
        return later(
            "%(verdict)s (%(categories)s)",
            verdict=words.verdict(self.verdict),
            categories=", ".join(self.categories),
        )


@dataclass(frozen=True, kw_only=True)
class AppliedFault:
    at_s: float
    instance: str
    kind: str | None  # None: the instance's faults were cleared


@dataclass(frozen=True, kw_only=True)
class Entry:
    at_s: float
    kind: str
    text: str
    instance: str = ""
    message: dict[str, Any] = field(default_factory=dict)  # the text as a message (core.i18n)


@dataclass(frozen=True, kw_only=True)
class IncidentSeen:
    category: str
    title: str
    instances: tuple[str, ...]
    host: bool
    status: str
    opened_at_s: float
    fired: int  # the opening and every later firing
    reopened_by_other_fault: bool
    timeline: tuple[Entry, ...] = field(default_factory=tuple)
    title_message: dict[str, Any] = field(default_factory=dict)  # the title as a message (core.i18n)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def observe_states(*, names: dict[int, str], at_s: float, ids: list[int]) -> list[Observation]:
    rows = InstanceState.objects.filter(instance_id__in=ids).values_list("instance_id", "verdict", "findings")
    return [
        Observation(
            at_s=at_s,
            instance=names[instance_id],
            verdict=verdict,
            categories=tuple(sorted({f.get("category", "") for f in findings or [] if f.get("category")})),
        )
        for instance_id, verdict, findings in rows
    ]


def cause_at(faults: list[AppliedFault], *, instance: str, at_s: float) -> str | None:
    """The fault kind most recently applied to the instance at `at_s` (None: none, or cleared)."""
    kind = None
    for fault in faults:
        if fault.instance == instance and fault.at_s <= at_s:
            kind = fault.kind
    return kind


def incidents_seen(
    *,
    incidents: list[Incident],
    names: dict[int, str],
    to_scenario_s,  # noqa: ANN001
    faults: list[AppliedFault],
    host_names: dict[str, str],
) -> list[IncidentSeen]:
    """Each incident as a drill reports it. Reopened by another fault: after its alert
    cleared, it fired again while a different fault was the instance's latest."""
    seen = []
    for incident in incidents:
        by_name = {i.name: names.get(i.pk, i.name) for i in incident.instances.all()}
        renames = by_name | host_names
        entries = [
            Entry(
                at_s=to_scenario_s(e.at),
                kind=e.kind,
                text=_renamed(e.text, renames),
                instance=by_name.get(e.data.get("instance", ""), ""),
                message=_renamed_message(e.text_message, renames),
            )
            for e in incident.timeline.all()
        ]
        seen.append(
            IncidentSeen(
                category=incident.category,
                title=_renamed(incident.title, renames),
                instances=tuple(sorted(by_name.values())),
                host=incident.dedup_key.startswith("host:"),
                status=incident.status,
                opened_at_s=to_scenario_s(incident.detected_at),
                fired=sum(1 for e in entries if e.kind in FIRED),
                reopened_by_other_fault=_reopened_by_other(entries, faults),
                timeline=tuple(entries),
                title_message=_renamed_message(incident.title_message, renames),
            )
        )
    return sorted(seen, key=lambda i: (i.opened_at_s, i.category))


def _reopened_by_other(entries: list[Entry], faults: list[AppliedFault]) -> bool:
    first_cause: dict[str, str | None] = {}
    cleared = False
    for entry in entries:
        if entry.kind == TimelineEntry.Kind.ALERT_RESOLVED:
            cleared = True
        if entry.kind not in FIRED or not entry.instance:
            continue
        cause = cause_at(faults, instance=entry.instance, at_s=entry.at_s)
        first = first_cause.setdefault(entry.instance, cause)
        if cleared and cause != first:
            return True
    return False


def _renamed(text: str, renames: dict[str, str]) -> str:
    for real, short in sorted(renames.items(), key=lambda r: -len(r[0])):
        text = text.replace(real, short)
    return text


def _renamed_message(stored: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """A stored message with the scratch names in its values renamed, like its text."""
    if not stored:
        return {}
    params = {
        key: _renamed_message(value, renames)
        if isinstance(value, dict)
        else _renamed(value, renames)
        if isinstance(value, str)
        else value
        for key, value in (stored.get("params") or {}).items()
    }
    return {"msgid": stored.get("msgid", ""), "params": params}


def scenario_clock(*, started: datetime, time_scale: float):  # noqa: ANN201
    def to_scenario_s(at: datetime) -> float:
        return round((at - started).total_seconds() * time_scale, 1)

    return to_scenario_s
