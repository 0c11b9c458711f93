"""A real Celery worker, on the configured broker (Redis in the main run, the filesystem
transport in the embedded run), runs the tasks that beat schedules."""

import pytest
from django.conf import settings

from ops_console.models import WorkerHeartbeat
from ops_console.schedules import sync_periodic_tasks
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
    assert tasks["probe cycle"].task == "fleet.probe_cycle"
    task.enabled = False
    task.save()
    again = {t.name: t for t in sync_periodic_tasks()}["worker heartbeat"]
    assert again.pk == task.pk and again.enabled is False
