"""The home page, the on-call engineer's first screen: open incidents by severity, the
instances that are not up with the probes' reason, open capacity findings and recent
inventory changes, each linking on; an all-clear that reads as good news; the polled
partial; and a query count that does not grow with the outage."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from diagnostics.models import CapacityFinding
from fleet import change_tracking
from fleet.models import Instance, InstanceState
from incidents.models import Incident, MaintenanceWindow
from tests.conftest import HTMX_HEADERS
from tests.factories import make_gateway, make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db

HOME_LIVE = {"HTTP_HX_TARGET": "home-live", **HTMX_HEADERS}


def with_state(instance: Instance, verdict: str, evidence: str = "", *, probed_ago=timedelta(0), failures=0):
    findings = (
        [{"code": "x", "category": "network", "severity": "down", "evidence": evidence}] if evidence else []
    )
    InstanceState.objects.create(
        instance=instance,
        verdict=verdict,
        since=timezone.now() - timedelta(minutes=12),
        last_probe_at=timezone.now() - probed_ago,
        consecutive_failures=failures,
        findings=findings,
    )
    return instance


@dataclass
class Outage:
    down: Instance
    failing: Instance
    stale: Instance
    fine: Instance
    in_maintenance: Instance
    critical: Incident
    major: Incident
    resolved: Incident
    drill: Incident
    finding: CapacityFinding


def build_outage(*, actor=None) -> Outage:
    """Three instances not up (down, failing, stale), one up, one down in maintenance; two
    open incidents of two severities, one resolved and one drill; a critical capacity
    finding (and an info one and a cleared one); and recent inventory changes."""
    now = timezone.now()
    rack_a, rack_b = make_host(name="rack-a"), make_host(name="rack-b")
    for host in (rack_a, rack_a, rack_b):
        make_gpu(host)
    down = with_state(make_instance(rack_a, name="llama-70b"), "down", "Connection refused on 10.0.0.5:8000")
    failing = with_state(
        make_instance(rack_a, name="qwen-chat"), "failing", "read timeout after 10 s on /health", failures=2
    )
    stale = with_state(make_instance(rack_b, name="mistral-7b"), "up", probed_ago=timedelta(hours=2))
    fine = with_state(make_instance(rack_b, name="phi-mini"), "up")
    in_maintenance = with_state(make_instance(rack_b, name="gemma-upgrade"), "down", "Connection refused")
    MaintenanceWindow.objects.create(
        name="driver upgrade",
        instance=in_maintenance,
        starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(hours=1),
    )
    make_instance(rack_b, name="never-probed")
    critical = Incident.objects.create(
        title="llama-70b is down",
        category="other",
        severity="critical",
        started_at=now - timedelta(minutes=25),
    )
    critical.instances.set([down])
    major = Incident.objects.create(
        title="TTFT p95 above 5 s on rack-a",
        category="timeout.ttft",
        severity="major",
        started_at=now - timedelta(hours=3),
        acknowledged_at=now - timedelta(hours=2),
    )
    major.hosts.set([rack_a])
    resolved = Incident.objects.create(
        title="Old and resolved", category="other", severity="critical", status="resolved", resolved_at=now
    )
    drill = Incident.objects.create(
        title="Practice outage", category="other", severity="critical", source="drill"
    )
    finding = CapacityFinding.objects.create(
        instance=failing, code="kv.too_small", severity="critical", title="KV cache holds 3 sequences, not 64"
    )
    CapacityFinding.objects.create(
        instance=fine, code="info.only", severity="info", title="An info-only note"
    )
    CapacityFinding.objects.create(
        instance=fine, code="gone", severity="critical", title="A cleared finding", cleared_at=now
    )
    before = change_tracking.snapshot(failing)
    failing.engine_version = "0.11.3"
    failing.save()
    change_tracking.record_update(failing, before=before, actor=actor, source="web")
    gateway = make_gateway(name="gw-old")
    change_tracking.record_create(gateway, actor=actor, source="api")
    change_tracking.delete_with_log(gateway, actor=actor, source="api")
    return Outage(down, failing, stale, fine, in_maintenance, critical, major, resolved, drill, finding)


def section(content: str, section_id: str) -> str:
    match = re.search(rf'<section[^>]*id="{section_id}".*?</section>', content, re.S)
    assert match, f"no section #{section_id}"
    return match.group(0)


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"#]+)(?:#[^"]*)?"', html)


def test_it_shows_open_incidents_by_severity_critical_first_with_where_age_and_acknowledgement(viewer_client):
    outage = build_outage()
    incidents = section(viewer_client.get(reverse("home")).content.decode(), "incidents")
    assert incidents.index('data-severity="critical"') < incidents.index('data-severity="major"')
    assert incidents.index("llama-70b is down") < incidents.index("TTFT p95 above 5 s on rack-a")
    assert "Old and resolved" not in incidents and "Practice outage" not in incidents
    assert 'data-count="incidents">2<' in incidents
    critical = re.search(rf'data-incident="{outage.critical.pk}".*?</li>', incidents, re.S).group(0)
    assert 'data-ack="no"' in critical and "open for 25\xa0minutes" in critical
    assert outage.down.get_absolute_url() in critical and "rack-a" in critical
    major = re.search(rf'data-incident="{outage.major.pk}".*?</li>', incidents, re.S).group(0)
    assert 'data-ack="yes"' in major and "host rack-a" in major


def test_it_shows_the_instances_not_up_worst_first_with_the_probes_reason(viewer_client):
    outage = build_outage()
    instances = section(viewer_client.get(reverse("home")).content.decode(), "instances")
    shown = re.findall(r'data-instance="([^"]+)"\s+data-state="([^"]+)"', instances)
    assert shown == [("llama-70b", "down"), ("qwen-chat", "failing"), ("mistral-7b", "stale")]
    assert "Connection refused on 10.0.0.5:8000" in instances
    assert "failing 2× in a row" in instances and "read timeout after 10 s on /health" in instances
    assert "no health result for 2\xa0hours" in instances
    assert outage.down.get_absolute_url() in instances
    assert "1 instance in a maintenance window now" in instances


def test_it_shows_the_open_capacity_findings_and_the_recent_changes(viewer_client):
    outage = build_outage()
    content = viewer_client.get(reverse("home")).content.decode()
    capacity = section(content, "capacity")
    assert "KV cache holds 3 sequences, not 64" in capacity
    assert f'href="{outage.failing.get_absolute_url()}#capacity"' in capacity
    assert "An info-only note" not in capacity and "A cleared finding" not in capacity
    changes = section(content, "changes")
    assert f'href="{outage.failing.get_absolute_url()}">qwen-chat</a>' in changes
    assert "<code>engine_version</code>" in changes
    assert "gw-old" in changes and 'href="/fleet/gateways/' not in changes  # deleted: no link


def test_every_link_of_the_outage_page_opens_for_a_viewer(viewer_client):
    build_outage()
    content = viewer_client.get(reverse("home")).content.decode()
    live = content[content.index('id="home-live"') :]
    links = set(hrefs(live))
    assert len(links) >= 10
    for url in sorted(links):
        assert viewer_client.get(url).status_code == 200, url


def test_the_summary_names_what_needs_attention(viewer_client):
    build_outage()
    content = viewer_client.get(reverse("home")).content.decode()
    assert 'data-summary="trouble"' in content
    assert re.search(r'<a href="#incidents">\s*2 open incidents\s*</a>', content)
    assert "3 instances not up" in content and "1 capacity finding" in content
    assert "No open incidents" not in content


def test_an_all_clear_reads_as_good_news(viewer_client):
    host = make_host(name="rack-ok")
    with_state(make_instance(host, name="healthy-one"), "up")
    Incident.objects.create(title="Long gone", category="other", severity="critical", status="resolved")
    content = viewer_client.get(reverse("home")).content.decode()
    assert 'data-summary="clear"' in content and "All clear" in content
    assert "No open incidents." in section(content, "incidents")
    assert "No instance is down, failing, degraded or stale (1 monitored)." in section(content, "instances")
    assert "No open capacity findings." in section(content, "capacity")
    assert "Needs attention" not in content and "Long gone" not in content


def test_the_inventory_counts_stay_below_the_sections(viewer_client):
    build_outage()
    content = viewer_client.get(reverse("home")).content.decode()
    counts = re.search(r'<nav class="home-counts".*?</nav>', content, re.S).group(0)
    assert re.sub(r"\s+", " ", counts).count("<strong>") == 4
    assert "<strong>2</strong> GPU hosts" in counts and "<strong>6</strong> instances" in counts
    assert content.index('id="changes"') < content.index('class="home-counts"')


@pytest.mark.parametrize("role", ["viewer", "engineer", "sre", "admin"])
def test_every_role_can_see_it(client, cast, role):
    build_outage()
    client.force_login(cast.for_role(role))
    response = client.get(reverse("home"))
    assert response.status_code == 200 and "llama-70b is down" in response.content.decode()


def test_it_needs_a_role(client, cast):
    assert client.get(reverse("home")).status_code == 302
    client.force_login(cast.outsider)
    assert client.get(reverse("home")).status_code == 403


def test_the_page_polls_a_partial_that_returns_the_same_sections(viewer_client, settings):
    settings.OVERVIEW_POLL_S = 7
    build_outage()
    page = viewer_client.get(reverse("home")).content.decode()
    assert 'hx-get="/"' in page and 'hx-trigger="every 7s"' in page and 'hx-target="this"' in page
    partial = viewer_client.get(reverse("home"), **HOME_LIVE).content.decode()
    assert "<html" not in partial and "memory-figure" not in partial
    assert partial.lstrip().startswith('<div id="home-live"')
    for section_id in ("incidents", "instances", "capacity", "changes"):
        assert section(partial, section_id) == section(page, section_id)


def test_an_htmx_request_aimed_elsewhere_gets_the_whole_page(viewer_client):
    content = viewer_client.get(reverse("home"), HTTP_HX_TARGET="main", **HTMX_HEADERS).content.decode()
    assert "<html" in content


def _grow(outage: Outage, n: int) -> None:
    """n more of everything the page lists, on new hosts."""
    for i in range(n):
        host = make_host(name=f"extra-{i}")
        instance = with_state(make_instance(host, name=f"extra-down-{i}"), "down", "Connection refused")
        incident = Incident.objects.create(
            title=f"extra {i}", category="other", severity=("critical", "minor")[i % 2]
        )
        incident.instances.set([instance])
        incident.hosts.set([host])
        CapacityFinding.objects.create(instance=instance, code="kv", severity="warning", title="KV")
        change_tracking.record_create(host, actor=None, source="cli")


def test_the_query_count_stays_the_same_however_big_the_outage(viewer_client, django_assert_max_num_queries):
    """The baseline: session, user and role (3); incidents with their instances and hosts
    (3); probe intervals, maintenance windows and instances (3); capacity findings (1);
    changes and whether their objects still exist (1 + one per model, 2 here); counts (4);
    the chart (1)."""
    outage = build_outage()
    viewer_client.get(reverse("home"))  # the content types are cached after this
    with django_assert_max_num_queries(18):
        viewer_client.get(reverse("home"))
    _grow(outage, 15)
    with django_assert_max_num_queries(18):
        content = viewer_client.get(reverse("home")).content.decode()
    assert "18 instances not up" in content and "17 open incidents" in content
    with django_assert_max_num_queries(16):  # the partial draws no chart
        viewer_client.get(reverse("home"), **HOME_LIVE)
