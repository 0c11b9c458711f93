"""A real Celery worker, on the configured broker (Redis in the main run, the filesystem
transport in the embedded run), runs the tasks that beat schedules."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from ops_console.celery import app
from ops_console.models import WorkerHeartbeat
from ops_console.schedules import sync_periodic_tasks
from ops_console.tasks import heartbeat
from tests.conftest import require_service, tcp_reachable


@pytest.fixture
def broker():
    url = settings.CELERY_BROKER_URL
    if url.startswith("redis://"):
        require_service("Redis", tcp_reachable("127.0.0.1", 6379), "start redis-server")
    return url


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.embedded
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_heartbeat_task_from_the_broker(broker):
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=20):
        heartbeat.delay()
        assert wait_for(WorkerHeartbeat.objects.exists), f"no heartbeat via {broker}"
    assert WorkerHeartbeat.objects.get().beat_at is not None


@pytest.mark.embedded
@pytest.mark.django_db
def test_periodic_tasks_are_registered_with_django_celery_beat_and_admin_edits_survive():
    tasks = {t.name: t for t in sync_periodic_tasks()}
    task = tasks["worker heartbeat"]
    assert task.task == "ops_console.heartbeat" and task.interval.every == 60
    assert tasks["probe cycle"].task == "fleet.probe_cycle"
    task.enabled = False
    task.save()
    again = {t.name: t for t in sync_periodic_tasks()}["worker heartbeat"]
    assert again.pk == task.pk and again.enabled is False
