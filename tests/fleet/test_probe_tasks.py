"""A real Celery worker on the configured broker runs the scheduled probe sweeps."""

import json

import pytest

from fleet.models import InstanceState, ProbeRun
from fleet.tasks import probe_cycle, probe_instance
from ops_console.schedules import sync_periodic_tasks
from tests.conftest import wait_for
from tests.fleet.probing import simulated_instances

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.embedded
def test_a_worker_runs_each_scheduled_probe_kind_and_stores_results(
    simulator, quick_settings, celery_worker_thread
):
    (instance,) = simulated_instances(1)
    simulator()
    for entry in sync_periodic_tasks():  # what beat sends, each kind at its own interval
        if entry.task == "fleet.probe_cycle":
            probe_cycle.apply_async(kwargs=json.loads(entry.kwargs))

    def every_kind_stored() -> bool:
        state = InstanceState.objects.filter(instance=instance, verdict="up").first()
        return state is not None and set(state.kinds) == {"health", "stream", "metrics", "gpu"}

    assert wait_for(every_kind_stored, 40)
    runs = ProbeRun.objects.filter(instance=instance, trigger="schedule", status="done")
    assert sorted(runs.values_list("kind", flat=True)) == ["gpu", "health", "metrics", "stream"]


def test_a_worker_carries_out_a_probe_now_request(simulator, quick_settings, celery_worker_thread):
    from fleet.probe_service import request_probe

    (instance,) = simulated_instances(1)
    simulator()
    run = request_probe(instance=instance, requested_by="erin")
    probe_instance.delay(run_id=run.pk)
    assert wait_for(lambda: ProbeRun.objects.get(pk=run.pk).status == "done", 40)
