"""Staging records into the database, kind by kind, with full model validation.

Planning and applying share this code: planning stages inside a transaction that is
rolled back, so checks that need the database (unique UUIDs, GPUs of a host created
earlier in the same file) behave exactly as they will when the import is applied.
A record with errors is not saved, so records that refer to it get an error too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import DatabaseError, models, transaction
from django.utils.translation import gettext

from fleet import change_tracking
from fleet.inventory_io.kinds import HANDLERS, KindHandler, Problems
from fleet.inventory_io.outcome import ImportError_, PlannedChange
from fleet.inventory_io.records import KINDS, Record
from fleet.inventory_io.values import coerce


@dataclass
class ChangeLog:
    """Who an applied import is logged as; planning stages without one."""

    actor: Any
    source: str


@dataclass
class Staged:
    changes: list[PlannedChange] = field(default_factory=list)
    errors: list[ImportError_] = field(default_factory=list)


@dataclass
class _Related:
    field: str
    targets: list | None  # None: leave the many-to-many field as it is


def stage_records(*, records: list[Record], log: ChangeLog | None) -> Staged:
    """Save every valid record (hosts first, gateways last), logging to `log` if given."""
    staged = Staged()
    for kind in KINDS:
        for record in (r for r in records if r.kind == kind):
            _stage(record, HANDLERS[kind], log, staged)
    return staged


def _stage(record: Record, handler: KindHandler, log: ChangeLog | None, staged: Staged) -> None:
    values, problems = _coerced(record)
    found = handler.find(values)
    before = change_tracking.snapshot(found) if found else None
    obj = found or handler.model()
    skip = {name for name, _ in problems}
    problems += handler.attach(obj, values, skip)
    _assign(obj, values, handler.relations | skip)
    problems += _clean(obj, skip | {name for name, _ in problems})
    targets, related_problems = handler.related(obj, values)
    problems += related_problems
    change = None
    if not problems:
        change, problems = _commit(record, obj, before, _Related(handler.many, targets), log)
    staged.errors.extend(_located(record, name, msg) for name, msg in problems)
    if change is not None:
        staged.changes.append(change)


def _coerced(record: Record) -> tuple[dict[str, Any], Problems]:
    values: dict[str, Any] = {}
    problems: Problems = []
    for name, raw in record.values.items():
        try:
            values[name] = coerce(kind=record.kind, name=name, raw=raw)
        except ValidationError as exc:
            problems.extend((name, msg) for msg in exc.messages)
    return values, problems


def _assign(obj: models.Model, values: dict[str, Any], skip: set[str]) -> None:
    for name, value in values.items():
        if name not in skip:
            setattr(obj, name, value)


def _clean(obj: models.Model, skip: set[str]) -> Problems:
    exclude = set(skip)
    if getattr(obj, "host_id", True) is None:  # a GPU or instance whose host did not resolve
        exclude.add("host")
    try:
        obj.full_clean(exclude=exclude)
    except ValidationError as exc:
        return [(name, msg) for name, msgs in exc.message_dict.items() for msg in msgs]
    return []


def _commit(
    record: Record, obj: models.Model, before: dict | None, related: _Related, log: ChangeLog | None
) -> tuple[PlannedChange | None, Problems]:
    """Save the object unless it is unchanged, so updated_at only moves on a real change."""
    if before is not None and not change_tracking.diff(before, _planned(obj, related)):
        return _planned_change(record, "unchanged", {}), []
    problems = _save(obj, related)
    if problems:
        return None, problems
    after = change_tracking.snapshot(obj)
    if before is None:
        if log is not None:
            change_tracking.record_create(obj, actor=log.actor, source=log.source)
        return _planned_change(record, "create", change_tracking.diff({}, after)), []
    if log is not None:
        change_tracking.record_update(obj, before=before, actor=log.actor, source=log.source)
    return _planned_change(record, "update", change_tracking.diff(before, after)), []


def _planned(obj: models.Model, related: _Related) -> dict[str, Any]:
    """The snapshot the object will have once saved, before saving it."""
    planned = change_tracking.snapshot(obj)
    if related.targets is not None:
        planned[related.field] = sorted(str(t) for t in related.targets)
    return planned


def _save(obj: models.Model, related: _Related) -> Problems:
    try:
        with transaction.atomic():
            obj.save()
            if related.targets is not None:
                getattr(obj, related.field).set(related.targets)
    except DatabaseError as exc:
        return [(NON_FIELD_ERRORS, (gettext("The database refused it: %(error)s") % {"error": exc}).strip())]
    return []


def _planned_change(record: Record, action: str, diff: dict[str, list[Any]]) -> PlannedChange:
    return PlannedChange(kind=record.kind, key=record.key, action=action, diff=diff, line=record.line)


def _located(record: Record, name: str, message: str) -> ImportError_:
    return ImportError_(
        message,
        line=record.line,
        kind=record.kind,
        key=record.key,
        field="" if name == NON_FIELD_ERRORS else name,
    )
