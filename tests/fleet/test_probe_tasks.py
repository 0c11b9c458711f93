"""A real Celery worker on the configured broker runs the scheduled probe cycle."""

import pytest

from fleet.models import InstanceState, ProbeRun
from fleet.tasks import probe_cycle, probe_instance
from tests.conftest import wait_for
from tests.fleet.probing import simulated_instances

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.embedded
def test_a_worker_runs_the_scheduled_probe_cycle_and_stores_results(
    simulator, quick_settings, celery_worker_thread
):
    (instance,) = simulated_instances(1)
    simulator()
    probe_cycle.delay()  # what beat sends every 30 s
    assert wait_for(lambda: InstanceState.objects.filter(instance=instance, verdict="up").exists(), 40)
    assert ProbeRun.objects.filter(instance=instance, trigger="schedule", status="done").exists()


def test_a_worker_carries_out_a_probe_now_request(simulator, quick_settings, celery_worker_thread):
    from fleet.probe_service import request_probe

    (instance,) = simulated_instances(1)
    simulator()
    run = request_probe(instance=instance, requested_by="erin")
    probe_instance.delay(run_id=run.pk)
    assert wait_for(lambda: ProbeRun.objects.get(pk=run.pk).status == "done", 40)
