"""The `expect:` block of a scenario: what a drill checks (incidents/drills/). Per instance,
a verdict and finding categories by a scenario time; for incidents, their count, categories
and grouping, the instances none may touch, and none reopened by another fault. Every
mistake raises ScenarioError naming the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.taxonomy import CATEGORIES
from fleet.simulator.scenario_clock import ScenarioError, at_seconds

VERDICTS = ("up", "degraded", "failing", "down")
_EXPECT_KEYS = {"instances", "incidents"}
_INSTANCE_EXPECT_KEYS = {"by", "verdict", "finding", "no_finding"}
_INCIDENTS_KEYS = {"count", "items", "none_for", "reopened_by_other_fault"}
_INCIDENT_KEYS = {"category", "instances", "host", "by", "min_fired"}


@dataclass(frozen=True, kw_only=True)
class InstanceExpectation:
    """By scenario time `by_s`, the instance's verdict is one of `verdicts` (any when
    empty), `finding` is among its findings, and `no_finding` was never among them."""

    instance: str
    by_s: float
    label: str  # the "by" as written
    verdicts: tuple[str, ...] = ()
    finding: str | None = None
    no_finding: str | None = None


@dataclass(frozen=True, kw_only=True)
class IncidentExpectation:
    """An incident of `category` grouping exactly `instances`; host-level when `host` is
    true (None: either); opened by `by_s` when given; fired at least `min_fired` times."""

    category: str
    instances: tuple[str, ...]
    host: bool | None = None
    by_s: float | None = None
    label: str = ""
    min_fired: int = 1


@dataclass(frozen=True, kw_only=True)
class Expectations:
    instances: tuple[InstanceExpectation, ...] = ()
    count_min: int | None = None
    count_max: int | None = None
    incidents: tuple[IncidentExpectation, ...] = ()
    none_for: tuple[str, ...] = ()  # instances no incident may touch
    reopened_by_other_fault: bool | None = None

    @property
    def empty(self) -> bool:
        return self == Expectations()

    @property
    def last_s(self) -> float | None:
        """The latest time an expectation names: a drill runs until then."""
        times = [e.by_s for e in self.instances] + [i.by_s for i in self.incidents if i.by_s is not None]
        return max(times, default=None)


def parse_expect(value: Any, start_s: float | None, names: set[str]) -> Expectations:
    if value is None:
        return Expectations()
    _mapping(value, "expect", _EXPECT_KEYS)
    per_instance = value.get("instances") or {}
    if not isinstance(per_instance, Mapping):
        raise ScenarioError("expect.instances: expected a mapping of instance name to a list of checks")
    checks = []
    for name, items in per_instance.items():
        where = f"expect.instances.{name}"
        if name not in names:
            raise ScenarioError(f"{where}: no instance named {name!r}; instances: {', '.join(sorted(names))}")
        if not isinstance(items, list) or not items:
            raise ScenarioError(f"{where}: expected a list of checks like {{by: '00:01:30', verdict: down}}")
        checks += [_instance_check(item, f"{where}[{i}]", name, start_s) for i, item in enumerate(items)]
    incidents = value.get("incidents") or {}
    _mapping(incidents, "expect.incidents", _INCIDENTS_KEYS)
    count_min, count_max = _count(incidents.get("count"))
    reopened = incidents.get("reopened_by_other_fault")
    if reopened is not None and not isinstance(reopened, bool):
        raise ScenarioError(
            f"expect.incidents.reopened_by_other_fault: expected true or false, got {reopened!r}"
        )
    return Expectations(
        instances=tuple(sorted(checks, key=lambda c: (c.by_s, c.instance))),
        count_min=count_min,
        count_max=count_max,
        incidents=tuple(
            _incident_check(item, f"expect.incidents.items[{i}]", start_s, names)
            for i, item in enumerate(incidents.get("items") or [])
        ),
        none_for=_names(incidents.get("none_for", []), "expect.incidents.none_for", names),
        reopened_by_other_fault=reopened,
    )


def _mapping(value: Any, where: str, known: set[str]) -> None:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: expected a mapping with {', '.join(sorted(known))}")
    unknown = sorted(set(value) - known)
    if unknown:
        raise ScenarioError(f"{where}.{unknown[0]}: unknown field; known fields: {', '.join(sorted(known))}")


def _instance_check(item: Any, where: str, name: str, start_s: float | None) -> InstanceExpectation:
    _mapping(item, where, _INSTANCE_EXPECT_KEYS)
    if "by" not in item:
        raise ScenarioError(f"{where}.by: is required (seconds from the start, or a clock time like 03:00)")
    verdicts = item.get("verdict", [])
    verdicts = [verdicts] if isinstance(verdicts, str) else verdicts
    if not isinstance(verdicts, list) or not all(v in VERDICTS for v in verdicts):
        raise ScenarioError(
            f"{where}.verdict: expected one of {', '.join(VERDICTS)} or a list of them, "
            f"got {item['verdict']!r}"
        )
    if not verdicts and "finding" not in item and "no_finding" not in item:
        raise ScenarioError(f"{where}: needs verdict, finding or no_finding")
    return InstanceExpectation(
        instance=name,
        by_s=at_seconds(item["by"], f"{where}.by", start_s),
        label=str(item["by"]),
        verdicts=tuple(verdicts),
        finding=_category(item.get("finding"), f"{where}.finding"),
        no_finding=_category(item.get("no_finding"), f"{where}.no_finding"),
    )


def _incident_check(item: Any, where: str, start_s: float | None, names: set[str]) -> IncidentExpectation:
    _mapping(item, where, _INCIDENT_KEYS)
    category = _category(item.get("category"), f"{where}.category")
    if category is None:
        raise ScenarioError(f"{where}.category: is required")
    host = item.get("host")
    if host is not None and not isinstance(host, bool):
        raise ScenarioError(f"{where}.host: expected true or false, got {host!r}")
    min_fired = item.get("min_fired", 1)
    if isinstance(min_fired, bool) or not isinstance(min_fired, int) or min_fired < 1:
        raise ScenarioError(f"{where}.min_fired: expected an integer >= 1, got {min_fired!r}")
    by = item.get("by")
    return IncidentExpectation(
        category=category,
        instances=_names(item.get("instances"), f"{where}.instances", names, required=True),
        host=host,
        by_s=None if by is None else at_seconds(by, f"{where}.by", start_s),
        label="" if by is None else str(by),
        min_fired=min_fired,
    )


def _category(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if value not in CATEGORIES:
        raise ScenarioError(f"{where}: unknown category {value!r}; see core/taxonomy.py")
    return str(value)


def _names(value: Any, where: str, names: set[str], *, required: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value) or (required and not value):
        raise ScenarioError(f"{where}: expected a list of instance names")
    missing = sorted(set(value) - names)
    if missing:
        raise ScenarioError(
            f"{where}: no instance named {missing[0]!r}; instances: {', '.join(sorted(names))}"
        )
    return tuple(value)


def _count(value: Any) -> tuple[int | None, int | None]:
    """count: N, or {min: N, max: M} (either may be left out)."""

    def number(v: Any, where: str) -> int | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ScenarioError(f"{where}: expected an integer >= 0, got {v!r}")
        return v

    if isinstance(value, Mapping):
        _mapping(value, "expect.incidents.count", {"min", "max"})
        low, high = (
            number(value.get("min"), "expect.incidents.count.min"),
            number(value.get("max"), "expect.incidents.count.max"),
        )
        if low is not None and high is not None and low > high:
            raise ScenarioError(f"expect.incidents.count: min {low} is above max {high}")
        return low, high
    exact = number(value, "expect.incidents.count")
    return exact, exact
