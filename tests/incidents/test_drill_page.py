"""The Drills page: everyone with a role sees the scenarios and past runs; SREs and above
start a run; the progress partial polls until the run is done, then stops with 286."""

from __future__ import annotations

import pytest
from django.urls import reverse

from incidents.models import DrillRun

pytestmark = pytest.mark.django_db


def test_the_page_lists_the_shipped_scenarios_with_their_expectations(viewer_client):
    page = viewer_client.get(reverse("drills:index")).content.decode()
    assert "drill-host-down" in page and "guide-1400-batch-surge-two-ips" in page
    assert "incident process.not_started on node-a-0, node-a-1, node-a-2" in page
    assert "Run</button>" not in page  # a viewer cannot start one


def test_an_sre_starts_a_run_and_lands_on_its_page(client, cast, django_capture_on_commit_callbacks):
    client.force_login(cast.sre)
    assert "Run</button>" in client.get(reverse("drills:index")).content.decode()
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("drills:start"), {"scenario": "drill-host-down.yaml"})
    run = DrillRun.objects.get()
    assert response.status_code == 302 and response.url == reverse("drills:run", args=[run.pk])
    assert (run.status, run.created_by, run.total_s) == ("pending", "sam", 270) and len(queued) == 1


@pytest.mark.parametrize("role", ["viewer", "engineer"])
def test_below_sre_nobody_starts_a_run(client, cast, role):
    client.force_login(cast.for_role(role))
    assert client.post(reverse("drills:start"), {"scenario": "drill-host-down.yaml"}).status_code == 403
    assert not DrillRun.objects.exists()


def test_only_shipped_scenarios_run(sre_client):
    response = sre_client.post(reverse("drills:start"), {"scenario": "../../etc/passwd"})
    assert response.status_code == 400 and not DrillRun.objects.exists()


def test_the_progress_partial_polls_until_the_run_is_done_then_stops_with_286(viewer_client):
    run = DrillRun.objects.create(
        scenario="drill-host-down.yaml", status="running", elapsed_s=90, total_s=270, created_by="sam"
    )
    url = reverse("drills:run", args=[run.pk])
    running = viewer_client.get(url, headers={"HX-Request": "true", "HX-Target": "drill-run"})
    assert running.status_code == 200 and "90 of 270 scenario seconds" in running.content.decode()
    assert 'hx-trigger="every 2s"' in running.content.decode()
    unmet = "incidents: expected 1 incident(s), saw 0 (none)"
    report = {
        "duration_s": 270,
        "time_scale": 15,
        "real_s": 18.2,
        "incidents": [],
        "verdicts": [],
        "errors": [],
    }
    report["expectations"] = [{"expectation": "1 incident(s)", "ok": False, "message": unmet}]
    DrillRun.objects.filter(pk=run.pk).update(status="done", passed=False, report=report)
    done = viewer_client.get(url, headers={"HX-Request": "true", "HX-Target": "drill-run"})
    assert done.status_code == 286
    assert unmet in done.content.decode()
    assert "hx-trigger" not in done.content.decode()
    assert viewer_client.get(url).status_code == 200  # the full page, for a link or a reload
