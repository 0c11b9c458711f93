"""A real Celery worker on the configured broker runs the scheduled probe cycle."""

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from fleet.models import InstanceState, ProbeRun
from fleet.tasks import probe_cycle, probe_instance
from ops_console.celery import app
from tests.conftest import require_service, tcp_reachable
from tests.fleet.probing import simulated_instances
from tests.ops_console.test_worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker():
    if settings.CELERY_BROKER_URL.startswith("redis://"):
        require_service("Redis", tcp_reachable("127.0.0.1", 6379), "start redis-server")
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30) as started:
        yield started


@pytest.mark.embedded
def test_a_worker_runs_the_scheduled_probe_cycle_and_stores_results(simulator, quick_settings, worker):
    (instance,) = simulated_instances(1)
    simulator()
    probe_cycle.delay()  # what beat sends every 30 s
    assert wait_for(lambda: InstanceState.objects.filter(instance=instance, verdict="up").exists(), 40)
    assert ProbeRun.objects.filter(instance=instance, trigger="schedule", status="done").exists()


def test_a_worker_carries_out_a_probe_now_request(simulator, quick_settings, worker):
    from fleet.probe_service import request_probe

    (instance,) = simulated_instances(1)
    simulator()
    run = request_probe(instance=instance, requested_by="erin")
    probe_instance.delay(run_id=run.pk)
    assert wait_for(lambda: ProbeRun.objects.get(pk=run.pk).status == "done", 40)
