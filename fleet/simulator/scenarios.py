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

from fleet.simulator.faults import FaultError, FaultKind, parse_fault
from fleet.simulator.scenario_clock import DAY_S, ScenarioError, at_seconds, clock_seconds
from fleet.simulator.scenario_expect import (
    Expectations,
    IncidentExpectation,
    InstanceExpectation,
    parse_expect,
)
from fleet.simulator.spec import InstanceSpec, LoadProfile, SpecError
from fleet.simulator.spec_mapping import instance_spec_from_mapping, load_profile_from_mapping

__all__ = [
    "DAY_S", "Expectations", "IncidentExpectation", "InstanceExpectation", "Scenario",
    "ScenarioError", "ScenarioEvent", "load_scenario", "parse_scenario", "shipped_scenarios",
]  # fmt: skip

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
_TOP_LEVEL = {
    "name", "description", "time_scale", "clock_start", "end", "instances", "timeline",
    "probe_interval_s", "expect",
}  # fmt: skip
_EVENT_KEYS = {"at", "instance", "instances", "load", "fault", "clear_faults", "note"}
_ACTIONS = ("load", "fault", "clear_faults")
DEFAULT_PROBE_INTERVAL_S = 30.0


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
        base = 0.0 if self.clock_start is None else clock_seconds(self.clock_start, field="clock_start")
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
    start_s = None if clock_start is None else clock_seconds(str(clock_start), field="clock_start")
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
        end_s=None if end is None else at_seconds(end, "end", start_s),
        instances=instances,
        timeline=timeline,
        probe_interval_s=_positive(
            data.get("probe_interval_s", DEFAULT_PROBE_INTERVAL_S), "probe_interval_s"
        ),
        expect=parse_expect(data.get("expect"), start_s, names),
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
        at_s=at_seconds(item["at"], f"{where}.at", start_s),
        label=str(item["at"]),
        targets=_targets(item, where, names),
        load=_event_load(item, where),
        fault=_event_fault(item, where),
        clear_faults=_event_clear(item, where),
        note=str(item.get("note", "")),
    )


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
