"""What an inventory file holds: the four kinds, their fields, and one record per object.

A record's fields are the model's own field names. Relations travel by natural key:
a GPU or instance names its host, an instance lists its GPUs by index on that host,
a gateway lists its instances by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import models
from django.utils.translation import pgettext_lazy

from fleet.models import Gateway, Gpu, GpuHost, Instance

KINDS: dict[str, type[models.Model]] = {
    "host": GpuHost,
    "gpu": Gpu,
    "instance": Instance,
    "gateway": Gateway,
}
PLURALS = {"hosts": "host", "gpus": "gpu", "instances": "instance", "gateways": "gateway"}
# Each kind as the messages and the dry run name it (in English, as the file writes it).
KIND_NOUNS = {
    "host": pgettext_lazy("inventory kind", "host"),
    "gpu": pgettext_lazy("inventory kind", "gpu"),
    "instance": pgettext_lazy("inventory kind", "instance"),
    "gateway": pgettext_lazy("inventory kind", "gateway"),
}
LIST_FIELDS = frozenset({"tags", "nvlink_peers", "gpus", "instances"})
_SKIPPED = frozenset({"id", "created_at", "updated_at"})


def _field_names(model: type[models.Model]) -> tuple[str, ...]:
    fields = [*model._meta.concrete_fields, *model._meta.many_to_many]
    names = [f.name for f in fields]
    return tuple(n for n in names if n not in _SKIPPED)


FIELDS: dict[str, tuple[str, ...]] = {kind: _field_names(model) for kind, model in KINDS.items()}

# CSV's `kind` column says which kind a row is, so a gateway's own kind goes elsewhere.
_CSV_RENAMED = {("gateway", "kind"): "gateway_kind"}


def csv_columns(kind: str) -> dict[str, str]:
    """CSV column name -> field name for one kind."""
    return {_CSV_RENAMED.get((kind, name), name): name for name in FIELDS[kind]}


CSV_COLUMNS: tuple[str, ...] = (
    "kind",
    *dict.fromkeys(column for kind in KINDS for column in csv_columns(kind)),
)


@dataclass
class Record:
    """One object as read from a file: its kind, the line it starts on, and the fields it gives."""

    kind: str
    line: int | None
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return key_for(kind=self.kind, values=self.values)


def key_for(*, kind: str, values: dict[str, Any]) -> str:
    """The natural key as people write it: a name, or host/gpuN for a GPU (as Gpu.__str__)."""
    if kind == "gpu":
        return f"{values.get('host') or '?'}/gpu{_blank_as(values.get('index'), '?')}"
    return str(_blank_as(values.get("name"), "?"))


def _blank_as(value: Any, placeholder: str) -> Any:
    return placeholder if value is None or value == "" else value


def to_record(obj: models.Model) -> dict[str, Any]:
    """An object's fields as the file writes them: relations by natural key, lists sorted."""
    kind = kind_of(obj)
    return {name: _exported_value(obj, name) for name in FIELDS[kind]}


def kind_of(obj: models.Model) -> str:
    return next(kind for kind, model in KINDS.items() if isinstance(obj, model))


def _exported_value(obj: models.Model, name: str) -> Any:
    if name == "host":
        return obj.host.name
    if name == "gpus":
        return sorted(g.index for g in obj.gpus.all())
    if name == "instances":
        return sorted(i.name for i in obj.instances.all())
    value = obj._meta.get_field(name).value_from_object(obj)
    return sorted(value) if name in LIST_FIELDS else value
