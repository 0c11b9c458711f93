"""Scenario files: instances, then load and faults on a timeline (scenarios/README.md).

    scenario = load_scenario(SCENARIO_DIR / "guide-1400-batch-surge-two-ips.yaml")

Loading validates everything up front (instance fields, load fields, fault kinds and
parameters, instance names on the timeline, the expectations a drill checks) and raises
ScenarioError naming the field, like
"timeline[2].fault.kind: unknown fault kind 'oom'; known kinds: ...".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.taxonomy import CATEGORIES
from fleet.simulator.faults import FaultError, FaultKind, parse_fault
from fleet.simulator.spec import InstanceSpec, LoadProfile, SpecError
from fleet.simulator.spec_mapping import instance_spec_from_mapping, load_profile_from_mapping

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_TOP_LEVEL = {
    "name", "description", "time_scale", "clock_start", "end", "instances", "timeline",
    "probe_interval_s", "expect",
}  # fmt: skip
_EVENT_KEYS = {"at", "instance", "instances", "load", "fault", "clear_faults", "note"}
_ACTIONS = ("load", "fault", "clear_faults")
DAY_S = 24 * 3600
DEFAULT_PROBE_INTERVAL_S = 30.0
VERDICTS = ("up", "degraded", "failing", "down")
_EXPECT_KEYS = {"instances", "incidents"}
_INSTANCE_EXPECT_KEYS = {"by", "verdict", "finding", "no_finding"}
_INCIDENTS_KEYS = {"count", "items", "none_for", "reopened_by_other_fault"}
_INCIDENT_KEYS = {"category", "instances", "host", "by", "min_fired"}


class ScenarioError(ValueError):
    """A scenario file is wrong; the message names the field."""


@dataclass(frozen=True, kw_only=True)
class ScenarioEvent:
    at_s: float  # scenario seconds after the start
    label: str  # the "at" as written
    targets: tuple[str, ...]  # instance names
    load: LoadProfile | None = None
    fault: dict[str, Any] | None = None
    clear_faults: str | None = None  # a kind, or "all"
    note: str = ""


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


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    description: str
    time_scale: float  # scenario seconds per real second
    clock_start: str | None
    end_s: float | None
    instances: tuple[InstanceSpec, ...]
    timeline: tuple[ScenarioEvent, ...]
    probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S  # scenario seconds between probe cycles
    expect: Expectations = Expectations()
    gpu_hosts: dict[str, str] | None = None  # instance name -> its inventory host, when shared

    def real_seconds(self, scenario_seconds: float) -> float:
        return scenario_seconds / self.time_scale

    @property
    def real_duration_s(self) -> float | None:
        return None if self.end_s is None else self.real_seconds(self.end_s)

    @property
    def drill_end_s(self) -> float:
        """When a drill stops: at the last expectation, else the end, else five probe
        cycles after the last event."""
        if self.expect.last_s is not None:
            return self.expect.last_s
        if self.end_s is not None:
            return self.end_s
        last = max((e.at_s for e in self.timeline), default=0.0)
        return last + 5 * self.probe_interval_s

    def host_of(self, instance: str) -> str:
        return (self.gpu_hosts or {}).get(instance, instance)

    def clock_label(self, seconds: float) -> str:
        """A scenario time as the file would write it: a clock time, or HH:MM:SS from the start."""
        base = 0.0 if self.clock_start is None else _clock_seconds(self.clock_start, field="clock_start")
        total = int(round(base + seconds)) % DAY_S
        return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


def shipped_scenarios() -> list[Path]:
    return sorted(SCENARIO_DIR.glob("*.yaml"))


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    if not path.exists() and (SCENARIO_DIR / path).exists():
        path = SCENARIO_DIR / path  # a shipped scenario by file name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    try:
        return parse_scenario(data)
    except ScenarioError as exc:
        raise ScenarioError(f"{path.name}: {exc}") from None


def parse_scenario(data: Any) -> Scenario:
    if not isinstance(data, Mapping):
        raise ScenarioError("a scenario is a mapping with name, instances and timeline")
    unknown = sorted(set(data) - _TOP_LEVEL)
    if unknown:
        raise ScenarioError(f"{unknown[0]}: unknown field; known fields: {', '.join(sorted(_TOP_LEVEL))}")
    name = _required_text(data, "name")
    time_scale = _time_scale(data.get("time_scale", 1))
    clock_start = data.get("clock_start")
    start_s = None if clock_start is None else _clock_seconds(str(clock_start), field="clock_start")
    instances, gpu_hosts = _instances(data.get("instances"))
    names = {spec.name for spec in instances}
    timeline = tuple(
        sorted(
            (
                _event(item, f"timeline[{i}]", start_s, names)
                for i, item in enumerate(data.get("timeline") or [])
            ),
            key=lambda e: e.at_s,
        )
    )
    end = data.get("end")
    return Scenario(
        name=name,
        description=str(data.get("description", "")).strip(),
        time_scale=time_scale,
        clock_start=None if clock_start is None else str(clock_start),
        end_s=None if end is None else _at_seconds(end, "end", start_s),
        instances=instances,
        timeline=timeline,
        probe_interval_s=_positive(
            data.get("probe_interval_s", DEFAULT_PROBE_INTERVAL_S), "probe_interval_s"
        ),
        expect=_expect(data.get("expect"), start_s, names),
        gpu_hosts=gpu_hosts or None,
    )


def _required_text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{key}: is required (text)")
    return value.strip()


def _time_scale(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ScenarioError(
            f"time_scale: must be a number > 0 (scenario seconds per real second), got {value!r}"
        )
    return float(value)


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ScenarioError(f"{where}: must be a number > 0, got {value!r}")
    return float(value)


def _instances(value: Any) -> tuple[tuple[InstanceSpec, ...], dict[str, str]]:
    """The specs, and the inventory host of each instance that names one (gpu_host: the
    instances that name the same one share a host; `host` is the simulator's listen address)."""
    if not isinstance(value, list) or not value:
        raise ScenarioError("instances: needs a list of at least one instance")
    specs, gpu_hosts = [], {}
    for i, item in enumerate(value):
        if isinstance(item, Mapping) and "gpu_host" in item:
            item = dict(item)
            gpu_host = item.pop("gpu_host")
            if not isinstance(gpu_host, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", gpu_host):
                raise ScenarioError(
                    f"instances[{i}].gpu_host: expected a short name (a-z, 0-9, -), got {gpu_host!r}"
                )
            gpu_hosts[str(item.get("name"))] = gpu_host
        try:
            specs.append(instance_spec_from_mapping(item, where=f"instances[{i}]"))
        except SpecError as exc:
            raise ScenarioError(str(exc)) from None
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScenarioError(f"instances: names must be unique; repeated: {', '.join(duplicates)}")
    return tuple(specs), gpu_hosts


def _event(item: Any, where: str, start_s: float | None, names: set[str]) -> ScenarioEvent:
    if not isinstance(item, Mapping):
        raise ScenarioError(f"{where}: expected a mapping with at and one of {', '.join(_ACTIONS)}")
    unknown = sorted(set(item) - _EVENT_KEYS)
    if unknown:
        raise ScenarioError(
            f"{where}.{unknown[0]}: unknown field; known fields: {', '.join(sorted(_EVENT_KEYS))}"
        )
    actions = [a for a in _ACTIONS if a in item]
    if len(actions) != 1:
        raise ScenarioError(f"{where}: needs exactly one of {', '.join(_ACTIONS)}, found {len(actions)}")
    if "at" not in item:
        raise ScenarioError(f"{where}.at: is required (seconds from the start, or a clock time like 03:00)")
    return ScenarioEvent(
        at_s=_at_seconds(item["at"], f"{where}.at", start_s),
        label=str(item["at"]),
        targets=_targets(item, where, names),
        load=_event_load(item, where),
        fault=_event_fault(item, where),
        clear_faults=_event_clear(item, where),
        note=str(item.get("note", "")),
    )


def _at_seconds(value: Any, where: str, start_s: float | None) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ScenarioError(f"{where}: must be >= 0, got {value!r}")
        return float(value)
    if isinstance(value, str) and _CLOCK.match(value):
        if start_s is None:
            raise ScenarioError(f"{where}: a clock time needs clock_start at the top of the file")
        return (_clock_seconds(value, field=where) - start_s) % DAY_S
    raise ScenarioError(f"{where}: expected seconds (a number) or a clock time like 03:00, got {value!r}")


def _clock_seconds(text: str, *, field: str) -> float:
    match = _CLOCK.match(text)
    if not match:
        raise ScenarioError(f"{field}: expected a clock time like 02:50 or 02:58:32, got {text!r}")
    hours, minutes, seconds = int(match[1]), int(match[2]), int(match[3] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise ScenarioError(f"{field}: {text!r} is not a time of day")
    return float(hours * 3600 + minutes * 60 + seconds)


def _targets(item: Mapping[str, Any], where: str, names: set[str]) -> tuple[str, ...]:
    if "instance" in item and "instances" in item:
        raise ScenarioError(f"{where}: give instance or instances, not both")
    raw = item.get("instances", [item["instance"]] if "instance" in item else sorted(names))
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise ScenarioError(f"{where}.instances: expected a list of instance names")
    missing = sorted(set(raw) - names)
    if missing:
        raise ScenarioError(
            f"{where}: no instance named {missing[0]!r}; instances: {', '.join(sorted(names))}"
        )
    return tuple(raw)


def _event_load(item: Mapping[str, Any], where: str) -> LoadProfile | None:
    if "load" not in item:
        return None
    try:
        return load_profile_from_mapping(item["load"], where=f"{where}.load")
    except SpecError as exc:
        raise ScenarioError(str(exc)) from None


def _event_fault(item: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    if "fault" not in item:
        return None
    try:
        parse_fault(item["fault"], now=0.0)
    except FaultError as exc:
        suffix = f".{exc.field}" if exc.field else ""
        raise ScenarioError(f"{where}.fault{suffix}: {exc}") from None
    return dict(item["fault"])


def _event_clear(item: Mapping[str, Any], where: str) -> str | None:
    if "clear_faults" not in item:
        return None
    value = item["clear_faults"]
    if value is True or value == "all":
        return "all"
    if isinstance(value, str) and value in FaultKind.__members__.values():
        return value
    raise ScenarioError(f"{where}.clear_faults: expected true, all, or a fault kind, got {value!r}")


# -- expect: what a drill checks (incidents/drills/) ----------------------------------------


def _expect(value: Any, start_s: float | None, names: set[str]) -> Expectations:
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
        by_s=_at_seconds(item["by"], f"{where}.by", start_s),
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
        by_s=None if by is None else _at_seconds(by, f"{where}.by", start_s),
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
