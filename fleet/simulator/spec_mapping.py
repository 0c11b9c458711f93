"""Build specs from plain mappings (YAML, JSON) with errors that name the field.

instance_spec_from_mapping({"name": "a", "port": "x"}, where="instances[0]")
-> SpecError("instances[0].port: expected an integer, got 'x'")
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from fleet.simulator.spec import GpuSlot, InstanceSpec, LoadProfile, SpecError


def instance_spec_from_mapping(data: Any, *, where: str) -> InstanceSpec:
    values = _fields_from_mapping(InstanceSpec, data, where=where)
    if "load" in values:
        values["load"] = load_profile_from_mapping(values["load"], where=f"{where}.load")
    if "gpus" in values:
        values["gpus"] = _gpu_slots(values["gpus"], where=f"{where}.gpus")
    return _build(InstanceSpec, values, where)


def load_profile_from_mapping(data: Any, *, where: str) -> LoadProfile:
    values = _fields_from_mapping(LoadProfile, data, where=where)
    return _build(LoadProfile, values, where)


def _gpu_slots(data: Any, *, where: str) -> tuple[GpuSlot, ...]:
    if not isinstance(data, list):
        raise SpecError(f"{where}: expected a list of GPUs")
    slots = []
    for i, item in enumerate(data):
        values = _fields_from_mapping(GpuSlot, item, where=f"{where}[{i}]")
        slots.append(_build(GpuSlot, values, f"{where}[{i}]"))
    return tuple(slots)


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    try:
        return cls(**values)
    except SpecError as exc:
        # The dataclass names its own field ("port: ..."); prefix where it sits.
        field_name = str(exc).split(":", 1)[0].removeprefix("load.")
        message = str(exc).split(":", 1)[1].strip()
        raise SpecError(f"{where}.{field_name}: {message}") from None
    except TypeError as exc:
        raise SpecError(f"{where}: {exc}") from None


def _fields_from_mapping(cls: type, data: Any, *, where: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise SpecError(f"{where}: expected a mapping of {cls.__name__} fields")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(f"{where}.{unknown[0]}: unknown field; known fields: {', '.join(sorted(known))}")
    return {name: _coerce(hints[name], value, where=f"{where}.{name}") for name, value in data.items()}


def _coerce(hint: Any, value: Any, *, where: str) -> Any:
    optional, base = _unwrap_optional(hint)
    if value is None:
        if optional:
            return None
        raise SpecError(f"{where}: may not be empty")
    if base is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false, got {value!r}")
        return value
    if base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer, got {value!r}")
        return value
    if base is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if base is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise SpecError(f"{where}: expected text, got {value!r}")
        return str(value)
    if typing.get_origin(base) is tuple and typing.get_args(base)[0] is str:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SpecError(f"{where}: expected a list of strings")
        return tuple(value)
    return value  # nested specs (load, gpus) are built by their callers


def _unwrap_optional(hint: Any) -> tuple[bool, Any]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return True, args[0]
    return False, hint
