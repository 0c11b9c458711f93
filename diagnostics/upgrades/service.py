"""The upgrade diff at Django's edge: inventory instances as diff Targets (their launch values,
other flags and calculator input), and the report for one instance or the whole fleet."""

from __future__ import annotations

from core.i18n import later
from diagnostics import configgen_fill, sizing_service
from diagnostics.models import ModelSpec
from diagnostics.upgrades import diff
from diagnostics.upgrades.facts import VersionError
from fleet.models import Engine, Instance


class UnknownInstance(LookupError):
    """No vLLM instance of that name or id in the inventory; args[0] is a core.i18n message."""


def fleet_instances():
    """The vLLM instances a fleet-wide diff covers: every enabled one."""
    return Instance.objects.enabled().filter(engine=Engine.VLLM).prefetch_related("gpus").order_by("name")


def target(instance: Instance, *, specs: list[ModelSpec] | None = None) -> diff.Target:
    spec, _model_key, missing = sizing_service.spec_for_instance(instance, specs=specs)
    return diff.Target(
        name=instance.name,
        launch_values=configgen_fill.from_instance(instance),
        extra_args=instance.extra_args,
        sizing=spec,
        sizing_problems=tuple(missing),
    )


def find_instance(*, name: str = "", pk: int | None = None) -> Instance:
    query = Instance.objects.filter(engine=Engine.VLLM).prefetch_related("gpus")
    instance = query.filter(pk=pk).first() if pk is not None else query.filter(name=name).first()
    if instance is None:
        raise UnknownInstance(later("No vLLM instance named %(name)s in the inventory", name=name or str(pk)))
    return instance


def report(old: str, new: str, *, instance: Instance | None = None) -> diff.Report:
    """The upgrade report for `instance`, or for every enabled vLLM instance when None.
    VersionError for versions that are not, or not in order."""
    diff.versions(old, new)  # a bad version fails before the inventory is read
    specs = list(ModelSpec.objects.all())
    if instance is not None:
        return diff.diff(old, new, instance=target(instance, specs=specs))
    return diff.diff(old, new, fleet=[target(i, specs=specs) for i in fleet_instances()])


__all__ = ["UnknownInstance", "VersionError", "find_instance", "fleet_instances", "report", "target"]
