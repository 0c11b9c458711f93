"""The fleet overview tiles, the instance page's state, probe now with progress, and charts."""

import pytest
from django.urls import reverse
from django.utils import timezone

from fleet.models import InstanceState, MetricSample, ProbeRun
from tests.conftest import HTMX_HEADERS
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db


def with_state(instance, verdict, evidence=""):
    findings = [{"code": "x", "category": "timeout.ttft", "severity": "degraded", "evidence": evidence}]
    InstanceState.objects.create(
        instance=instance,
        verdict=verdict,
        last_probe_at=timezone.now(),
        findings=findings if evidence else [],
    )
    return instance


def test_the_overview_shows_a_tile_per_problem_grouped_by_host_with_the_reason(viewer_client):
    host = make_host(name="rack-a")
    with_state(make_instance(host, name="fast-one"), "up")
    with_state(make_instance(host, name="slow-one"), "degraded", "TTFB 7.2 s > 5 s, so TTFT")
    content = viewer_client.get(reverse("fleet:overview")).content.decode()
    assert "rack-a" in content and 'data-instance="slow-one"' in content
    assert "TTFB 7.2 s &gt; 5 s, so TTFT" in content
    assert 'data-instance="fast-one"' not in content and "1 more, up" in content  # the quiet one: counted
    assert 'hx-trigger="every 10s"' in content


def test_the_overview_filters_by_state_and_polls_only_the_tiles(viewer_client):
    host = make_host()
    with_state(make_instance(host, name="fine"), "up")
    with_state(make_instance(host, name="broken"), "down", "connection refused")
    response = viewer_client.get(
        reverse("fleet:overview"), {"state": "down"}, HTTP_HX_TARGET="tiles", **HTMX_HEADERS
    )
    content = response.content.decode()
    assert "<html" not in content and "broken" in content and "fine" not in content


def test_the_overview_of_an_empty_fleet_says_how_to_start(viewer_client):
    assert "No inference instances yet" in viewer_client.get(reverse("fleet:overview")).content.decode()


def test_the_instance_page_shows_the_state_and_its_evidence(viewer_client):
    instance = with_state(make_instance(make_host()), "degraded", "waiting 14 > 10: queue backlog")
    content = viewer_client.get(instance.get_absolute_url()).content.decode()
    assert "waiting 14 &gt; 10: queue backlog" in content
    assert "Probe now" not in content  # viewers read; the button is for engineers


def test_probe_now_queues_a_run_and_answers_with_a_polling_progress_partial(client, cast):
    client.force_login(cast.engineer)
    instance = make_instance(make_host())
    response = client.post(reverse("fleet:instance-probe", args=[instance.pk]), **HTMX_HEADERS)
    run = ProbeRun.objects.get()
    assert response.status_code == 202 and run.requested_by == cast.engineer.username
    assert reverse("fleet:run-status", args=[run.pk]) in response.content.decode()
    assert "spinner" in response.content.decode()


def test_viewers_cannot_probe_now(viewer_client):
    instance = make_instance(make_host())
    assert viewer_client.post(reverse("fleet:instance-probe", args=[instance.pk])).status_code == 403


def test_the_progress_partial_stops_polling_with_286_once_the_run_is_done(viewer_client):
    run = ProbeRun.objects.create(instance=make_instance(make_host()), status="running")
    assert viewer_client.get(reverse("fleet:run-status", args=[run.pk])).status_code == 200
    run.status, run.verdict, run.finished_at = "done", "up", timezone.now()
    run.save()
    assert viewer_client.get(reverse("fleet:run-status", args=[run.pk])).status_code == 286


def test_the_charts_partial_draws_the_stored_samples_for_the_chosen_range(viewer_client):
    instance = make_instance(make_host())
    now = timezone.now()
    MetricSample.objects.bulk_create(
        [
            MetricSample(
                instance=instance, name="ttft_p95_s", ts=now - timezone.timedelta(minutes=m), value=0.2 + m
            )
            for m in range(5)
        ]
    )
    content = viewer_client.get(
        reverse("fleet:instance-charts", args=[instance.pk]), {"range": "1h"}
    ).content.decode()
    assert "Time to first token" in content and "panel-0-figure" in content
    empty = viewer_client.get(reverse("fleet:instance-charts", args=[make_instance(make_host()).pk])).content
    assert b"No samples in the last 1h" in empty


def test_failed_cycles_that_have_not_yet_turned_an_instance_down_are_shown_amber(viewer_client):
    host = make_host()
    new = make_instance(host, name="never-up")
    InstanceState.objects.create(instance=new, verdict="failing", consecutive_failures=2,
                                 last_probe_at=timezone.now())  # fmt: skip
    content = viewer_client.get(reverse("fleet:overview")).content.decode()
    assert "failing 2× in a row" in content
    assert 'class="tile verdict-failing"' in content and 'data-state="failing"' in content


def test_the_instance_page_says_when_each_kind_was_last_measured_and_draws_the_health_phases(viewer_client):
    instance = make_instance(make_host())
    now = timezone.now()
    phases = {"dns_s": 0.0, "connect_s": 0.002, "ttfb_s": 0.8, "total_s": 0.81}
    InstanceState.objects.create(
        instance=instance,
        verdict="up",
        last_probe_at=now,
        kinds={
            "health": {
                "at": (now - timezone.timedelta(seconds=40)).isoformat(),
                "result": {"phases": phases},
            },
            "metrics": {"at": (now - timezone.timedelta(minutes=3)).isoformat(), "result": {}},
        },
    )
    page = viewer_client.get(instance.get_absolute_url()).content.decode()
    assert "health and latency phases" in page and "engine metrics 3" in page and "streaming" not in page
    charts = viewer_client.get(reverse("fleet:instance-charts", args=[instance.pk])).content.decode()
    assert "TTFB" in charts and "latest probe" in charts


def _add_fleet(prefix: str, hosts: int, per_host: int) -> None:
    for h in range(hosts):
        host = make_host(name=f"{prefix}-rack-{h:02d}")
        for i in range(per_host):
            verdict = ("up", "degraded", "down")[(h + i) % 3]
            with_state(
                make_instance(host, name=f"{prefix}-{h:02d}-{i:02d}"), verdict, "TTFB 7.2 s > 5 s, so TTFT"
            )


def test_the_overview_makes_the_same_few_queries_for_a_small_and_a_larger_fleet(viewer_client):
    """Issue 16's guard: queries, not times. The page, the filter's partial and the poll
    cost the same number of queries with 6 instances as with 60 (no query per tile or
    host), and at most 15."""
    import re

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    overview = reverse("fleet:overview")
    counts = []
    for prefix, hosts, per_host in (("small", 2, 3), ("large", 9, 6)):  # 6, then 60 instances
        _add_fleet(prefix, hosts, per_host)
        with CaptureQueriesContext(connection) as page:
            html = viewer_client.get(overview).content.decode()
        with CaptureQueriesContext(connection) as tiles:
            viewer_client.get(overview, {"state": "up"}, HTTP_HX_TARGET="tiles", **HTMX_HEADERS)
        since = re.search(r'data-version="([^"]+)"', html).group(1)
        with CaptureQueriesContext(connection) as poll:
            viewer_client.get(overview, {"since": since}, HTTP_HX_TARGET="overview-poll", **HTMX_HEADERS)
        counts.append((len(page), len(tiles), len(poll)))
    small, larger = counts
    assert small == larger, counts
    assert max(larger) <= 15, counts
