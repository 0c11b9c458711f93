"""A scheduled sweep is sent out in chunks to the probes queue, which any number of prober
workers share; each chunk counts itself on the sweep's cycle and the last one closes it. A
sweep's results are stored in one write statement per table, whatever its size."""

from __future__ import annotations

import math
import shlex
from datetime import timedelta
from pathlib import Path

import pytest
from celery.signals import before_task_publish
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from honcho.environ import parse_procfile

from fleet import probe_service
from fleet.models import InstanceState, MetricSample, ProbeCycle, ProbeRun
from fleet.tasks import probe_chunk, probe_cycle
from ops_console.celery import PROBE_QUEUE, app
from tests.conftest import wait_for
from tests.fleet.probing import simulated_instances

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def published():
    """The tasks sent to the broker during the test: (name, queue, kwargs, expires); the
    queues are emptied afterwards, so no chunk outlives its test."""
    sent: list[tuple[str, str, dict, str | None]] = []

    def note(sender=None, body=None, routing_key=None, headers=None, **_):
        sent.append((sender, routing_key, body[1], headers.get("expires")))

    before_task_publish.connect(note, weak=False)
    yield sent
    before_task_publish.disconnect(note)
    app.control.purge()


def chunks_sent(published) -> list[dict]:
    return [
        kwargs for name, queue, kwargs, _ in published if name == probe_chunk.name and queue == PROBE_QUEUE
    ]


@pytest.mark.parametrize(("instances", "chunk_size"), [(7, 3), (6, 3), (2, 250)])
def test_a_scheduled_sweep_sends_its_instances_in_chunks_to_the_probes_queue(
    quick_settings, settings, published, instances, chunk_size
):
    settings.PROBE_CHUNK_SIZE = chunk_size
    made = simulated_instances(instances)
    probe_cycle(kind="health", intervals_s={"health": 30})
    chunks = chunks_sent(published)
    assert len(chunks) == math.ceil(instances / chunk_size)
    assert [i for c in chunks for i in c["instance_ids"]] == [i.pk for i in made]
    assert all(expires for name, _, _, expires in published if name == probe_chunk.name)  # STALE_AFTER
    cycle = ProbeCycle.objects.get()
    assert (cycle.chunk_count, cycle.chunks_done, cycle.finished_at) == (len(chunks), 0, None)
    assert {(c["cycle_id"], c["kind"], c["intervals_s"]["health"]) for c in chunks} == {
        (cycle.pk, "health", 30)
    }


@pytest.mark.embedded
def test_prober_workers_store_every_chunk_and_the_last_chunk_closes_the_cycle_once(
    simulator, quick_settings, settings, published, celery_worker_thread
):
    settings.PROBE_CHUNK_SIZE = 2
    made = simulated_instances(5)
    simulator()
    probe_cycle.delay(kind="health")
    assert wait_for(lambda: ProbeCycle.objects.filter(finished_at__isnull=False).exists(), 60)
    cycle = ProbeCycle.objects.get()
    assert (cycle.chunk_count, cycle.chunks_done, cycle.chunks_failed) == (3, 3, 0)
    assert (cycle.instance_count, cycle.failed_count, cycle.skipped) == (5, 0, False)
    assert len(chunks_sent(published)) == 3
    runs = ProbeRun.objects.filter(kind="health", status="done", verdict="up")
    assert sorted(runs.values_list("instance_id", flat=True)) == [i.pk for i in made]
    assert InstanceState.objects.filter(verdict="up").count() == 5
    assert cycle.finished_at >= max(runs.values_list("finished_at", flat=True))


def test_the_next_scheduled_sweep_while_chunks_are_still_pending_is_skipped(
    quick_settings, settings, published
):
    settings.PROBE_CHUNK_SIZE = 2
    simulated_instances(3)
    probe_cycle(kind="health")  # two chunks queued; no prober worker has taken them yet
    probe_cycle(kind="health")
    assert len(chunks_sent(published)) == 2  # none for the skipped sweep
    open_cycle, skipped = ProbeCycle.objects.order_by("id")
    assert open_cycle.finished_at is None and open_cycle.chunks_done == 0
    assert skipped.skipped and "still running" in skipped.note


def test_a_chunk_that_fails_counts_as_failed_and_the_last_chunk_still_closes_the_cycle(quick_settings):
    first, second = simulated_instances(2)  # nothing listens: each probe fails on its own
    started = probe_service.start_cycle(kind="health", chunk_size=1)
    with pytest.raises(TypeError):  # its message carried an interval the store cannot read
        probe_service.sweep_chunk(
            cycle_id=started.cycle.pk, instance_ids=[first.pk], kind="health", intervals_s={"health": "x"}
        )
    cycle = ProbeCycle.objects.get()
    assert (cycle.chunks_done, cycle.chunks_failed, cycle.finished_at) == (1, 1, None)
    probe_service.sweep_chunk(cycle_id=cycle.pk, instance_ids=[second.pk], kind="health")
    cycle.refresh_from_db()
    assert (cycle.chunks_done, cycle.chunks_failed, cycle.instance_count) == (2, 1, 1)
    assert cycle.finished_at is not None and cycle.failed_count == 1  # refused: failing at once


def test_a_cycle_left_open_by_a_chunk_that_died_is_abandoned_after_stale_after(quick_settings):
    """A worker killed mid-chunk never counts its chunk: the cycle stays open, and sweeps
    of its kind are skipped, until it is STALE_AFTER old; the next sweep then closes it as
    abandoned and runs."""
    (instance,) = simulated_instances(1)
    died = probe_service.start_cycle(kind="health", chunk_size=1)  # its one chunk never ends
    assert probe_service.start_cycle(kind="health", chunk_size=1) is None
    ProbeCycle.objects.filter(pk=died.cycle.pk).update(
        started_at=timezone.now() - ProbeCycle.STALE_AFTER - timedelta(seconds=1)
    )
    assert probe_service.start_cycle(kind="health", chunk_size=1) is not None
    died.cycle.refresh_from_db()
    assert died.cycle.finished_at is not None and died.cycle.note.startswith("abandoned")
    # The dead chunk, delivered again later, is dropped: its cycle is closed.
    assert not probe_service.sweep_chunk(cycle_id=died.cycle.pk, instance_ids=[instance.pk], kind="health")
    assert not ProbeRun.objects.exists()


def test_an_empty_fleet_s_sweep_sends_nothing_and_closes_at_once(quick_settings, published):
    probe_cycle(kind="health")
    assert chunks_sent(published) == []
    cycle = ProbeCycle.objects.get()
    assert (cycle.chunk_count, cycle.instance_count) == (0, 0) and cycle.finished_at is not None


@pytest.mark.embedded
def test_make_run_s_worker_takes_the_probe_chunks_besides_the_central_work():
    procfile = Path(__file__).resolve().parents[2] / "Procfile"
    command = shlex.split(parse_procfile(procfile.read_text()).processes["worker"])
    assert set(command[command.index("--queues") + 1].split(",")) == {"console", PROBE_QUEUE}


def _queries_to_store(instances, settings) -> tuple[int, int]:
    """The queries record_probes makes for a metrics sweep of `instances`: the first time
    (their states are made) and the next."""
    loaded = probe_service.instances_for("metrics", ids=[i.pk for i in instances])
    counts = []
    for _ in range(2):
        probes = probe_service.probe_instances(instances=loaded, settings=settings, kinds={"metrics"})
        with CaptureQueriesContext(connection) as queries:
            probe_service.record_probes(
                instances=loaded, probes=probes, trigger="schedule", settings=settings, kind="metrics"
            )
        counts.append(sum(1 for q in queries if q["sql"].split()[0] not in ("BEGIN", "COMMIT")))
    return counts[0], counts[1]


def test_storing_a_sweep_takes_as_many_queries_for_50_instances_as_for_5(simulator, quick_settings):
    instances = simulated_instances(55)
    simulator()
    few, many = (
        _queries_to_store(instances[:5], quick_settings),
        _queries_to_store(instances[5:], quick_settings),
    )
    assert few == many
    # A steady sweep: the states read and locked, then one write each for runs, states, samples.
    assert many == (6, 4)
    assert MetricSample.objects.filter(instance__in=instances[5:]).values("instance").distinct().count() == 50
    assert InstanceState.objects.exclude(last_scrape=None).count() == 55
