"""Running probes for inventory instances and storing what they found.

The Django edge of `fleet/probes/`: it turns Instance rows into probe targets, runs the
async probes, and writes runs, samples and states. Celery tasks and the `probe` command
call these functions; nothing here knows about Celery.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, DateTimeField, F, Value, When
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


# PostgreSQL's wire protocol counts a statement's parameters in 16 bits.
_POSTGRES_MAX_PARAMS = 65535


def _rows_per_statement(columns: int) -> int:
    """How many rows one multi-row INSERT may carry: SQLite's own variable limit (the
    library's, not Django's cautious 999), PostgreSQL's parameter limit."""
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        limit = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    else:
        limit = connection.features.max_query_params or _POSTGRES_MAX_PARAMS
    return max(limit // columns, 1)


def _insert_rows(head: str, row: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
    """`head VALUES row, row, ... tail` with the rows' values as parameters: one statement
    for as many rows as the database takes in one (a chunk's worth, in practice)."""
    step = _rows_per_statement(row.count("%s"))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), step):
            batch = rows[start : start + step]
            values = ", ".join([row] * len(batch))
            cursor.execute(f"{head} VALUES {values} {tail}", [v for r in batch for v in r])


def _insert_samples(samples: list[tuple[int, str, float]], at: datetime) -> None:
    """Raw samples of one sweep, all stamped `at`, in one INSERT: a sweep stores thousands,
    and building a model instance for each costs more than the insert. On PostgreSQL the
    values go as four arrays (INSERT ... SELECT FROM unnest): for 10,000 samples a third of
    the time of a VALUES list or of executemany, which psycopg 3 sends as one statement a row."""
    if not samples:
        return
    ts = connection.ops.adapt_datetimefield_value(at)
    table = connection.ops.quote_name(MetricSample._meta.db_table)
    head = f"INSERT INTO {table} (instance_id, name, ts, value, resolution)"
    if connection.vendor == "postgresql":
        ids, names, values = (list(column) for column in zip(*samples, strict=True))
        arrays = "unnest(%s::bigint[], %s::text[], %s::float8[]) AS s(instance_id, name, value)"
        with connection.cursor() as cursor:
            cursor.execute(
                f"{head} SELECT instance_id, name, %s, value, 0 FROM {arrays}", [ts, ids, names, values]
            )
        return
    _insert_rows(head, "(%s, %s, %s, %s, 0)", [(i, name, ts, value) for i, name, value in samples])


def _lock(instance_ids: Iterable[int]) -> dict[int, InstanceState]:
    # The stored scrape is only ever replaced, never read here: it stays in the database.
    # In instance order, so sweeps of different kinds take the locks in one order.
    locked = InstanceState.objects.select_for_update().filter(instance_id__in=list(instance_ids))
    return {s.instance_id: s for s in locked.defer("last_scrape").order_by("instance_id")}


def _locked_states(instance_ids: list[int], at: datetime) -> dict[int, InstanceState]:
    """Every instance's state row, locked until the transaction ends. A row is made only
    for an instance that has none yet (its first sweep): made, then locked like the rest."""
    states = _lock(instance_ids)
    missing = sorted(set(instance_ids) - set(states))
    if missing:
        InstanceState.objects.bulk_create(
            [InstanceState(instance_id=i, since=at) for i in missing], ignore_conflicts=True
        )
        states |= _lock(missing)
    return states


# Written back by a sweep, in this order; last_scrape last, as the upsert keeps a stored
# one when the sweep scraped nothing.
_STATE_COLUMNS = [*_STATE_FIELDS, "last_scrape"]


def _state_row(state: InstanceState, run: ProbeRun, scrape: dict | None) -> list[Any]:
    fields = _state_fields()
    row = [state.instance_id]
    for field in fields[:-1]:
        value = run.pk if field.name == "last_run" else getattr(state, field.attname)
        row.append(field.get_db_prep_save(value, connection))
    return [*row, fields[-1].get_db_prep_save(scrape, connection)]


@cache
def _state_fields() -> tuple:
    """The fields of _STATE_COLUMNS, looked up once rather than once a row."""
    return tuple(InstanceState._meta.get_field(name) for name in _STATE_COLUMNS)


def _upsert_states(rows: list[list[Any]]) -> None:
    """The judged states in one INSERT ... ON CONFLICT DO UPDATE (PostgreSQL and SQLite
    alike): every row exists and is locked, so only the update half ever runs. A state the
    sweep did not scrape keeps its stored scrape (COALESCE with the NULL sent for it)."""
    if not rows:
        return
    meta = InstanceState._meta
    table, quote = meta.db_table, connection.ops.quote_name
    columns = ["instance_id", *(meta.get_field(n).column for n in _STATE_COLUMNS)]
    updates = [f"{quote(c)} = excluded.{quote(c)}" for c in columns[1:-1]]
    scrape = quote(meta.get_field("last_scrape").column)
    updates.append(f"{scrape} = COALESCE(excluded.{scrape}, {quote(table)}.{scrape})")
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)})"
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    _insert_rows(head, row, rows, f"ON CONFLICT (instance_id) DO UPDATE SET {', '.join(updates)}")


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
    """Store a sweep's results in one write statement per table, whatever the sweep's size,
    on PostgreSQL (on SQLite Django splits the runs' insert, 83 a statement); the states are
    read in one more, plus two the first time an instance is swept.

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
        _store_runs(recorded)
        _upsert_states(
            [
                _state_row(states[run.instance_id], run, probe.scrape.to_dict() if probe.scrape else None)
                for run, probe in zip(recorded, probes, strict=True)
            ]
        )
        _insert_samples(samples, at)
    return recorded


def _store_runs(runs: list[ProbeRun]) -> None:
    """New runs in one INSERT (Django splits it on SQLite only, at 999 parameters: 83 runs
    a statement, in-process calls); runs made by request_probe in one UPDATE."""
    requested = [r for r in runs if r.pk is not None]
    ProbeRun.objects.bulk_create([r for r in runs if r.pk is None])
    ProbeRun.objects.bulk_update(
        requested, ["status", "finished_at", "verdict", "outcome", "result", "findings", "kind"]
    )


def _with_probe_relations(queryset):
    return queryset.select_related("host", "host__agent").prefetch_related("gpus", "gateways")


def _open_cycle(kind: str, *, chunk_count: int) -> ProbeCycle | None:
    """Open a cycle, or None when one is still running (the database allows one open cycle).
    An open cycle older than STALE_AFTER is closed as abandoned first: a worker died with
    the sweep or one of its chunks, or its chunks expired unprobed."""
    now = timezone.now()
    ProbeCycle.objects.filter(
        kind=kind, finished_at=None, started_at__lt=now - ProbeCycle.STALE_AFTER
    ).update(finished_at=now, note="abandoned: its worker never finished it")
    try:
        with transaction.atomic():
            return ProbeCycle.objects.create(kind=kind, started_at=now, chunk_count=chunk_count)
    except IntegrityError:
        ProbeCycle.objects.create(
            kind=kind,
            started_at=now,
            finished_at=now,
            skipped=True,
            note="skipped: the previous cycle was still running",
        )
        return None


def _monitored(kind: ProbeKind):
    """The enabled instances a sweep of `kind` covers: for gpu, those whose host has telemetry."""
    queryset = Instance.objects.monitored()
    if kind == ProbeKind.GPU:
        queryset = queryset.exclude(host__gpu_telemetry=GpuTelemetry.OFF)
    return queryset


def instances_for(kind: ProbeKind, *, ids: Iterable[int] | None = None) -> list[Instance]:
    """The instances a sweep of `kind` covers (of `ids` when given), loaded for probing."""
    queryset = _monitored(kind)
    if ids is not None:
        queryset = queryset.filter(pk__in=list(ids))
    return list(_with_probe_relations(queryset.order_by("pk")))


@dataclass(frozen=True)
class StartedCycle:
    """An opened cycle and the instance ids of each of its chunks, to be swept."""

    cycle: ProbeCycle
    chunks: list[list[int]]


def start_cycle(
    *, kind: str, chunk_size: int | None = None, intervals_s: dict[str, float] | None = None
) -> StartedCycle | None:
    """Open a scheduled sweep of one probe kind and split its instances into chunks of
    `chunk_size` (one chunk when None); None when skipped because the previous sweep of that
    kind is still running. ValueError for an unknown kind. Each chunk is then handed to
    sweep_chunk, here or on any prober worker; the last to end closes the cycle."""
    (probe_kind,) = parse_kinds([kind])
    ids = list(_monitored(probe_kind).order_by("pk").values_list("pk", flat=True))
    size = chunk_size or max(len(ids), 1)
    chunks = [ids[start : start + size] for start in range(0, len(ids), size)]
    cycle = _open_cycle(probe_kind.value, chunk_count=len(chunks))
    if cycle is None:
        return None
    try:
        if probe_kind == ProbeKind.GPU:
            # The agents read their hosts' GPUs; the chunks judge the readings they sent last.
            interval_s = (DEFAULT_INTERVALS_S | dict(intervals_s or {}))["gpu"]
            request_gpu_readings(interval_s=interval_s)
    except Exception:
        _close(cycle, note="failed: the GPU readings could not be requested")
        raise
    if not chunks:
        _close(cycle)
    return StartedCycle(cycle=cycle, chunks=chunks)


def sweep_chunk(
    *, cycle_id: int, instance_ids: list[int], kind: str, intervals_s: dict[str, float] | None = None
) -> bool:
    """Sweep one chunk of a cycle and count it done (with its instances and failures) on the
    cycle; False when the cycle is already closed (abandoned) and the chunk was dropped: the
    next sweep has fresher work. A chunk that fails still counts, as failed, and re-raises."""
    (probe_kind,) = parse_kinds([kind])
    if not ProbeCycle.objects.filter(pk=cycle_id, finished_at=None).exists():
        return False
    try:
        runs = sweep(
            instances=instances_for(probe_kind, ids=instance_ids), kind=probe_kind, intervals_s=intervals_s
        )
    except Exception:
        _count_chunk(cycle_id, runs=[], failed=True)
        raise
    _count_chunk(cycle_id, runs=runs)
    return True


def _close(cycle: ProbeCycle, *, note: str = "") -> None:
    cycle.finished_at, cycle.note = timezone.now(), note
    cycle.save(update_fields=["finished_at", "note"])


def _count_chunk(cycle_id: int, *, runs: list[ProbeRun], failed: bool = False) -> None:
    """Add one ended chunk to its cycle in one UPDATE, atomic however many chunks end at
    once; the chunk that ends last (the counts are read as they were before this update)
    closes the cycle, once."""
    last = When(chunks_done__gte=F("chunk_count") - 1, then=Value(timezone.now()))
    ProbeCycle.objects.filter(pk=cycle_id, finished_at=None).update(
        chunks_done=F("chunks_done") + 1,
        chunks_failed=F("chunks_failed") + int(failed),
        instance_count=F("instance_count") + len(runs),
        failed_count=F("failed_count") + sum(1 for r in runs if r.verdict in ("down", "failing")),
        finished_at=Case(last, default=None, output_field=DateTimeField()),
    )


def run_cycle(
    *, kind: str = ProbeKind.HEALTH, intervals_s: dict[str, float] | None = None
) -> ProbeCycle | None:
    """One sweep of one probe kind over the monitored instances, here and now, as one chunk
    (the scheduled sweep sends its chunks to the prober workers instead: fleet.tasks); None
    when skipped because the previous sweep of that kind is still running. ValueError for an
    unknown kind. intervals_s: the schedule's seconds between runs of each kind (staleness)."""
    started = start_cycle(kind=kind, intervals_s=intervals_s)
    if started is None:
        return None
    for ids in started.chunks:
        sweep_chunk(cycle_id=started.cycle.pk, instance_ids=ids, kind=kind, intervals_s=intervals_s)
    started.cycle.refresh_from_db()
    return started.cycle


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
