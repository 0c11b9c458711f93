"""Probe results as JSON-ready dicts, without dataclasses.asdict's deep copies.

A sweep turns thousands of small frozen results into JSON; asdict recurses into every
value and copies it, which costs more than the rest of storing them.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(cls.__dataclass_fields__)


def shallow_dict(obj: Any) -> dict[str, Any]:
    """A flat dataclass's fields by name; its values must already be JSON-ready."""
    return {name: getattr(obj, name) for name in _names(type(obj))}
