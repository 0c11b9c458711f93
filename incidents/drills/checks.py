"""A scenario's expectations held against what a drill observed. Plain functions over
plain records, so they are tested on hand-made timelines.

Instance checks read the verdict and findings as they stood at the `by` time (the latest
judgement at or before it); `no_finding` means never, up to that time. Incident checks
read the incidents at the end of the drill."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.i18n import Message, later
from fleet.simulator.scenarios import Expectations, IncidentExpectation, InstanceExpectation
from incidents import words
from incidents.drills.observed import IncidentSeen, Observation


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    expectation: str  # what was expected, in words (English)
    ok: bool
    message: str = ""  # why not, when not (English)
    # Both as messages (core.i18n), for the report page in the reader's language.
    expectation_message: dict[str, Any] = field(default_factory=dict)
    message_message: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _result(wanted: Message, *, why: Message | None = None) -> CheckResult:
    """Met when there is no `why`."""
    return CheckResult(
        expectation=str(wanted),
        ok=why is None,
        message=str(why) if why is not None else "",
        expectation_message=wanted.to_json(),
        message_message=why.to_json() if why is not None else {},
    )


def _joined(items: list[Message | str], separator: str) -> Message | str:
    """Items joined by a separator in every language (not a catalogue message of its own)."""
    if not items:
        return ""
    joined = items[0]
    for item in items[1:]:
        joined = Message("%(before)s" + separator + "%(after)s", {"before": joined, "after": item})
    return joined


def check(
    *, expect: Expectations, observations: list[Observation], incidents: list[IncidentSeen]
) -> list[CheckResult]:
    results = [_instance(e, observations) for e in expect.instances]
    results += _count(expect, incidents)
    results += _items(expect.incidents, incidents)
    results += [_none_for(name, incidents) for name in expect.none_for]
    if expect.reopened_by_other_fault is False:
        results.append(_not_reopened(incidents))
    return results


def unmet(results: list[CheckResult]) -> list[str]:
    return [r.message for r in results if not r.ok]


def state_at(observations: list[Observation], *, instance: str, at_s: float) -> Observation | None:
    latest = None
    for obs in observations:
        if obs.instance == instance and obs.at_s <= at_s and (latest is None or obs.at_s >= latest.at_s):
            latest = obs
    return latest


def _instance(e: InstanceExpectation, observations: list[Observation]) -> CheckResult:
    wanted = _describe(e)
    where = {"instance": e.instance, "time": e.label}
    seen = state_at(observations, instance=e.instance, at_s=e.by_s)
    if seen is None:
        why = later(
            "%(instance)s: at %(time)s expected %(wanted)s, saw no judgement yet", wanted=wanted, **where
        )
        return _result(wanted, why=why)
    if e.verdicts and seen.verdict not in e.verdicts:
        why = later(
            "%(instance)s: at %(time)s expected verdict %(verdicts)s, saw %(seen)s",
            verdicts=_or(e.verdicts),
            seen=seen.describe_message(),
            **where,
        )
        return _result(wanted, why=why)
    if e.finding and e.finding not in seen.categories:
        why = later(
            "%(instance)s: at %(time)s expected finding %(category)s, saw %(seen)s",
            category=e.finding,
            seen=seen.describe_message(),
            **where,
        )
        return _result(wanted, why=why)
    if e.no_finding:
        early = [o for o in observations if o.instance == e.instance and o.at_s <= e.by_s]
        hit = next((o for o in early if e.no_finding in o.categories), None)
        if hit is not None:
            why = later(
                "%(instance)s: at %(time)s expected never %(category)s, saw it at %(at)s s (%(seen)s)",
                category=e.no_finding,
                at=f"{hit.at_s:g}",
                seen=hit.describe_message(),
                **where,
            )
            return _result(wanted, why=why)
    return _result(wanted)


def _describe(e: InstanceExpectation) -> Message:
    parts: list[Message | str] = (
        [later("verdict %(verdicts)s", verdicts=_or(e.verdicts))] if e.verdicts else []
    )
    parts += [later("finding %(category)s", category=e.finding)] if e.finding else []
    parts += [later("never %(category)s", category=e.no_finding)] if e.no_finding else []
    return later(
        "%(instance)s by %(time)s: %(wanted)s", instance=e.instance, time=e.label, wanted=_joined(parts, ", ")
    )


def _or(values: tuple[str, ...]) -> Message | str:
    if len(values) <= 1:
        return words.verdict(values[0]) if values else ""
    return later("%(some)s or %(last)s", some=_or(values[:-1]), last=words.verdict(values[-1]))


def _on(category: str, instances: tuple[str, ...], *, host: bool = False) -> Message:
    """An incident as the checks name it: its category on its instances."""
    names = ", ".join(instances)
    if host:
        return later("host %(category)s on %(instances)s", category=category, instances=names)
    return later("%(category)s on %(instances)s", category=category, instances=names)


def _count(expect: Expectations, incidents: list[IncidentSeen]) -> list[CheckResult]:
    low, high, n = expect.count_min, expect.count_max, len(incidents)
    if low is None and high is None:
        return []
    wanted = (
        later("%(count)s incident(s)", count=low)
        if low == high
        else later(
            "between %(low)s and %(high)s incidents",
            low=low or 0,
            high=high if high is not None else later("any"),
        )
    )
    ok = (low is None or n >= low) and (high is None or n <= high)
    listed = _joined([_on(i.category, i.instances) for i in incidents], "; ") or later("none")
    why = later(
        "incidents: expected %(wanted)s, saw %(count)s (%(listed)s)", wanted=wanted, count=n, listed=listed
    )
    return [_result(wanted, why=None if ok else why)]


def _items(items: tuple[IncidentExpectation, ...], incidents: list[IncidentSeen]) -> list[CheckResult]:
    results, used = [], set()
    for item in items:
        wanted = _describe_item(item)
        match = next(
            (n for n, i in enumerate(incidents) if n not in used and _matches(item, i)),
            None,
        )
        if match is None:
            why = later("incidents: expected %(wanted)s, %(why)s", wanted=wanted, why=_near(item, incidents))
            results.append(_result(wanted, why=why))
            continue
        used.add(match)
        found = incidents[match]
        late = item.by_s is not None and found.opened_at_s > item.by_s
        few = found.fired < item.min_fired
        if late or few:
            because = (
                later("opened at %(at)s s", at=f"{found.opened_at_s:g}")
                if late
                else later("it fired %(count)s time(s)", count=found.fired)
            )
            why = later("incidents: expected %(wanted)s, %(why)s", wanted=wanted, why=because)
            results.append(_result(wanted, why=why))
        else:
            results.append(_result(wanted))
    return results


def _matches(item: IncidentExpectation, incident: IncidentSeen) -> bool:
    return (
        incident.category == item.category
        and set(incident.instances) == set(item.instances)
        and (item.host is None or incident.host == item.host)
    )


def _describe_item(item: IncidentExpectation) -> Message:
    values = {"category": item.category, "instances": ", ".join(item.instances)}
    text = (
        later("a host incident %(category)s grouping %(instances)s", **values)
        if item.host
        else later("an incident %(category)s grouping %(instances)s", **values)
    )
    if item.by_s is not None:
        text = later("%(wanted)s by %(time)s", wanted=text, time=item.label)
    if item.min_fired > 1:
        text = later("%(wanted)s, fired at least %(count)s times", wanted=text, count=item.min_fired)
    return text


def _near(item: IncidentExpectation, incidents: list[IncidentSeen]) -> Message:
    close = [i for i in incidents if set(i.instances) & set(item.instances) or i.category == item.category]
    if not close:
        return later("saw none")
    listed = _joined([_on(i.category, i.instances, host=i.host) for i in close], "; ")
    return later("saw %(listed)s", listed=listed)


def _none_for(name: str, incidents: list[IncidentSeen]) -> CheckResult:
    touching = [i for i in incidents if name in i.instances]
    wanted = later("no incident on %(instance)s", instance=name)
    if not touching:
        return _result(wanted)
    listed = "; ".join(i.category for i in touching)
    return _result(
        wanted, why=later("%(instance)s: expected no incident, saw %(listed)s", instance=name, listed=listed)
    )


def _not_reopened(incidents: list[IncidentSeen]) -> CheckResult:
    wanted = later("no incident reopened by another fault")
    reopened = [i for i in incidents if i.reopened_by_other_fault]
    if not reopened:
        return _result(wanted)
    listed = _joined([_on(i.category, i.instances) for i in reopened], "; ")
    why = later("incidents: expected %(wanted)s, saw %(listed)s reopened", wanted=wanted, listed=listed)
    return _result(wanted, why=why)
