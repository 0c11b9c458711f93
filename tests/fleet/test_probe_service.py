"""Probe cycles over real sockets against the simulator: runs, samples and states stored."""

import pytest

from fleet import probe_service
from fleet.models import Instance, InstanceState, MetricSample, ProbeCycle, ProbeRun
from tests.fleet.probing import simulated_instances

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_cycle_probes_every_enabled_instance_and_stores_what_it_found(simulator, quick_settings):
    first, second = simulated_instances(2)
    Instance.objects.filter(pk=second.pk).update(enabled=False)
    simulator()
    cycle = probe_service.run_cycle()
    assert cycle.instance_count == 1 and cycle.finished_at is not None
    run = ProbeRun.objects.get()
    assert run.instance == first and run.verdict == "up" and run.status == "done"
    assert run.result["phases"]["ttfb_s"] > 0 and run.result["stream"]["ttft_s"] > 0
    state = InstanceState.objects.get(instance=first)
    assert state.verdict == "up" and state.last_scrape
    names = set(MetricSample.objects.filter(instance=first).values_list("name", flat=True))
    assert {"kv_cache_usage", "num_requests_running", "probe_ttfb_s", "gpu_memory_used_pct"} <= names
    assert not InstanceState.objects.filter(instance=second).exists()


def test_the_second_cycle_turns_counters_into_rates(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    simulator()
    probe_service.run_cycle()
    probe_service.run_cycle()
    names = set(MetricSample.objects.filter(instance=instance).values_list("name", flat=True))
    assert {"generation_tokens_per_s", "ttft_p95_s"} <= names


def test_an_instance_turns_down_only_after_n_failed_cycles_in_a_row(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    sim = simulator()
    probe_service.run_cycle()
    sim.inject(instance.name, {"kind": "refuse_connections"})
    sim.wait_listening(instance.name, listening=False)
    probe_service.run_cycle()
    state = InstanceState.objects.get(instance=instance)
    assert (state.verdict, state.consecutive_failures) == ("up", 1)
    probe_service.run_cycle()
    state.refresh_from_db()
    assert (state.verdict, state.consecutive_failures) == ("down", 2)
    assert "refused" in state.reason.lower()


def test_a_cycle_that_would_overlap_a_running_one_is_skipped_not_stacked(quick_settings):
    ProbeCycle.objects.create(kind="instances")
    assert probe_service.run_cycle() is None
    assert ProbeCycle.objects.filter(skipped=True).count() == 1
    assert not ProbeRun.objects.exists()


def test_an_open_cycle_whose_worker_died_is_abandoned_and_the_next_one_runs(quick_settings):
    from django.utils import timezone

    stale = ProbeCycle.objects.create(
        kind="instances", started_at=timezone.now() - ProbeCycle.STALE_AFTER * 2
    )
    assert probe_service.run_cycle() is not None
    stale.refresh_from_db()
    assert stale.finished_at is not None and "abandoned" in stale.note


def test_probe_now_runs_one_requested_probe_to_the_end(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    simulator()
    run = probe_service.request_probe(instance=instance, requested_by="erin")
    assert run.status == "pending"
    run = probe_service.run_requested_probe(run_id=run.pk)
    assert run.status == "done" and run.verdict == "up" and run.requested_by == "erin"


def test_a_stored_scrape_that_no_longer_reads_is_dropped_not_fatal(simulator, quick_settings):
    (instance,) = simulated_instances(1)
    simulator()
    InstanceState.objects.create(instance=instance, last_scrape={"not": "a scrape"})
    cycle = probe_service.run_cycle()
    assert cycle.instance_count == 1
    assert InstanceState.objects.get(instance=instance).verdict == "up"
