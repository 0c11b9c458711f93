"""The fleet overview at scale (issue 16): problems first, healthy hosts collapsed into their
counts, filters a page at a time, and polls answered with what changed since the tab's
version (docs/fleet-overview.md)."""

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from diagnostics.models import CapacityFinding
from fleet.models import InstanceState
from ops_console import overview_layout
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db

OVERVIEW = "/fleet/"
POLL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "overview-poll"}
PARTIAL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "tiles"}
REFUSED = {"code": "connect.refused", "category": "x", "severity": "down", "evidence": "connection refused"}
NOTE = {
    "code": "metrics.missing",
    "category": "x",
    "severity": "info",
    "evidence": "no prefix-cache hit rate",
}


def state(instance, verdict="up", findings=(), **fields):
    InstanceState.objects.update_or_create(
        instance=instance,
        defaults={"verdict": verdict, "last_probe_at": timezone.now(), "findings": list(findings), **fields},
    )
    return instance


def host_with(name, verdicts):
    """A host whose instances (name-0, name-1, …) have these verdicts."""
    host = make_host(name=name)
    for index, verdict in enumerate(verdicts):
        state(make_instance(host, name=f"{name}-{index}"), verdict, [REFUSED] if verdict == "down" else [])
    return host


def tiles(html):
    """(instance, shown state) of each tile, in page order."""
    return re.findall(r'data-instance="([^"]+)"\s+data-state="([^"]+)"', html)


def version(html):
    return re.search(r'data-version="([^"]+)"', html).group(1)


def test_problems_come_first_worst_first_and_healthy_hosts_collapse_into_their_counts(viewer_client):
    host_with("aa-quiet", ["up"] * 8)
    host_with("bb-slow", ["up", "degraded"])
    host_with("cc-dead", ["down", "up", "up"])
    page = viewer_client.get(OVERVIEW).content.decode()
    assert tiles(page) == [("cc-dead-0", "down"), ("bb-slow-1", "degraded")]
    assert page.index('data-host="cc-dead"') < page.index('data-host="bb-slow"') < page.index("Healthy hosts")
    chip = re.search(
        r'<a class="host-chip" href="([^"]+)" data-host="aa-quiet">aa-quiet <span class="count">8', page
    )
    assert chip and chip.group(1) == "/fleet/?host=aa-quiet"  # a link to all its tiles
    assert "aa-quiet-0" not in page


def test_a_host_with_one_problem_shows_that_tile_and_the_count_of_its_healthy_others(viewer_client):
    host_with("node-a", ["up", "up", "down", "up"])
    page = viewer_client.get(OVERVIEW).content.decode()
    assert tiles(page) == [("node-a-2", "down")]
    assert 'data-quiet="3"' in page and "3 more, all up" in page and 'href="/fleet/?host=node-a"' in page
    expanded = viewer_client.get(OVERVIEW, {"host": "node-a"}).content.decode()
    assert [name for name, _ in tiles(expanded)] == ["node-a-0", "node-a-1", "node-a-2", "node-a-3"]


def test_up_instances_with_a_finding_or_an_open_capacity_finding_are_problems_too(viewer_client):
    noted = host_with("node-a", ["up", "up"])
    state(noted.instances.get(name="node-a-0"), "up", [NOTE])
    sized = host_with("node-b", ["up", "up"])
    finding = CapacityFinding.objects.create
    finding(
        instance=sized.instances.get(name="node-b-1"),
        code="kv",
        severity="warning",
        title="KV cache nearly full",
    )
    finding(instance=sized.instances.get(name="node-b-0"), code="kv", severity="info", title="a note")
    page = viewer_client.get(OVERVIEW).content.decode()
    assert sorted(tiles(page)) == [("node-a-0", "up"), ("node-b-1", "up")]
    assert "no prefix-cache hit rate" in page and "capacity: KV cache nearly full" in page


def test_a_state_filter_lists_its_tiles_a_page_at_a_time(viewer_client, monkeypatch):
    monkeypatch.setattr(overview_layout, "TILES_PER_PAGE", 4)
    host_with("node-a", ["up"] * 6)
    host_with("node-b", ["up", "up", "down"])
    first = viewer_client.get(OVERVIEW, {"state": "up"}).content.decode()
    assert [n for n, _ in tiles(first)] == ["node-a-0", "node-a-1", "node-a-2", "node-a-3"]
    assert "Page 1 of 2" in first and 'rel="next"' in first and 'href="/fleet/?state=up&amp;page=2"' in first
    second = viewer_client.get(OVERVIEW, {"state": "up", "page": "2"}, **PARTIAL).content.decode()
    assert [n for n, _ in tiles(second)] == ["node-a-4", "node-a-5", "node-b-0", "node-b-1"]
    assert "<html" not in second and 'rel="prev"' in second and 'aria-keyshortcuts="ArrowLeft"' in second
    assert '<span class="count" data-state="up">8</span>' in second  # the counts are the fleet's


def test_problem_hosts_are_paginated_too(viewer_client, monkeypatch):
    monkeypatch.setattr(overview_layout, "PROBLEM_HOSTS_PER_PAGE", 2)
    for name in ("node-a", "node-b", "node-c"):
        host_with(name, ["down"])
    first = viewer_client.get(OVERVIEW).content.decode()
    assert [n for n, _ in tiles(first)] == ["node-a-0", "node-b-0"] and "Page 1 of 2" in first
    second = viewer_client.get(OVERVIEW, {"page": "2"}).content.decode()
    assert [n for n, _ in tiles(second)] == ["node-c-0"]


def test_the_poll_answers_204_when_nothing_changed(viewer_client):
    host_with("node-a", ["up", "down"])
    shown = version(viewer_client.get(OVERVIEW).content.decode())
    response = viewer_client.get(OVERVIEW, {"since": shown}, **POLL)
    assert response.status_code == 204 and response.content == b""


def test_the_poll_after_a_change_carries_the_changed_tile_and_the_counts_only(viewer_client):
    host = host_with("node-a", ["down", "degraded", "up"])
    host_with("node-b", ["up", "up"])
    shown = version(viewer_client.get(OVERVIEW).content.decode())
    state(host.instances.get(name="node-a-1"), "failing", [REFUSED], consecutive_failures=1)
    answer = viewer_client.get(OVERVIEW, {"since": shown}, **POLL).content.decode()
    assert tiles(answer) == [("node-a-1", "failing")] and "failing 1× in a row" in answer
    assert 'id="tile-' in answer and 'hx-swap-oob="true"' in answer
    assert "node-a-0" not in answer and "node-b" not in answer  # unchanged: not sent
    assert '<span class="count" data-state="failing">1</span>' in answer
    assert '<span class="count" data-state="degraded">0</span>' in answer
    newer = version(answer)
    assert newer != shown and viewer_client.get(OVERVIEW, {"since": newer}, **POLL).status_code == 204


def test_the_poll_sends_the_sections_whose_layout_changed(viewer_client):
    host_with("node-a", ["down"])
    quiet = host_with("node-b", ["up", "up"])
    shown = version(viewer_client.get(OVERVIEW).content.decode())
    state(quiet.instances.get(name="node-b-0"), "down", [REFUSED])
    answer = viewer_client.get(OVERVIEW, {"since": shown}, **POLL).content.decode()
    assert re.search(r'<div id="overview-groups"\s+hx-swap-oob="true"', answer)  # node-b joins the problems
    assert re.search(r'<section id="overview-healthy"\s+class="healthy-hosts"\s+hx-swap-oob="true"', answer)
    assert tiles(answer) == [("node-a-0", "down"), ("node-b-0", "down")]


def test_the_poll_falls_back_to_the_whole_partial_when_it_cannot_tell(viewer_client):
    host_with("node-a", ["down"])
    shown = version(viewer_client.get(OVERVIEW).content.decode())
    cache.clear()  # the snapshot of what the tab shows is gone (another process, evicted)
    state(make_instance(make_host(name="node-b"), name="node-b-0"), "down", [REFUSED])
    answer = viewer_client.get(OVERVIEW, {"since": shown}, **POLL).content.decode()
    assert re.match(r'<div id="tiles"[^>]*hx-swap-oob="true"', answer.strip())
    assert tiles(answer) == [("node-a-0", "down"), ("node-b-0", "down")] and "<html" not in answer


def test_a_host_whose_agent_is_silent_is_news_even_when_its_instances_are_up(viewer_client):
    from fleet.models import HostAgent

    host = host_with("node-a", ["up", "up"])
    HostAgent.objects.create(host=host, last_heartbeat_at=timezone.now() - timedelta(minutes=10))
    page = viewer_client.get(OVERVIEW).content.decode()
    assert 'data-condition="agent_missing"' in page and 'data-quiet="2"' in page and not tiles(page)


def test_stale_and_maintenance_are_counted_as_the_tiles_show_them(viewer_client):
    from incidents.models import MaintenanceWindow

    now = timezone.now()
    state(make_instance(make_host(name="node-a"), name="old"), "up", last_probe_at=now - timedelta(hours=2))
    covered = host_with("node-b", ["down"])
    MaintenanceWindow.objects.create(name="swap", host=covered, starts_at=now - timedelta(minutes=1),
                                     ends_at=now + timedelta(hours=1))  # fmt: skip
    page = viewer_client.get(OVERVIEW).content.decode()
    assert sorted(tiles(page)) == [("node-b-0", "maintenance"), ("old", "stale")]
    assert '<span class="count" data-state="stale">1</span>' in page
    assert '<span class="count" data-state="down">0</span>' in page


def test_the_overview_never_reads_the_probes_json_it_does_not_show(viewer_client):
    host_with("node-a", ["up", "down"])
    with CaptureQueriesContext(connection) as queries:
        viewer_client.get(OVERVIEW)
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    for column in ("last_scrape", "kinds", "baselines", '"snapshot"', "gpu_reading"):
        assert column not in sql, column


def test_an_unknown_host_or_an_empty_filter_says_so(viewer_client):
    host_with("node-a", ["up"])
    assert "No instance on host node-z." in viewer_client.get(OVERVIEW, {"host": "node-z"}).content.decode()
    assert "No instance is down right now." in viewer_client.get(OVERVIEW, {"state": "down"}).content.decode()
    assert "Every instance is up and quiet." in viewer_client.get(OVERVIEW).content.decode()
    assert reverse("fleet:overview") == OVERVIEW
