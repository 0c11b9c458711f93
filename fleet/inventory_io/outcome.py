"""What planning and applying an import report: errors, planned changes, counts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext

from fleet.inventory_io.records import KIND_NOUNS, Record

ACTIONS = ("create", "update", "unchanged")
_SIGNS = {"create": "+", "update": "~", "unchanged": "="}


@dataclass(frozen=True)
class ImportError_:  # the underscore keeps it apart from the builtin ImportError
    """One problem with the input, located by line, kind, natural key and field where known."""

    message: str
    line: int | None = None
    kind: str = ""
    key: str = ""
    field: str = ""

    @property
    def place(self) -> str:
        """Where in the file, as it names things: kind and natural key, then the field."""
        return ": ".join(part for part in (f"{self.kind} {self.key}".strip(), self.field) if part)

    def __str__(self) -> str:
        line = gettext("line %(line)s") % {"line": self.line} if self.line else ""
        return ": ".join([part for part in (line, self.place) if part] + [str(self.message)])


@dataclass(frozen=True)
class PlannedChange:
    kind: str
    key: str
    action: str
    diff: dict[str, list[Any]] = field(default_factory=dict)
    line: int | None = None

    @property
    def kind_noun(self) -> str:
        return str(KIND_NOUNS.get(self.kind, self.kind))

    def __str__(self) -> str:
        head = f"{_SIGNS[self.action]} {self.action} {self.kind} {self.key}"
        if self.action != "update":
            return head
        parts = [f"{name} {_shown(old)} -> {_shown(new)}" for name, (old, new) in self.diff.items()]
        return f"{head}: {', '.join(parts)}"


def _shown(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    return json.dumps(value)


def _counts(changes: list[PlannedChange]) -> dict[str, int]:
    counts = dict.fromkeys(ACTIONS, 0)
    for change in changes:
        counts[change.action] += 1
    return counts


@dataclass
class ImportPlan:
    """The outcome of checking an input against the database; nothing has been written."""

    errors: list[ImportError_] = field(default_factory=list)
    changes: list[PlannedChange] = field(default_factory=list)
    records: list[Record] = field(default_factory=list, repr=False)
    # Located like the errors, but they do not stop the import (e.g. a shared base URL).
    warnings: list[ImportError_] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.changes)


@dataclass
class ImportResult:
    changes: list[PlannedChange] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.changes)


def counts_summary(counts: dict[str, int]) -> str:
    return f"{counts['create']} created, {counts['update']} updated, {counts['unchanged']} unchanged"
