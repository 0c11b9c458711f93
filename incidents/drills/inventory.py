"""The scratch inventory a drill probes: drill hosts (left out of the schedules and the
alert evaluation) named after the run, so they cannot clash with real ones."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from fleet.models import Gpu, GpuHost, GpuTelemetry, Instance
from fleet.simulator.scenarios import Scenario
from fleet.simulator.spec import GpuSlot, InstanceSpec
from incidents.models import Incident

PREFIX = "drill-"


def host_name(*, tag: str, host: str) -> str:
    return f"{PREFIX}{tag}-{host}"[:63]


def gpu_slots(scenario: Scenario) -> dict[str, tuple[GpuSlot, ...]]:
    """The GPUs of each instance, numbered per host: instances sharing a host get
    different indexes, as on a real machine."""
    taken: dict[str, int] = {}
    slots = {}
    for spec in scenario.instances:
        host = scenario.host_of(spec.name)
        first = taken.get(host, 0)
        slots[spec.name] = tuple(GpuSlot(index=first + i) for i in range(spec.gpu_count))
        taken[host] = first + spec.gpu_count
    return slots


@transaction.atomic
def make_inventory(
    *, scenario: Scenario, specs: list[InstanceSpec], ports: dict[str, int], tag: str
) -> dict[int, str]:
    """Hosts, GPUs and instances for the running simulator; returns instance id -> scenario name."""
    hosts: dict[str, GpuHost] = {}
    names = {}
    for spec in specs:
        key = scenario.host_of(spec.name)
        if key not in hosts:
            hosts[key] = _saved(
                GpuHost(
                    name=host_name(tag=tag, host=key),
                    address="127.0.0.1",
                    gpu_telemetry=GpuTelemetry.SIMULATED,
                    numa_nodes=1,
                    driver_version=spec.driver_version,
                    cuda_version=spec.cuda_version,
                    drill=True,
                    notes=f"Scratch host of a drill of {scenario.name}.",
                )
            )
        host = hosts[key]
        gpus = [
            _saved(Gpu(host=host, index=slot.index, model=spec.gpu_model, form_factor="sxm", numa_node=0))
            for slot in spec.gpus
        ]
        instance = _saved(
            Instance(
                host=host,
                name=f"{PREFIX}{tag}-{spec.name}"[:63],
                engine=spec.engine,
                engine_version=spec.version,
                base_url=f"http://127.0.0.1:{ports[spec.name]}",
                served_model_name=spec.served_model_name,
                max_model_len=spec.max_model_len,
                max_num_seqs=spec.max_num_seqs,
                max_num_batched_tokens=spec.max_num_batched_tokens,
                gpu_memory_utilization=spec.gpu_memory_utilization,
                tensor_parallel_size=spec.gpu_count,
            )
        )
        instance.gpus.set(gpus)
        names[instance.pk] = spec.name
    return names


def _saved(row):  # noqa: ANN001, ANN202
    row.full_clean()
    row.save()
    return row


def scratch_incidents(*, instance_ids: list[int]):
    hosts = Instance.objects.filter(pk__in=instance_ids).values("host_id")
    return Incident.objects.filter(Q(instances__in=instance_ids) | Q(hosts__in=hosts)).distinct()


def remove_inventory(*, instance_ids: list[int]) -> None:
    """The scratch hosts (their GPUs, instances, probe data and alert states go with them)
    and the incidents the drill opened on them."""
    host_ids = list(Instance.objects.filter(pk__in=instance_ids).values_list("host_id", flat=True))
    incident_ids = list(scratch_incidents(instance_ids=instance_ids).values_list("pk", flat=True))
    Incident.objects.filter(pk__in=incident_ids).delete()
    GpuHost.objects.filter(pk__in=host_ids, drill=True).delete()
