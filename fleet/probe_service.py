"""Running probes for inventory instances and storing what they found.

The Django edge of `fleet/probes/`: it turns Instance rows into probe targets, runs the
async probes, and writes runs, samples and states. Celery tasks and the `probe` command
call these functions; nothing here knows about Celery.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from fleet.agent.dispatch import request_gpu_readings
from fleet.agent.readings import reported_reading
from fleet.models import (
    GpuTelemetry,
    Instance,
    InstanceState,
    MetricSample,
    ProbeCycle,
    ProbeKindChoice,
    ProbeRun,
    ProbeSettings,
    RunStatus,
    Trigger,
)
from fleet.nvml.simulated_backend import nvml_backend_for
from fleet.probes.classify import Thresholds, next_state
from fleet.probes.instance_probe import InstanceProbe, probe_many
from fleet.probes.judgement import Judgement, judge
from fleet.probes.parts import ALL_KINDS, ProbeKind, ProbeParts, parse_kinds
from fleet.probes.scrape import Scrape
from fleet.probes.target import ProbeLimits, ProbeTarget, gateway_in_front
from fleet.series import values_from


def target_for(instance: Instance) -> ProbeTarget:
    """Probes go only to inventory instances; the API key is read from the named variable.
    A gateway in front of the instance that its base URL does not already point at is timed
    too (the TTFT breakdown's gateway gap)."""
    gateways = sorted((g.name, g.url) for g in instance.gateways.all())
    gateway, gateway_url, through = gateway_in_front(instance.base_url, gateways)
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
        gateway=gateway,
        gateway_url="" if through else gateway_url,
    )


def thresholds_from(settings: ProbeSettings) -> Thresholds:
    names = Thresholds.__dataclass_fields__
    return Thresholds(**{name: getattr(settings, name) for name in names if hasattr(settings, name)})


def limits_from(settings: ProbeSettings) -> ProbeLimits:
    names = ProbeLimits.__dataclass_fields__
    return ProbeLimits(**{name: getattr(settings, name) for name in names if hasattr(settings, name)})


def _gpu_backend(instance: Instance, intervals_s: dict[str, float] | None = None):
    """Where an instance's GPU state comes from. NVML is read by the host's agent, never
    by this worker (whose GPUs are not the host's): the agent's last reading is used while
    it is fresh (the GPU kind's staleness window, from the schedule's intervals)."""
    telemetry = instance.host.gpu_telemetry
    if telemetry == GpuTelemetry.SIMULATED:
        return nvml_backend_for("simulated", url=f"{instance.base_url}/_sim/nvml")
    if telemetry == GpuTelemetry.DCGM:
        return nvml_backend_for("dcgm", url=instance.host.dcgm_exporter_url)
    if telemetry == GpuTelemetry.NVML:
        fresh_for = stale_after(intervals_s)["gpu"]
        return reported_reading(host=instance.host, now=timezone.now(), fresh_for=fresh_for)
    return None


def _gpu_indexes(instance: Instance) -> frozenset[int]:
    return frozenset(g.index for g in instance.gpus.all())


def _instance_gpus(instance: Instance) -> list[dict]:
    return [{"index": g.index, "numa_node": g.numa_node} for g in instance.gpus.all()]


def _stored_scrape(state: InstanceState) -> Scrape | None:
    """The last scrape, for rates; a stored one that no longer reads is dropped."""
    if not state.last_scrape:
        return None
    try:
        return Scrape.from_dict(state.last_scrape)
    except ValueError:
        return None


# Seconds between scheduled runs of each probe kind, unless the schedule hands in others.
DEFAULT_INTERVALS_S = {"health": 30, "stream": 60, "metrics": 30, "gpu": 30}
# Seconds between the host agents' snapshots (the "host checks" schedule): their series' spacing.
HOST_CHECKS_INTERVAL_S = 60


def stale_after(intervals_s: dict[str, float] | None = None) -> dict[str, timedelta]:
    """How old a kind's latest result may be and still count: three of its intervals, at
    least STALE_FLOOR. An older result is left out of the verdict (its kind has stopped).
    The intervals are handed in by whoever schedules the probes (ops_console.schedules)."""
    intervals = DEFAULT_INTERVALS_S | dict(intervals_s or {})
    return {kind: max(3 * timedelta(seconds=s), STALE_FLOOR) for kind, s in intervals.items()}


STALE_FLOOR = timedelta(seconds=90)


def stored_parts(
    state: InstanceState | None, *, now: datetime, skip: Iterable[str], windows: dict[str, timedelta]
) -> ProbeParts:
    """The latest results of the kinds not in `skip` that are recent enough."""
    if state is None:
        return ProbeParts()
    kept = {}
    for kind, entry in state.kinds.items():
        measured = state.measured_at(kind) if isinstance(entry, dict) else None
        if kind in skip or measured is None or now - measured > windows.get(kind, STALE_FLOOR):
            continue
        kept[kind] = entry.get("result") or {}
    return ProbeParts.from_kind_dicts(kept)


def _previous_scrapes(instances: Iterable[Instance]) -> dict[int, Scrape]:
    states = InstanceState.objects.filter(instance__in=list(instances)).only("instance_id", "last_scrape")
    return {s.instance_id: scrape for s in states if (scrape := _stored_scrape(s))}


def probe_instances(
    *,
    instances: list[Instance],
    settings: ProbeSettings,
    kinds: Iterable[ProbeKind] = ALL_KINDS,
    light_health: bool = False,
    intervals_s: dict[str, float] | None = None,
) -> list[InstanceProbe]:
    """Measure the instances for `kinds` concurrently (bounded by settings.concurrency);
    record_probes judges them, under the lock, with the stored results of the other kinds."""
    return asyncio.run(
        _measure(
            instances=instances,
            settings=settings,
            kinds=parse_kinds(kinds),
            light_health=light_health,
            intervals_s=intervals_s,
        )
    )


def _measure(
    *,
    instances: list[Instance],
    settings: ProbeSettings,
    kinds: frozenset[ProbeKind],
    light_health: bool = False,
    intervals_s: dict[str, float] | None = None,
) -> Coroutine[Any, Any, list[InstanceProbe]]:
    """The probe of `instances` for `kinds`, to be run on an event loop (the ORM reads are
    done here, before it runs)."""
    previous = _previous_scrapes(instances) if ProbeKind.METRICS in kinds else {}
    return probe_many(
        targets=[target_for(i) for i in instances],
        previous_scrapes=previous,
        limits=limits_from(settings),
        concurrency=settings.concurrency,
        kinds=kinds,
        light_health=light_health,
        gpu_backends={i.pk: _gpu_backend(i, intervals_s) for i in instances}
        if ProbeKind.GPU in kinds
        else {},
    )


_STATE_FIELDS = [
    "verdict",
    "since",
    "consecutive_failures",
    "last_probe_at",
    "findings",
    "kinds",
    "failures",
    "last_run",
    "baselines",
]


def _fill_run(run: ProbeRun, probe: InstanceProbe, judged: Judgement, kind: str) -> None:
    classification = judged.classification
    run.status, run.finished_at, run.kind = RunStatus.DONE, timezone.now(), kind
    run.verdict, run.outcome = classification.verdict, probe.outcome
    # The parsed scrape is kept once, on the instance's state, for the next cycle's rates;
    # the progress a requested run noted per kind (run.result["progress"]) is kept.
    run.result = {
        **run.result,
        **probe.to_dict(with_scrape=False),
        "classification": classification.to_dict(),
        "numa": [str(m) for m in judged.numa],
    }
    run.findings = [f.to_dict() for f in classification.findings]


@dataclass
class _Judging:
    """Judges each probe, inside the lock, on its fresh results and the state's latest
    results of the other kinds: the one judgement of an instance."""

    instances: dict[int, Instance]
    thresholds: Thresholds
    windows: dict[str, timedelta]
    at: datetime

    def judgement(self, probe: InstanceProbe, state: InstanceState) -> Judgement:
        others = stored_parts(state, now=self.at, skip=probe.kinds, windows=self.windows)
        instance = self.instances[probe.target.instance_id]
        return judge(
            target=probe.target,
            parts=others.overlaid(probe.parts, probe.kinds),
            thresholds=self.thresholds,
            instance_gpus=_instance_gpus(instance),
            baselines=state.baselines,
            fresh=frozenset(probe.kinds),
        )

    def advance(self, state: InstanceState, probe: InstanceProbe, run: ProbeRun, judged: Judgement):
        step = next_state(
            previous_state=state.verdict,
            failures=state.failures,
            classification=judged.classification,
            thresholds=self.thresholds,
            measured=probe.kinds,
        )
        if step.verdict != state.verdict:
            state.since = self.at
        state.verdict, state.failures = step.verdict, step.failures
        state.consecutive_failures = step.pending or max(step.failures.values(), default=0)
        state.last_probe_at, state.findings, state.last_run = self.at, run.findings, run
        if judged.baselines is not None:
            state.baselines = dict(judged.baselines)
        stamp = self.at.isoformat()
        state.kinds = state.kinds | {
            kind: {"at": stamp, "result": result} for kind, result in probe.kind_dicts.items()
        }
        if probe.scrape:
            state.last_scrape = probe.scrape.to_dict()


def _insert_samples(samples: list[tuple[int, str, float]], at: datetime) -> None:
    """Raw samples of one sweep, all stamped `at`, in one executemany: a sweep stores
    thousands, and building a model instance for each costs more than the insert."""
    if not samples:
        return
    ts = connection.ops.adapt_datetimefield_value(at)
    table = connection.ops.quote_name(MetricSample._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (instance_id, name, ts, value, resolution) VALUES (%s, %s, %s, %s, 0)",
            [(instance_id, name, ts, value) for instance_id, name, value in samples],
        )


def _locked_states(instance_ids: list[int], at: datetime) -> dict[int, InstanceState]:
    """Every instance's state row, locked until the transaction ends (made if missing)."""
    InstanceState.objects.bulk_create(
        [InstanceState(instance_id=i, since=at) for i in instance_ids], ignore_conflicts=True
    )
    # The stored scrape is only ever replaced here, never read: it stays in the database.
    locked = InstanceState.objects.select_for_update().filter(instance_id__in=instance_ids)
    locked = locked.defer("last_scrape")
    return {s.instance_id: s for s in locked.order_by("instance_id")}


def record_probes(
    *,
    instances: Iterable[Instance],
    probes: list[InstanceProbe],
    trigger: str,
    settings: ProbeSettings,
    runs: dict[int, ProbeRun] | None = None,
    kind: str = ProbeKindChoice.FULL,
    intervals_s: dict[str, float] | None = None,
) -> list[ProbeRun]:
    """Store a sweep's results in a handful of bulk queries, whatever the fleet's size.

    The instances' states are locked while the sweep is judged and stored, so sweeps of
    different kinds that end together never lose each other's results."""
    at = timezone.now()
    by_id = {i.pk: i for i in instances}
    judging = _Judging(
        instances=by_id, thresholds=thresholds_from(settings), windows=stale_after(intervals_s), at=at
    )
    recorded, samples = [], []
    for probe in probes:
        instance = by_id[probe.target.instance_id]
        run = (runs or {}).get(instance.pk) or ProbeRun(instance=instance, trigger=trigger, started_at=at)
        recorded.append(run)
        samples += [
            (instance.pk, name, value)
            for name, value in values_from(probe, gpu_indexes=_gpu_indexes(instance)).items()
        ]
    with transaction.atomic():
        states = _locked_states(list(by_id), at)
        for run, probe in zip(recorded, probes, strict=True):
            state = states[run.instance_id]
            judged = judging.judgement(probe, state)
            _fill_run(run, probe, judged, kind)
            judging.advance(state, probe, run, judged)
        requested = [r for r in recorded if r.pk is not None]  # made by request_probe
        ProbeRun.objects.bulk_create([r for r in recorded if r.pk is None])
        ProbeRun.objects.bulk_update(
            requested, ["status", "finished_at", "verdict", "outcome", "result", "findings", "kind"]
        )
        # Upserts, not bulk_update: its CASE per field is slow. States that got a new
        # scrape write it; the others leave the stored one alone: it was never loaded, and
        # the None put in its place only fills the INSERT half of an upsert that always
        # updates (every row exists, made and locked above).
        scraped = {p.target.instance_id for p in probes if p.scrape}
        for instance_id, state in states.items():
            if instance_id not in scraped:
                state.last_scrape = None
        for fields, chosen in (
            ([*_STATE_FIELDS, "last_scrape"], [s for i, s in states.items() if i in scraped]),
            (_STATE_FIELDS, [s for i, s in states.items() if i not in scraped]),
        ):
            InstanceState.objects.bulk_create(
                chosen, update_conflicts=True, unique_fields=["instance"], update_fields=fields
            )
        _insert_samples(samples, at)
    return recorded


def _with_probe_relations(queryset):
    return queryset.select_related("host", "host__agent").prefetch_related("gpus", "gateways")


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


def instances_for(kind: ProbeKind) -> list[Instance]:
    """The enabled instances a sweep of `kind` covers: for gpu, those whose host has telemetry."""
    queryset = Instance.objects.monitored()
    if kind == ProbeKind.GPU:
        queryset = queryset.exclude(host__gpu_telemetry=GpuTelemetry.OFF)
    return list(_with_probe_relations(queryset))


def run_cycle(
    *, kind: str = ProbeKind.HEALTH, intervals_s: dict[str, float] | None = None
) -> ProbeCycle | None:
    """One scheduled sweep of one probe kind over the monitored instances; None when skipped
    because the previous sweep of that kind is still running. ValueError for an unknown kind.
    intervals_s: the schedule's seconds between runs of each kind (for staleness)."""
    (probe_kind,) = parse_kinds([kind])
    cycle = _open_cycle(probe_kind.value)
    if cycle is None:
        return None
    if probe_kind == ProbeKind.GPU:
        # The agents read their hosts' GPUs; this sweep judges the readings they sent last.
        interval_s = (DEFAULT_INTERVALS_S | dict(intervals_s or {}))["gpu"]
        request_gpu_readings(interval_s=interval_s)
    try:
        runs = sweep(instances=instances_for(probe_kind), kind=probe_kind, intervals_s=intervals_s)
        cycle.instance_count = len(runs)
        cycle.failed_count = sum(1 for r in runs if r.verdict in ("down", "failing"))
    finally:
        cycle.finished_at = timezone.now()
        cycle.save()
    return cycle


def sweep(
    *,
    instances: list[Instance],
    kind: str,
    settings: ProbeSettings | None = None,
    trigger: str = Trigger.SCHEDULE,
    intervals_s: dict[str, float] | None = None,
) -> list[ProbeRun]:
    """Probe `instances` (loaded with their host and GPUs) for one kind, judge and store
    the results: the body of a scheduled cycle, also run by drills on their own hosts."""
    (probe_kind,) = parse_kinds([kind])
    settings = settings or ProbeSettings.current()
    probes = probe_instances(
        instances=instances, settings=settings, kinds={probe_kind}, intervals_s=intervals_s
    )
    return record_probes(
        instances=instances,
        probes=probes,
        trigger=trigger,
        settings=settings,
        kind=probe_kind,
        intervals_s=intervals_s,
    )


def request_probe(
    *,
    instance: Instance,
    requested_by: str,
    trigger: str = Trigger.MANUAL,
    kind: str = ProbeKindChoice.FULL,
) -> ProbeRun:
    """A pending run of every probe kind (kind "full") or of one; ValueError for an unknown kind."""
    if kind != ProbeKindChoice.FULL:
        parse_kinds([kind])
    return ProbeRun.objects.create(instance=instance, trigger=trigger, requested_by=requested_by, kind=kind)


def _kind_note(probe: InstanceProbe) -> dict:
    """How one kind's probe ended: its first failed request, else its first request."""
    results = [r for r in (probe.readiness, probe.phases, probe.stream, probe.scrape_result, probe.gpus) if r]
    shown = next((r for r in results if r.outcome != "ok"), results[0] if results else None)
    outcome, error = (str(shown.outcome), shown.error[:300]) if shown else ("", "")
    return {"outcome": outcome, "error": error, "elapsed_s": round(probe.elapsed_s, 2)}


def _probe_noting_progress(
    *, run: ProbeRun, instance: Instance, settings: ProbeSettings, kinds: frozenset[ProbeKind]
) -> InstanceProbe:
    """probe_instances for one instance, each kind measured concurrently on its own, and
    each kind's end noted on the run row (result["progress"]) as it comes, for the page
    that polls the run. The loop is stepped from here so the ORM runs between its steps."""
    if _gpu_backend(instance) is None:
        kinds = kinds - {ProbeKind.GPU}
    run.result = {"progress": dict.fromkeys(sorted(kinds))}  # None: still running
    run.save(update_fields=["result"])
    measures = {
        kind: _measure(instances=[instance], settings=settings, kinds=frozenset({kind})) for kind in kinds
    }
    parts, probes = ProbeParts(), []
    with asyncio.Runner() as runner:
        pending = {runner.get_loop().create_task(measure): kind for kind, measure in measures.items()}
        while pending:
            done, _ = runner.run(asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED))
            for task in done:
                (probe,) = task.result()
                run.result["progress"][pending.pop(task)] = _kind_note(probe)
                parts, probes = parts.overlaid(probe.parts, probe.kinds), [*probes, probe]
            run.save(update_fields=["result"])
    return InstanceProbe(
        target=target_for(instance),
        started_at=min((p.started_at for p in probes), default=timezone.now().timestamp()),
        elapsed_s=max((p.elapsed_s for p in probes), default=0.0),
        kinds=frozenset(kinds),
        parts=parts,
        scrape=next((p.scrape for p in probes if p.scrape), None),
    )


def run_requested_probe(*, run_id: int) -> ProbeRun:
    """Carry out a run made by request_probe (the "probe now" button or the CLI)."""
    run = ProbeRun.objects.get(pk=run_id)
    run.status = RunStatus.RUNNING
    run.save(update_fields=["status"])
    settings = ProbeSettings.current()
    # A requested probe runs for a disabled instance too: someone asked for it.
    instance = _with_probe_relations(Instance.objects).get(pk=run.instance_id)
    try:
        kinds = ALL_KINDS if run.kind == ProbeKindChoice.FULL else parse_kinds([run.kind])
        probe = _probe_noting_progress(run=run, instance=instance, settings=settings, kinds=kinds)
        (run,) = record_probes(
            instances=[instance],
            probes=[probe],
            trigger=run.trigger,
            settings=settings,
            runs={instance.pk: run},
            kind=run.kind,
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
