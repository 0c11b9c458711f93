"""A real Celery worker, on the configured broker (Redis in the main run, the filesystem
transport in the embedded run), runs the tasks that beat schedules."""

import json

import pytest
from django.conf import settings
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from ops_console.models import WorkerHeartbeat
from ops_console.schedules import probe_intervals, sync_periodic_tasks
from ops_console.tasks import heartbeat
from tests.conftest import wait_for


@pytest.mark.embedded
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_heartbeat_task_from_the_broker(celery_worker_thread):
    heartbeat.delay()
    assert wait_for(WorkerHeartbeat.objects.exists), f"no heartbeat via {settings.CELERY_BROKER_URL}"
    assert WorkerHeartbeat.objects.get().beat_at is not None


@pytest.mark.embedded
@pytest.mark.django_db
def test_periodic_tasks_are_registered_with_django_celery_beat_and_admin_edits_survive():
    tasks = {t.name: t for t in sync_periodic_tasks()}
    task = tasks["worker heartbeat"]
    assert task.task == "ops_console.heartbeat" and task.interval.every == 60
    task.enabled = False
    task.save()
    again = {t.name: t for t in sync_periodic_tasks()}["worker heartbeat"]
    assert again.pk == task.pk and again.enabled is False


@pytest.mark.embedded
@pytest.mark.django_db
def test_each_probe_kind_has_its_own_beat_entry_and_interval():
    tasks = {t.name: t for t in sync_periodic_tasks()}
    kinds = {
        name: (t.task, json.loads(t.kwargs)["kind"], t.interval.every)
        for name, t in tasks.items()
        if name.startswith("probe ")
    }
    assert kinds == {
        "probe health": ("fleet.probe_cycle", "health", 30),
        "probe stream": ("fleet.probe_cycle", "stream", 60),
        "probe metrics": ("fleet.probe_cycle", "metrics", 30),
        "probe gpu": ("fleet.probe_cycle", "gpu", 30),
    }
    assert probe_intervals() == {"health": 30, "stream": 60, "metrics": 30, "gpu": 30}


@pytest.mark.django_db
def test_an_interval_edited_in_the_admin_is_the_one_the_probes_use():
    stream = {t.name: t for t in sync_periodic_tasks()}["probe stream"]
    stream.interval = IntervalSchedule.objects.create(every=5, period=IntervalSchedule.MINUTES)
    stream.save()
    sync_periodic_tasks()  # a later sync (make run, deploys) keeps the edit
    assert probe_intervals()["stream"] == 300


@pytest.mark.django_db
def test_the_single_probe_cycle_entry_of_earlier_versions_is_retired():
    every = IntervalSchedule.objects.create(every=30, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="probe cycle", task="fleet.probe_cycle", interval=every)
    sync_periodic_tasks()
    assert not PeriodicTask.objects.filter(name="probe cycle").exists()


@pytest.mark.django_db
def test_the_probe_entries_hand_every_kind_s_interval_to_the_probes_and_follow_edits():
    stream = {t.name: t for t in sync_periodic_tasks()}["probe stream"]
    assert json.loads(stream.kwargs)["intervals_s"] == {"health": 30, "stream": 60, "metrics": 30, "gpu": 30}
    stream.interval = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.MINUTES)
    stream.save()
    health = {t.name: t for t in sync_periodic_tasks()}["probe health"]
    assert json.loads(health.kwargs)["intervals_s"]["stream"] == 120


@pytest.mark.django_db
def test_beat_evaluates_the_alert_rules_on_its_own_schedule():
    entry = {t.name: t for t in sync_periodic_tasks()}["evaluate alerts"]
    assert (entry.task, entry.interval.every) == ("incidents.evaluate_alerts", 15)
