"""Alert rules over stored probe data open, join and mitigate incidents: one incident per
instance and category, a host that is down as one incident, maintenance windows silencing,
and the evidence snapshot taken when an incident opens."""

from datetime import UTC, datetime, timedelta

import pytest

from fleet.models import InstanceState, MetricSample
from incidents.alerting import evaluate
from incidents.models import AlertState, Incident, MaintenanceWindow, TimelineEntry
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)


def sample(instance, name, value, at):
    MetricSample.objects.create(instance=instance, name=name, value=value, ts=at)


def verdict(instance, value):
    InstanceState.objects.update_or_create(instance=instance, defaults={"verdict": value})


def run(instance, name, values, every=30):
    """Store one sample per step and evaluate, as the probe cycles would."""
    for i, value in enumerate(values):
        at = T0 + timedelta(seconds=every * i)
        sample(instance, name, value, at)
        evaluate(now=at)
    return T0 + timedelta(seconds=every * (len(values) - 1))


def test_kv_cache_above_95_percent_for_two_minutes_opens_one_incident_with_evidence():
    instance = make_instance(make_host(), name="chat-a")
    verdict(instance, "degraded")
    run(instance, "kv_cache_usage", [0.97] * 6)  # 0..150 s: pending at 0, firing at 120 s
    incident = Incident.objects.get()
    assert incident.category == "oom.kv_pressure" and incident.status == "open" and incident.source == "rule"
    assert incident.started_at == T0 and incident.detected_at == T0 + timedelta(seconds=120)
    assert list(incident.instances.all()) == [instance] and incident.models_affected == ["Qwen/Qwen3-8B"]
    snapshot = incident.evidence["instances"]["chat-a"]
    assert (
        snapshot["samples"]["kv_cache_usage"][0][1] == 0.97 and snapshot["launch_flags"]["max_num_seqs"] == 64
    )
    assert incident.timeline.filter(kind="opened").count() == 1


def test_a_cleared_rule_mitigates_and_firing_again_joins_the_same_incident():
    instance = make_instance(make_host())
    verdict(instance, "up")
    end = run(instance, "kv_cache_usage", [0.97] * 5 + [0.5] + [0.98] * 5)
    incident = Incident.objects.get()
    kinds = list(incident.timeline.values_list("kind", flat=True))
    assert kinds.count("alert_resolved") == 1 and kinds.count("alert_fired") == 1
    assert incident.status == "open" and end > incident.detected_at


def test_nothing_opens_twice_for_one_fault():
    instance = make_instance(make_host())
    verdict(instance, "up")
    run(instance, "kv_cache_usage", [0.99] * 20)
    assert Incident.objects.count() == 1
    assert AlertState.objects.get(rule__key="kv_cache_high").state == "firing"


def test_different_categories_on_one_instance_are_different_incidents():
    instance = make_instance(make_host())
    verdict(instance, "up")
    for i in range(12):
        at = T0 + timedelta(seconds=30 * i)
        sample(instance, "kv_cache_usage", 0.99, at)
        sample(instance, "ttft_p99_s", 9.0, at)
        evaluate(now=at)
    assert sorted(Incident.objects.values_list("category", flat=True)) == ["oom.kv_pressure", "timeout.ttft"]


def test_a_maintenance_window_silences_the_rule():
    instance = make_instance(make_host())
    verdict(instance, "up")
    MaintenanceWindow.objects.create(
        name="driver upgrade",
        instance=instance,
        starts_at=T0 - timedelta(minutes=1),
        ends_at=T0 + timedelta(hours=1),
    )
    run(instance, "kv_cache_usage", [0.99] * 8)
    assert not Incident.objects.exists()


def test_a_recurring_window_is_active_at_the_same_time_each_day():
    window = MaintenanceWindow(
        name="nightly", recurrence="daily", starts_at=T0, ends_at=T0 + timedelta(minutes=30), host=make_host()
    )
    assert window.active_at(T0 + timedelta(days=3, minutes=10))
    assert not window.active_at(T0 + timedelta(days=3, minutes=40))
    assert not window.active_at(T0 - timedelta(days=1))


def test_when_a_whole_host_is_down_its_instances_join_one_host_incident():
    host = make_host(name="gpu-node-07")
    a, b = make_instance(host, name="a"), make_instance(host, name="b")
    for instance in (a, b):
        verdict(instance, "down")
    for i in range(4):
        evaluate(now=T0 + timedelta(seconds=30 * i))
    incident = Incident.objects.get()
    assert incident.dedup_key == f"host:{host.pk}:process.not_started"
    assert set(incident.instances.all()) == {a, b} and "gpu-node-07" in incident.title


def test_an_evaluation_without_fresh_data_changes_nothing():
    instance = make_instance(make_host())
    verdict(instance, "up")
    sample(instance, "kv_cache_usage", 0.99, T0 - timedelta(hours=1))
    evaluate(now=T0)
    assert AlertState.objects.get(rule__key="kv_cache_high", instance=instance).state == "inactive"
    assert not TimelineEntry.objects.exists()


def test_the_fleet_overview_shows_current_and_upcoming_maintenance(viewer_client):
    from django.urls import reverse
    from django.utils import timezone

    host = make_host(name="gpu-node-09")
    now = timezone.now()
    window = MaintenanceWindow.objects.create
    window(
        name="driver upgrade",
        host=host,
        starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(minutes=25),
    )
    nightly = now - timedelta(days=3) + timedelta(hours=2)  # every day, starting two hours from now
    window(
        name="nightly restart",
        host=host,
        recurrence="daily",
        starts_at=nightly,
        ends_at=nightly + timedelta(hours=1),
    )
    window(name="long ago", host=host, starts_at=now - timedelta(days=9), ends_at=now - timedelta(days=8))
    content = viewer_client.get(reverse("fleet:overview")).content.decode()
    assert "driver upgrade" in content and "nightly restart" in content and "long ago" not in content
    assert content.count(">now<") == 1


def test_verdict_changes_of_an_affected_instance_go_into_the_timeline_and_a_return_is_a_restart():
    host = make_host()
    instance = make_instance(host, name="solo")
    verdict(instance, "down")
    for i in range(4):
        evaluate(now=T0 + timedelta(seconds=30 * i))
    incident = Incident.objects.get(category="process.not_started")
    verdict(instance, "up")
    evaluate(now=T0 + timedelta(minutes=3))
    evaluate(now=T0 + timedelta(minutes=4))  # no change: no second entry
    entry = incident.timeline.get(kind="restart")
    assert entry.text == "solo: down → up (back up: restarted)"
    assert incident.timeline.filter(kind="alert_resolved").exists()
