"""Per-kind rules for staging a record: how to find its object and resolve its relations.

Each kind is a small handler class in a registry, so the staging loop never branches
on the kind. Problems are returned as (field, message) pairs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from fleet.models import Gateway, Gpu, GpuHost, Instance

Problems = list[tuple[str, str]]


class KindHandler:
    model: ClassVar[type[models.Model]]
    relations: ClassVar[frozenset[str]] = frozenset()
    many: ClassVar[str] = ""

    def find(self, values: dict[str, Any]) -> models.Model | None:
        return self.model._default_manager.filter(name=values.get("name")).first()

    def attach(self, obj: models.Model, values: dict[str, Any], skip: set[str]) -> Problems:
        """Point foreign keys at their objects; returns problems for missing ones."""
        return []

    def related(self, obj: models.Model, values: dict[str, Any]) -> tuple[list | None, Problems]:
        """The objects for the many-to-many field (None: leave as is) and their problems."""
        return None, []


_MISSING = {
    "host": _("No host named %(name)s in the file or the database (or it has errors)."),
    "instance": _("No instance named %(name)s in the file or the database (or it has errors)."),
}


def _missing(kind: str, name: Any) -> str:
    return _MISSING[kind] % {"name": name}


class _OnAHost(KindHandler):
    relations = frozenset({"host"})

    def attach(self, obj: models.Model, values: dict[str, Any], skip: set[str]) -> Problems:
        if "host" in skip:
            return []
        if "host" not in values:
            return [] if obj.host_id else [("host", gettext("Give the name of the host."))]
        host = GpuHost.objects.filter(name=values["host"]).first()
        if host is None:
            return [("host", _missing("host", values["host"]))]
        obj.host = host
        return []


class HostHandler(KindHandler):
    model = GpuHost


class GpuHandler(_OnAHost):
    model = Gpu

    def find(self, values: dict[str, Any]) -> models.Model | None:
        if "index" not in values:
            return None
        return Gpu.objects.filter(host__name=values.get("host"), index=values["index"]).first()


class InstanceHandler(_OnAHost):
    model = Instance
    relations = frozenset({"host", "gpus"})
    many = "gpus"

    def related(self, obj: models.Model, values: dict[str, Any]) -> tuple[list | None, Problems]:
        if not obj.host_id:
            return None, []
        if "gpus" not in values:
            gpus = list(obj.gpus.all()) if obj.pk else []
            return None, _gpu_problems(obj, gpus)
        wanted = values["gpus"]
        gpus = list(Gpu.objects.filter(host=obj.host, index__in=wanted).order_by("index"))
        absent = sorted(set(wanted) - {g.index for g in gpus})
        if absent:
            message = gettext("Host %(host)s has no GPU with index %(indexes)s.") % {
                "host": obj.host.name,
                "indexes": ", ".join(str(i) for i in absent),
            }
            return None, [("gpus", message)]
        return gpus, _gpu_problems(obj, gpus)


def _gpu_problems(instance: Instance, gpus: list[Gpu]) -> Problems:
    try:
        instance.clean_gpus(gpus)
    except ValidationError as exc:
        return [(name, msg) for name, msgs in exc.message_dict.items() for msg in msgs]
    return []


class GatewayHandler(KindHandler):
    model = Gateway
    relations = frozenset({"instances"})
    many = "instances"

    def related(self, obj: models.Model, values: dict[str, Any]) -> tuple[list | None, Problems]:
        if "instances" not in values:
            return None, []
        names = values["instances"]
        found = list(Instance.objects.filter(name__in=names).order_by("name"))
        absent = sorted(set(names) - {i.name for i in found})
        return found, [("instances", _missing("instance", name)) for name in absent]


HANDLERS: dict[str, KindHandler] = {
    "host": HostHandler(),
    "gpu": GpuHandler(),
    "instance": InstanceHandler(),
    "gateway": GatewayHandler(),
}
