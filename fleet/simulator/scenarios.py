"""Scenario files: instances, then load and faults on a timeline (scenarios/README.md).

    scenario = load_scenario(SCENARIO_DIR / "guide-1400-batch-surge-two-ips.yaml")

Loading validates everything up front (instance fields, load fields, fault kinds and
parameters, instance names on the timeline) and raises ScenarioError naming the field,
like "timeline[2].fault.kind: unknown fault kind 'oom'; known kinds: ...".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleet.simulator.faults import FaultError, FaultKind, parse_fault
from fleet.simulator.spec import InstanceSpec, LoadProfile, SpecError
from fleet.simulator.spec_mapping import instance_spec_from_mapping, load_profile_from_mapping

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_TOP_LEVEL = {"name", "description", "time_scale", "clock_start", "end", "instances", "timeline"}
_EVENT_KEYS = {"at", "instance", "instances", "load", "fault", "clear_faults", "note"}
_ACTIONS = ("load", "fault", "clear_faults")
DAY_S = 24 * 3600


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
class Scenario:
    name: str
    description: str
    time_scale: float  # scenario seconds per real second
    clock_start: str | None
    end_s: float | None
    instances: tuple[InstanceSpec, ...]
    timeline: tuple[ScenarioEvent, ...]

    def real_seconds(self, scenario_seconds: float) -> float:
        return scenario_seconds / self.time_scale

    @property
    def real_duration_s(self) -> float | None:
        return None if self.end_s is None else self.real_seconds(self.end_s)


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
    instances = _instances(data.get("instances"))
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


def _instances(value: Any) -> tuple[InstanceSpec, ...]:
    if not isinstance(value, list) or not value:
        raise ScenarioError("instances: needs a list of at least one instance")
    specs = []
    for i, item in enumerate(value):
        try:
            specs.append(instance_spec_from_mapping(item, where=f"instances[{i}]"))
        except SpecError as exc:
            raise ScenarioError(str(exc)) from None
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScenarioError(f"instances: names must be unique; repeated: {', '.join(duplicates)}")
    return tuple(specs)


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
