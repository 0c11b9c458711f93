"""The instance page refreshes itself: the state block polls, "probe now" shows each probe
kind as it finishes and then the result, and a run that never ends stops at its limit."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from fleet import probe_service
from fleet.models import ProbeRun
from fleet.views.probing import run_time_limit_s
from tests.conftest import HTMX_HEADERS, wait_for
from tests.fleet.probing import simulated_instances


def state_partial(client, instance) -> str:
    response = client.get(reverse("fleet:instance-state", args=[instance.pk]), **HTMX_HEADERS)
    assert response.status_code == 200
    return response.content.decode()


def run_partial(client, run):
    return client.get(reverse("fleet:run-status", args=[run.pk]), **HTMX_HEADERS)


@pytest.mark.django_db
def test_the_page_loads_the_live_state_block_which_then_polls_at_the_overview_interval(
    viewer_client, settings
):
    settings.OVERVIEW_POLL_S = 7
    (instance,) = simulated_instances(1)
    page = viewer_client.get(instance.get_absolute_url()).content.decode()
    assert 'id="instance-state"' in page and 'hx-trigger="load, instance-probed from:body"' in page
    assert 'id="probe-run" hx-preserve="true"' in page
    assert 'hx-trigger="every 7s, instance-probed from:body"' in state_partial(viewer_client, instance)


@pytest.mark.django_db
def test_the_polled_state_block_shows_what_the_latest_probe_found(viewer_client, simulator, quick_settings):
    (instance,) = simulated_instances(1)
    sim = simulator()
    probe_service.run_cycle(kind="health")
    assert 'data-verdict="up"' in state_partial(viewer_client, instance)

    sim.inject(instance.name, {"kind": "refuse_connections"})
    sim.wait_listening(instance.name, listening=False)
    probe_service.run_cycle(kind="health")
    fresh = state_partial(viewer_client, instance)
    assert 'data-verdict="failing"' in fresh and "1 failed run in a row" in fresh
    assert "Connection refused" in fresh


def probe_in_background(run: ProbeRun) -> threading.Thread:
    """What the worker does with a requested run, on a thread of its own."""

    def work():
        try:
            probe_service.run_requested_probe(run_id=run.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_probe_now_shows_each_kind_as_it_finishes_and_then_the_result_in_place(
    client, cast, simulator, quick_settings
):
    quick_settings.read_timeout_s, quick_settings.total_deadline_s = 6.0, 8.0
    quick_settings.save()
    (instance,) = simulated_instances(1)
    sim = simulator()
    sim.inject(instance.name, {"kind": "slow_headers", "delay_s": 2.5})  # not the GPU reading
    client.force_login(cast.engineer)
    client.post(reverse("fleet:instance-probe", args=[instance.pk]), **HTMX_HEADERS)
    run = ProbeRun.objects.get()
    thread = probe_in_background(run)
    partway = []

    def gpu_done_health_running() -> bool:
        content = run_partial(client, run).content.decode()
        done = (
            'data-kind="gpu" data-state="ok"' in content
            and 'data-kind="health" data-state="running"' in content
        )
        partway.append(content) if done else None
        return done

    assert wait_for(gpu_done_health_running, 10)
    assert "Probing" in partway[-1] and "spinner" in partway[-1]
    thread.join(30)
    final = run_partial(client, run)
    content = final.content.decode()
    assert final.status_code == 286 and final["HX-Trigger"] == "instance-probed"
    for kind in ("health", "stream", "metrics", "gpu"):
        assert f'data-kind="{kind}" data-state="ok"' in content
    assert 'data-status="done"' in content and "the state above shows the result" in content
    assert "reload" not in content
    assert 'data-verdict="up"' in state_partial(client, instance)


@pytest.mark.django_db(transaction=True)
def test_a_hanging_target_ends_with_each_kinds_timeout_not_a_spinner(client, cast, simulator, quick_settings):
    (instance,) = simulated_instances(1)
    sim = simulator()
    sim.inject(instance.name, {"kind": "hang"})
    run = probe_service.request_probe(instance=instance, requested_by="erin", kind="health")
    client.force_login(cast.viewer)
    probe_in_background(run).join(30)
    final = run_partial(client, run)
    content = final.content.decode()
    assert final.status_code == 286 and "spinner" not in content
    assert 'data-kind="health" data-state="failed"' in content
    assert "timed out waiting for the answer" in content and "ReadTimeout" in content


@pytest.mark.django_db
def test_a_run_that_outlives_its_time_limit_stops_polling_and_says_so(viewer_client, quick_settings):
    (instance,) = simulated_instances(1)
    limit = run_time_limit_s(quick_settings)
    started = timezone.now() - timedelta(seconds=limit + 5)
    run = ProbeRun.objects.create(
        instance=instance, status="running", started_at=started, result={"progress": {"health": None}}
    )
    response = run_partial(viewer_client, run)
    content = response.content.decode()
    assert response.status_code == 286 and "hx-get" not in content and "spinner" not in content
    assert f"did not finish within its time limit of {limit} s" in content
    assert 'data-kind="health" data-state="abandoned"' in content
    run.status = "pending"
    run.save()
    assert "No probe worker took the run up" in run_partial(viewer_client, run).content.decode()


@pytest.mark.django_db
def test_a_running_probe_shows_its_time_limit_while_it_polls(viewer_client, quick_settings):
    (instance,) = simulated_instances(1)
    run = ProbeRun.objects.create(instance=instance, status="running")
    response = run_partial(viewer_client, run)
    content = response.content.decode()
    assert response.status_code == 200 and reverse("fleet:run-status", args=[run.pk]) in content
    assert f"of at most {run_time_limit_s(quick_settings)} s" in content
