"""Running probes for inventory instances and storing what they found.

The Django edge of `fleet/probes/`: it turns Instance rows into probe targets, runs the
async probes, and writes runs, samples and states. Celery tasks and the `probe` command
call these functions; nothing here knows about Celery.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.models import (
    GpuTelemetry,
    Instance,
    InstanceState,
    MetricSample,
    ProbeCycle,
    ProbeRun,
    ProbeSettings,
    RunStatus,
    Trigger,
)
from fleet.nvml.simulated_backend import nvml_backend_for
from fleet.probes.classify import Thresholds, next_state
from fleet.probes.instance_probe import InstanceProbe, probe_many
from fleet.probes.scrape import Scrape
from fleet.probes.target import ProbeLimits, ProbeTarget
from fleet.sample_names import samples_from


def target_for(instance: Instance) -> ProbeTarget:
    """Probes go only to inventory instances; the API key is read from the named variable."""
    return ProbeTarget(
        instance_id=instance.pk,
        name=instance.name,
        engine=instance.engine,
        engine_version=instance.engine_version,
        base_url=instance.base_url,
        served_model_name=instance.served_model_name,
        api_key=os.environ.get(instance.api_key_env) if instance.api_key_env else None,
        max_num_seqs=instance.max_num_seqs,
        max_model_len=instance.max_model_len,
    )


def thresholds_from(settings: ProbeSettings) -> Thresholds:
    names = Thresholds.__dataclass_fields__
    return Thresholds(**{name: getattr(settings, name) for name in names if hasattr(settings, name)})


def limits_from(settings: ProbeSettings) -> ProbeLimits:
    names = ProbeLimits.__dataclass_fields__
    return ProbeLimits(**{name: getattr(settings, name) for name in names if hasattr(settings, name)})


def _gpu_backend(instance: Instance):
    telemetry = instance.host.gpu_telemetry
    if telemetry == GpuTelemetry.SIMULATED:
        return nvml_backend_for("simulated", url=f"{instance.base_url}/_sim/nvml")
    if telemetry == GpuTelemetry.NVML:
        return nvml_backend_for("pynvml")
    return None


def _gpu_indexes(instance: Instance) -> frozenset[int]:
    return frozenset(g.index for g in instance.gpus.all())


def _instance_gpus(instance: Instance) -> list[dict]:
    return [{"index": g.index, "numa_node": g.numa_node} for g in instance.gpus.all()]


def _stored_scrape(state: InstanceState) -> Scrape | None:
    """The last cycle's scrape, for rates; a stored one that no longer reads is dropped."""
    if not state.last_scrape:
        return None
    try:
        return Scrape.from_dict(state.last_scrape)
    except ValueError:
        return None


def probe_instances(*, instances: list[Instance], settings: ProbeSettings) -> list[InstanceProbe]:
    """Probe the instances concurrently (bounded by settings.concurrency)."""
    stored = {s.instance_id: _stored_scrape(s) for s in InstanceState.objects.filter(instance__in=instances)}
    previous = {instance_id: scrape for instance_id, scrape in stored.items() if scrape}
    return asyncio.run(
        probe_many(
            targets=[target_for(i) for i in instances],
            previous_scrapes=previous,
            limits=limits_from(settings),
            thresholds=thresholds_from(settings),
            concurrency=settings.concurrency,
            gpu_backends={i.pk: _gpu_backend(i) for i in instances},
            instance_gpus={i.pk: _instance_gpus(i) for i in instances},
        )
    )


_STATE_FIELDS = [
    "verdict",
    "since",
    "consecutive_failures",
    "last_probe_at",
    "findings",
    "last_scrape",
    "last_run",
]


def _fill_run(run: ProbeRun, probe: InstanceProbe) -> None:
    run.status, run.finished_at = RunStatus.DONE, timezone.now()
    run.verdict, run.outcome = probe.classification.verdict, probe.outcome
    # The parsed scrape is kept once, on the instance's state, for the next cycle's rates.
    run.result = probe.to_dict(with_scrape=False)
    run.findings = [f.to_dict() for f in probe.classification.findings]


def _advance(
    state: InstanceState, probe: InstanceProbe, run: ProbeRun, thresholds: Thresholds, at: datetime
) -> None:
    verdict, failures = next_state(
        previous_state=state.verdict,
        consecutive_failures=state.consecutive_failures,
        classification=probe.classification,
        thresholds=thresholds,
    )
    if verdict != state.verdict:
        state.since = at
    state.verdict, state.consecutive_failures = verdict, failures
    state.last_probe_at, state.findings, state.last_run = at, run.findings, run
    if probe.scrape:
        state.last_scrape = probe.scrape.to_dict()


def record_probes(
    *,
    instances: Iterable[Instance],
    probes: list[InstanceProbe],
    trigger: str,
    settings: ProbeSettings,
    runs: dict[int, ProbeRun] | None = None,
) -> list[ProbeRun]:
    """Store a sweep's results in a handful of bulk queries, whatever the fleet's size."""
    at, thresholds = timezone.now(), thresholds_from(settings)
    by_id = {i.pk: i for i in instances}
    states = {s.instance_id: s for s in InstanceState.objects.filter(instance_id__in=by_id)}
    recorded, samples = [], []
    for probe in probes:
        instance = by_id[probe.target.instance_id]
        run = (runs or {}).get(instance.pk) or ProbeRun(instance=instance, trigger=trigger, started_at=at)
        _fill_run(run, probe)
        recorded.append(run)
        samples += [
            MetricSample(instance=instance, name=name, ts=at, value=value)
            for name, value in samples_from(probe, gpu_indexes=_gpu_indexes(instance)).items()
        ]
    requested = [r for r in recorded if r.pk is not None]
    with transaction.atomic():
        ProbeRun.objects.bulk_create([r for r in recorded if r.pk is None])
        ProbeRun.objects.bulk_update(
            requested, ["status", "finished_at", "verdict", "outcome", "result", "findings"]
        )
        for run, probe in zip(recorded, probes, strict=True):
            state = states.setdefault(run.instance_id, InstanceState(instance_id=run.instance_id, since=at))
            _advance(state, probe, run, thresholds, at)
        # One upsert for new and known states alike: bulk_update's CASE per field is slow.
        InstanceState.objects.bulk_create(
            list(states.values()),
            update_conflicts=True,
            unique_fields=["instance"],
            update_fields=_STATE_FIELDS,
        )
        MetricSample.objects.bulk_create(samples, batch_size=2000)
    return recorded


def _with_probe_relations(queryset):
    return queryset.select_related("host").prefetch_related("gpus")


def _open_cycle(kind: str) -> ProbeCycle | None:
    """Open a cycle, or None when one is still running (the database allows one open cycle)."""
    now = timezone.now()
    ProbeCycle.objects.filter(
        kind=kind, finished_at=None, started_at__lt=now - ProbeCycle.STALE_AFTER
    ).update(finished_at=now, note="abandoned: its worker never finished it")
    try:
        with transaction.atomic():
            return ProbeCycle.objects.create(kind=kind, started_at=now)
    except IntegrityError:
        ProbeCycle.objects.create(
            kind=kind,
            started_at=now,
            finished_at=now,
            skipped=True,
            note="skipped: the previous cycle was still running",
        )
        return None


def run_cycle(*, kind: str = "instances") -> ProbeCycle | None:
    """One scheduled sweep over every enabled instance; None when skipped for overlap."""
    cycle = _open_cycle(kind)
    if cycle is None:
        return None
    try:
        settings = ProbeSettings.current()
        instances = list(_with_probe_relations(Instance.objects.enabled()))
        probes = probe_instances(instances=instances, settings=settings)
        runs = record_probes(instances=instances, probes=probes, trigger=Trigger.SCHEDULE, settings=settings)
        cycle.instance_count = len(runs)
        cycle.failed_count = sum(1 for r in runs if r.verdict == "down")
    finally:
        cycle.finished_at = timezone.now()
        cycle.save()
    return cycle


def request_probe(*, instance: Instance, requested_by: str, trigger: str = Trigger.MANUAL) -> ProbeRun:
    return ProbeRun.objects.create(instance=instance, trigger=trigger, requested_by=requested_by)


def run_requested_probe(*, run_id: int) -> ProbeRun:
    """Carry out a run made by request_probe (the "probe now" button or the CLI)."""
    run = ProbeRun.objects.get(pk=run_id)
    run.status = RunStatus.RUNNING
    run.save(update_fields=["status"])
    settings = ProbeSettings.current()
    # A requested probe runs for a disabled instance too: someone asked for it.
    instance = _with_probe_relations(Instance.objects).get(pk=run.instance_id)
    try:
        (probe,) = probe_instances(instances=[instance], settings=settings)
        (run,) = record_probes(
            instances=[instance],
            probes=[probe],
            trigger=run.trigger,
            settings=settings,
            runs={instance.pk: run},
        )
    except Exception as exc:  # the run row must end, whatever happened
        run.status, run.error, run.finished_at = (
            RunStatus.FAILED,
            f"{type(exc).__name__}: {exc}",
            timezone.now(),
        )
        run.save(update_fields=["status", "error", "finished_at"])
        raise
    return run
