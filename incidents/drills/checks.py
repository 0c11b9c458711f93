"""A scenario's expectations held against what a drill observed. Plain functions over
plain records, so they are tested on hand-made timelines.

Instance checks read the verdict and findings as they stood at the `by` time (the latest
judgement at or before it); `no_finding` means never, up to that time. Incident checks
read the incidents at the end of the drill."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fleet.simulator.scenarios import Expectations, IncidentExpectation, InstanceExpectation
from incidents.drills.observed import IncidentSeen, Observation


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    expectation: str  # what was expected, in words
    ok: bool
    message: str = ""  # why not, when not

    def to_dict(self) -> dict:
        return asdict(self)


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
    prefix = f"{e.instance}: at {e.label}"
    seen = state_at(observations, instance=e.instance, at_s=e.by_s)
    if seen is None:
        return CheckResult(
            expectation=wanted, ok=False, message=f"{prefix} expected {wanted}, saw no judgement yet"
        )
    if e.verdicts and seen.verdict not in e.verdicts:
        return CheckResult(
            expectation=wanted,
            ok=False,
            message=f"{prefix} expected verdict {_or(e.verdicts)}, saw {seen.describe()}",
        )
    if e.finding and e.finding not in seen.categories:
        return CheckResult(
            expectation=wanted,
            ok=False,
            message=f"{prefix} expected finding {e.finding}, saw {seen.describe()}",
        )
    if e.no_finding:
        early = [o for o in observations if o.instance == e.instance and o.at_s <= e.by_s]
        hit = next((o for o in early if e.no_finding in o.categories), None)
        if hit is not None:
            return CheckResult(
                expectation=wanted,
                ok=False,
                message=f"{prefix} expected never {e.no_finding}, "
                f"saw it at {hit.at_s:g} s ({hit.describe()})",
            )
    return CheckResult(expectation=wanted, ok=True)


def _describe(e: InstanceExpectation) -> str:
    parts = [f"verdict {_or(e.verdicts)}"] if e.verdicts else []
    parts += [f"finding {e.finding}"] if e.finding else []
    parts += [f"never {e.no_finding}"] if e.no_finding else []
    return f"{e.instance} by {e.label}: " + ", ".join(parts)


def _or(values: tuple[str, ...]) -> str:
    return " or ".join(values)


def _count(expect: Expectations, incidents: list[IncidentSeen]) -> list[CheckResult]:
    low, high, n = expect.count_min, expect.count_max, len(incidents)
    if low is None and high is None:
        return []
    wanted = (
        f"{low} incident(s)"
        if low == high
        else f"between {low or 0} and {high if high is not None else 'any'} incidents"
    )
    ok = (low is None or n >= low) and (high is None or n <= high)
    listed = "; ".join(f"{i.category} on {', '.join(i.instances)}" for i in incidents) or "none"
    return [
        CheckResult(
            expectation=wanted,
            ok=ok,
            message="" if ok else f"incidents: expected {wanted}, saw {n} ({listed})",
        )
    ]


def _items(items: tuple[IncidentExpectation, ...], incidents: list[IncidentSeen]) -> list[CheckResult]:
    results, used = [], set()
    for item in items:
        wanted = _describe_item(item)
        match = next(
            (n for n, i in enumerate(incidents) if n not in used and _matches(item, i)),
            None,
        )
        if match is None:
            results.append(
                CheckResult(
                    expectation=wanted,
                    ok=False,
                    message=f"incidents: expected {wanted}, {_near(item, incidents)}",
                )
            )
            continue
        used.add(match)
        found = incidents[match]
        late = item.by_s is not None and found.opened_at_s > item.by_s
        few = found.fired < item.min_fired
        if late or few:
            why = f"opened at {found.opened_at_s:g} s" if late else f"it fired {found.fired} time(s)"
            results.append(
                CheckResult(expectation=wanted, ok=False, message=f"incidents: expected {wanted}, {why}")
            )
        else:
            results.append(CheckResult(expectation=wanted, ok=True))
    return results


def _matches(item: IncidentExpectation, incident: IncidentSeen) -> bool:
    return (
        incident.category == item.category
        and set(incident.instances) == set(item.instances)
        and (item.host is None or incident.host == item.host)
    )


def _describe_item(item: IncidentExpectation) -> str:
    text = f"{'a host' if item.host else 'an'} incident {item.category} grouping {', '.join(item.instances)}"
    if item.by_s is not None:
        text += f" by {item.label}"
    if item.min_fired > 1:
        text += f", fired at least {item.min_fired} times"
    return text


def _near(item: IncidentExpectation, incidents: list[IncidentSeen]) -> str:
    close = [i for i in incidents if set(i.instances) & set(item.instances) or i.category == item.category]
    if not close:
        return "saw none"
    return "saw " + "; ".join(
        f"{'host ' if i.host else ''}{i.category} on {', '.join(i.instances)}" for i in close
    )


def _none_for(name: str, incidents: list[IncidentSeen]) -> CheckResult:
    touching = [i for i in incidents if name in i.instances]
    wanted = f"no incident on {name}"
    if not touching:
        return CheckResult(expectation=wanted, ok=True)
    listed = "; ".join(i.category for i in touching)
    return CheckResult(expectation=wanted, ok=False, message=f"{name}: expected no incident, saw {listed}")


def _not_reopened(incidents: list[IncidentSeen]) -> CheckResult:
    wanted = "no incident reopened by another fault"
    reopened = [i for i in incidents if i.reopened_by_other_fault]
    if not reopened:
        return CheckResult(expectation=wanted, ok=True)
    listed = "; ".join(f"{i.category} on {', '.join(i.instances)}" for i in reopened)
    return CheckResult(
        expectation=wanted, ok=False, message=f"incidents: expected {wanted}, saw {listed} reopened"
    )
