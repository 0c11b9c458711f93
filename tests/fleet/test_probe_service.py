"""Probe sweeps over real sockets against the simulator: each probe kind on its own, the
instance judged on the latest result of every kind, runs, samples and states stored."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from fleet import probe_service
from fleet.models import Instance, InstanceState, MetricSample, ProbeCycle, ProbeRun
from tests.factories import make_host, make_instance
from tests.fleet.probing import simulated_instances

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_KIND = ("health", "stream", "metrics", "gpu")


def sweep_all() -> None:
    for kind in EVERY_KIND:
        probe_service.run_cycle(kind=kind)


def sample_names(instance) -> set[str]:
    return set(MetricSample.objects.filter(instance=instance).values_list("name", flat=True))


def test_a_health_sweep_probes_every_enabled_instance_and_stores_what_it_found(simulator, quick_settings):
    first, second = simulated_instances(2)
    Instance.objects.filter(pk=second.pk).update(enabled=False)
    simulator()
    cycle = probe_service.run_cycle(kind="health")
    assert (cycle.kind, cycle.instance_count) == ("health", 1) and cycle.finished_at is not None
    assert (cycle.chunk_count, cycle.chunks_done) == (1, 1)  # here and now, in one chunk
    run = ProbeRun.objects.get()
    assert (run.instance, run.kind, run.verdict, run.status) == (first, "health", "up", "done")
    assert run.result["phases"]["ttfb_s"] > 0 and run.result["readiness"]["model_found"] is True
    assert run.result["stream"] is None and run.result["scrape"] is None  # not this kind's work
    state = InstanceState.objects.get(instance=first)
    assert state.verdict == "up" and set(state.kinds) == {"health"}
    assert sample_names(first) == {"probe_connect_s", "probe_ttfb_s", "probe_total_s"}
    ttfb = MetricSample.objects.get(instance=first, name="probe_ttfb_s")
    assert (ttfb.ts, ttfb.resolution, ttfb.value) == (run.started_at, 0, run.result["phases"]["ttfb_s"])
    assert not InstanceState.objects.filter(instance=second).exists()


def test_each_kind_adds_its_own_results_and_samples(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    simulator()
    sweep_all()
    state = InstanceState.objects.get(instance=instance)
    assert set(state.kinds) == set(EVERY_KIND) and state.verdict == "up" and state.last_scrape
    assert list(ProbeRun.objects.order_by("id").values_list("kind", flat=True)) == list(EVERY_KIND)
    expected = {"probe_ttfb_s", "stream_ttft_s", "kv_cache_usage", "gpu_memory_used_pct"}
    assert expected <= sample_names(instance)


def test_the_second_metrics_sweep_turns_counters_into_rates(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    simulator()
    probe_service.run_cycle(kind="metrics")
    probe_service.run_cycle(kind="stream")  # a request served between the scrapes
    probe_service.run_cycle(kind="metrics")
    assert {"generation_tokens_per_s", "ttft_p95_s"} <= sample_names(instance)


def test_a_sweep_of_one_kind_keeps_what_the_other_kinds_found(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    sim = simulator()
    sim.inject(instance.name, {"kind": "malformed_metrics"})
    probe_service.run_cycle(kind="metrics")
    probe_service.run_cycle(kind="health")  # its own routes are fine
    state = InstanceState.objects.get(instance=instance)
    assert [f["code"] for f in state.findings] == ["metrics.unavailable"]
    assert ProbeRun.objects.get(kind="health").findings == state.findings


@pytest.mark.parametrize(
    ("age", "verdict"),
    [(timedelta(seconds=20), "degraded"), (timedelta(hours=1), "up")],
    ids=["recent metrics count", "metrics an hour old do not"],
)
def test_a_kind_whose_latest_result_is_stale_no_longer_counts(simulator, quick_settings, age, verdict):
    (instance,) = simulated_instances(1)
    simulator()
    backlog = {"scrape_result": {"outcome": "ok"}, "derived": {"num_requests_waiting": 50.0}}
    measured = (timezone.now() - age).isoformat()
    InstanceState.objects.create(instance=instance, kinds={"metrics": {"at": measured, "result": backlog}})
    probe_service.run_cycle(kind="health")
    state = InstanceState.objects.get(instance=instance)
    assert state.verdict == verdict
    assert ("queue.backlog" in [f["code"] for f in state.findings]) == (verdict == "degraded")


def test_an_instance_is_failing_at_once_and_down_after_n_failed_health_runs(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    sim = simulator()
    sweep_all()
    sim.inject(instance.name, {"kind": "refuse_connections"})
    sim.wait_listening(instance.name, listening=False)
    probe_service.run_cycle(kind="health")
    state = InstanceState.objects.get(instance=instance)
    assert (state.verdict, state.consecutive_failures, state.failures) == ("failing", 1, {"health": 1})
    assert state.findings[0]["category"] == "process.not_started"
    probe_service.run_cycle(kind="metrics")  # judged with the failed health run; not a health run
    state.refresh_from_db()
    assert (state.verdict, state.failures) == ("failing", {"health": 1})
    probe_service.run_cycle(kind="health")
    state.refresh_from_db()
    assert (state.verdict, state.consecutive_failures) == ("down", 2)
    assert "refused" in state.reason.lower()


def test_the_gpu_sweep_covers_only_instances_whose_host_has_telemetry(simulator, quick_settings):
    (simulated,) = simulated_instances(1)
    dark = make_instance(make_host(name="no-telemetry", gpu_telemetry="off"), name="dark")
    simulator()
    cycle = probe_service.run_cycle(kind="gpu")
    assert cycle.instance_count == 1
    assert list(ProbeRun.objects.values_list("instance", flat=True)) == [simulated.pk]
    assert not InstanceState.objects.filter(instance=dark).exists()


def test_a_sweep_that_would_overlap_a_running_one_of_its_kind_is_skipped_not_stacked(quick_settings):
    ProbeCycle.objects.create(kind="health")
    assert probe_service.run_cycle(kind="health") is None
    assert ProbeCycle.objects.filter(kind="health", skipped=True).count() == 1
    assert probe_service.run_cycle(kind="metrics") is not None  # other kinds go on
    assert not ProbeRun.objects.exists()


def test_an_open_cycle_whose_worker_died_is_abandoned_and_the_next_one_runs(quick_settings):
    stale = ProbeCycle.objects.create(kind="health", started_at=timezone.now() - ProbeCycle.STALE_AFTER * 2)
    assert probe_service.run_cycle(kind="health") is not None
    stale.refresh_from_db()
    assert stale.finished_at is not None and "abandoned" in stale.note


def test_an_unknown_kind_is_refused_by_name(quick_settings):
    with pytest.raises(ValueError, match="unknown probe kind 'latency'"):
        probe_service.run_cycle(kind="latency")
    assert not ProbeCycle.objects.exists()


def test_probe_now_runs_every_kind_in_one_requested_run(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    simulator()
    run = probe_service.request_probe(instance=instance, requested_by="erin")
    assert run.status == "pending"
    run = probe_service.run_requested_probe(run_id=run.pk)
    assert (run.status, run.verdict, run.kind, run.requested_by) == ("done", "up", "full", "erin")
    assert run.result["kinds"] == sorted(EVERY_KIND)
    assert set(InstanceState.objects.get(instance=instance).kinds) == set(EVERY_KIND)


def test_a_stored_scrape_that_no_longer_reads_is_dropped_not_fatal(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    simulator()
    InstanceState.objects.create(instance=instance, last_scrape={"not": "a scrape"}, kinds={"gpu": "junk"})
    cycle = probe_service.run_cycle(kind="metrics")
    assert cycle.instance_count == 1
    assert InstanceState.objects.get(instance=instance).verdict == "up"


@pytest.mark.skipif(
    connection.vendor == "sqlite",
    reason="the in-memory SQLite test database locks whole tables between threads",
)
def test_sweeps_of_two_kinds_that_end_together_keep_each_other_s_results(simulator, quick_settings):
    """The health sweep stores while the metrics sweep is still storing: the second waits
    for the first (the states are locked) instead of writing back what it read before."""
    (instance,) = simulated_instances(1)
    simulator()
    sweep_all()
    settings, instances = probe_service.ProbeSettings.current(), probe_service.instances_for("health")
    health = probe_service.probe_instances(instances=instances, settings=settings, kinds={"health"})
    metrics = probe_service.probe_instances(instances=instances, settings=settings, kinds={"metrics"})
    health_stored, release = threading.Event(), threading.Event()

    def store_health_and_hold_the_transaction_open():
        try:
            with transaction.atomic():
                probe_service.record_probes(
                    instances=instances, probes=health, trigger="schedule", settings=settings, kind="health"
                )
                health_stored.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=store_health_and_hold_the_transaction_open)
    holder.start()
    assert health_stored.wait(10)
    threading.Timer(0.5, release.set).start()
    probe_service.record_probes(
        instances=instances, probes=metrics, trigger="schedule", settings=settings, kind="metrics"
    )
    holder.join(10)
    runs = {r.kind: r for r in ProbeRun.objects.filter(kind__in=["health", "metrics"]).order_by("id")}
    state = InstanceState.objects.get(instance=instance)
    assert state.measured_at("health") == runs["health"].started_at
    assert state.measured_at("metrics") == runs["metrics"].started_at
