"""Recording every create, edit and delete of inventory objects in the change log.

Views, the API, the importer and the CLI all go through these functions, so the
log is the same whichever door a change came in by.
"""

from __future__ import annotations

from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import models, router, transaction
from django.db.models.deletion import Collector

from fleet.models import ChangeAction, ChangeLogEntry, Gateway, Gpu, GpuHost, Instance

TRACKED_MODELS: tuple[type[models.Model], ...] = (GpuHost, Gpu, Instance, Gateway)
_SKIPPED_FIELDS = {"id", "created_at", "updated_at"}


def snapshot(obj: models.Model) -> dict[str, Any]:
    """The object's field values as JSON-ready data; relations by their names."""
    data: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.name in _SKIPPED_FIELDS:
            continue
        if field.is_relation:
            related = getattr(obj, field.name)
            data[field.name] = str(related) if related is not None else None
        else:
            data[field.name] = field.value_from_object(obj)
    if obj.pk:
        for field in obj._meta.many_to_many:
            data[field.name] = sorted(str(o) for o in getattr(obj, field.name).all())
    return data


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    keys = sorted(set(before) | set(after))
    return {k: [before.get(k), after.get(k)] for k in keys if before.get(k) != after.get(k)}


def _actor_fields(actor: Any, source: str) -> dict[str, Any]:
    if actor is not None and getattr(actor, "is_authenticated", False):
        return {"actor": actor, "actor_name": actor.get_username(), "source": source}
    return {"actor": None, "actor_name": source, "source": source}


def _write(obj: models.Model, action: str, changes: dict, actor: Any, source: str) -> ChangeLogEntry:
    return ChangeLogEntry.objects.create(
        content_type=ContentType.objects.get_for_model(obj),
        object_id=obj.pk,
        object_repr=str(obj)[:200],
        action=action,
        changes=changes,
        **_actor_fields(actor, source),
    )


def record_create(obj: models.Model, *, actor: Any, source: str) -> ChangeLogEntry:
    return _write(obj, ChangeAction.CREATE, diff({}, snapshot(obj)), actor, source)


def record_update(
    obj: models.Model, *, before: dict[str, Any], actor: Any, source: str
) -> ChangeLogEntry | None:
    """Log an edit; an edit that changed nothing leaves no entry."""
    changes = diff(before, snapshot(obj))
    if not changes:
        return None
    return _write(obj, ChangeAction.UPDATE, changes, actor, source)


def deletion_consequences(obj: models.Model) -> list[models.Model]:
    """The tracked objects that deleting `obj` would delete with it (not `obj` itself)."""
    collector = Collector(using=router.db_for_write(type(obj)))
    collector.collect([obj])
    gone: list[models.Model] = []
    for model, instances in collector.data.items():
        if model in TRACKED_MODELS:
            gone.extend(i for i in instances if not (model is type(obj) and i.pk == obj.pk))
    return sorted(gone, key=lambda o: (TRACKED_MODELS.index(type(o)), str(o)))


@transaction.atomic
def delete_with_log(obj: models.Model, *, actor: Any, source: str) -> list[models.Model]:
    """Delete `obj` and whatever cascades with it, logging each tracked object's last state."""
    cascaded = deletion_consequences(obj)
    for item in [obj, *cascaded]:
        _write(item, ChangeAction.DELETE, diff(snapshot(item), {}), actor, source)
    obj.delete()
    return cascaded
