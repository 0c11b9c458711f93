"""Alert rules over stored probe data open, join and mitigate incidents: one incident per
instance and cause (the category of the evidence that fired the rule), a host incident only
when the host itself is the evidence, maintenance windows silencing, timelines that take
only their own cause's events, and the evidence snapshot taken when an incident opens."""

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


def finding(code, category, severity="down"):
    return {"code": code, "category": category, "severity": severity, "evidence": code, "source": "readiness"}


REFUSED = finding("connect.refused", "process.not_started")
HTTP_500 = finding("health.http_500", "server.5xx")
XID = finding("gpu.xid", "cuda.xid")
HUNG = finding("engine.hung", "process.hung")
KV_PRESSURE = finding("kv.pressure", "oom.kv_pressure", "degraded")
KV_HIGH = finding("kv.high", "oom.kv_pressure", "info")


def verdict(instance, value, *findings):
    """The probes' judgement of the instance, as probe_service stores it."""
    InstanceState.objects.update_or_create(
        instance=instance, defaults={"verdict": value, "findings": list(findings)}
    )


def run(instance, name, values, every=30):
    """Store one sample per step and evaluate, as the probe cycles would."""
    for i, value in enumerate(values):
        at = T0 + timedelta(seconds=every * i)
        sample(instance, name, value, at)
        evaluate(now=at)
    return T0 + timedelta(seconds=every * (len(values) - 1))


def run_kv(instance, pressured, every=30):
    """The probes judge KV pressure (or not) at each step, with KV usage sampled at 0.97."""
    for i, under_pressure in enumerate(pressured):
        at = T0 + timedelta(seconds=every * i)
        sample(instance, "kv_cache_usage", 0.97, at)
        if under_pressure:
            verdict(instance, "degraded", KV_PRESSURE)
        else:
            verdict(instance, "up", KV_HIGH)
        evaluate(now=at)
    return T0 + timedelta(seconds=every * (len(pressured) - 1))


def down_for(seconds, *instances, start=T0, every=30):
    for i in range(seconds // every + 1):
        evaluate(now=start + timedelta(seconds=every * i))
    return start + timedelta(seconds=seconds)


def test_kv_pressure_for_two_minutes_opens_one_incident_with_evidence():
    instance = make_instance(make_host(), name="chat-a")
    run_kv(instance, [True] * 6)  # 0..150 s: pending at 0, firing at 120 s
    incident = Incident.objects.get()
    assert incident.category == "oom.kv_pressure" and incident.status == "open" and incident.source == "rule"
    assert incident.started_at == T0 and incident.detected_at == T0 + timedelta(seconds=120)
    assert list(incident.instances.all()) == [instance] and incident.models_affected == ["Qwen/Qwen3-8B"]
    snapshot = incident.evidence["instances"]["chat-a"]
    assert (
        snapshot["samples"]["kv_cache_usage"][0][1] == 0.97 and snapshot["launch_flags"]["max_num_seqs"] == 64
    )
    assert [f["code"] for f in snapshot["findings"]] == ["kv.pressure"]  # the same rule as the verdict
    assert incident.timeline.filter(kind="opened").count() == 1


def test_kv_usage_high_with_nothing_waiting_opens_nothing_and_stays_up():
    instance = make_instance(make_host())
    run_kv(instance, [False] * 12)
    assert not Incident.objects.exists()
    assert AlertState.objects.get(rule__key="kv_cache_high").state == "inactive"


def test_a_cleared_rule_mitigates_and_firing_again_joins_the_same_incident():
    instance = make_instance(make_host())
    end = run_kv(instance, [True] * 5 + [False] + [True] * 5)
    incident = Incident.objects.get()
    kinds = list(incident.timeline.values_list("kind", flat=True))
    assert kinds.count("alert_resolved") == 1 and kinds.count("alert_fired") == 1
    assert incident.status == "open" and end > incident.detected_at


def test_nothing_opens_twice_for_one_fault():
    instance = make_instance(make_host())
    run_kv(instance, [True] * 20)
    assert Incident.objects.count() == 1
    assert AlertState.objects.get(rule__key="kv_cache_high").state == "firing"


def test_different_categories_on_one_instance_are_different_incidents():
    instance = make_instance(make_host())
    verdict(instance, "degraded", KV_PRESSURE)
    for i in range(12):
        at = T0 + timedelta(seconds=30 * i)
        sample(instance, "ttft_p99_s", 9.0, at)
        evaluate(now=at)
    assert sorted(Incident.objects.values_list("category", flat=True)) == ["oom.kv_pressure", "timeout.ttft"]


def test_a_maintenance_window_silences_the_rule():
    instance = make_instance(make_host())
    MaintenanceWindow.objects.create(
        name="driver upgrade",
        instance=instance,
        starts_at=T0 - timedelta(minutes=1),
        ends_at=T0 + timedelta(hours=1),
    )
    run_kv(instance, [True] * 8)
    assert not Incident.objects.exists()


def test_a_recurring_window_is_active_at_the_same_time_each_day():
    window = MaintenanceWindow(
        name="nightly", recurrence="daily", starts_at=T0, ends_at=T0 + timedelta(minutes=30), host=make_host()
    )
    assert window.active_at(T0 + timedelta(days=3, minutes=10))
    assert not window.active_at(T0 + timedelta(days=3, minutes=40))
    assert not window.active_at(T0 - timedelta(days=1))


def test_when_a_whole_host_is_down_the_same_way_its_instances_join_one_host_incident():
    host = make_host(name="gpu-node-07")
    a, b = make_instance(host, name="a"), make_instance(host, name="b")
    for instance in (a, b):
        verdict(instance, "down", REFUSED)
    down_for(90)
    incident = Incident.objects.get()
    assert incident.dedup_key == f"host:{host.pk}:process.not_started"
    assert incident.category == "process.not_started"
    assert set(incident.instances.all()) == {a, b} and "gpu-node-07" in incident.title


def test_two_different_faults_on_one_host_are_two_incidents_each_with_its_cause():
    host = make_host(name="gpu-a100-01")
    llama, mistral = make_instance(host, name="vllm-llama"), make_instance(host, name="tgi-mistral")
    verdict(llama, "down", HTTP_500)
    verdict(mistral, "down", XID)
    down_for(90)
    opened = {i.category: [x.name for x in i.instances.all()] for i in Incident.objects.all()}
    assert opened == {"server.5xx": ["vllm-llama"], "cuda.xid": ["tgi-mistral"]}
    assert not Incident.objects.filter(dedup_key__startswith="host:").exists()


@pytest.mark.parametrize(
    ("found", "category"),
    [(REFUSED, "process.not_started"), (HTTP_500, "server.5xx"), (XID, "cuda.xid"), (HUNG, "process.hung")],
)
def test_service_down_takes_the_category_of_the_down_finding(found, category):
    instance = make_instance(make_host(), name="solo")
    verdict(instance, "down", found)
    down_for(90)
    incident = Incident.objects.get()
    assert incident.category == category and incident.dedup_key.endswith(category)
    assert incident.title.startswith("Service down on solo: ")


def test_a_different_fault_after_clearing_opens_a_new_incident_instead_of_reopening():
    instance = make_instance(make_host(), name="solo")
    verdict(instance, "down", finding("health.timeout", "process.unresponsive"))
    end = down_for(90)
    verdict(instance, "up")
    end = down_for(60, start=end + timedelta(seconds=30))
    hang = Incident.objects.get()
    assert hang.status == "mitigated"
    verdict(instance, "down", REFUSED)
    down_for(90, start=end + timedelta(minutes=9))
    hang.refresh_from_db()
    assert hang.status == "mitigated" and not hang.timeline.filter(text__contains="open again").exists()
    assert Incident.objects.get(category="process.not_started").status == "open"


def test_a_mitigated_incident_takes_no_timeline_entries_from_a_later_unrelated_fault():
    instance = make_instance(make_host(), name="chat")
    end = run_kv(instance, [True] * 6 + [False] * 3)
    kv = Incident.objects.get()
    assert kv.status == "mitigated"
    entries = kv.timeline.count()
    verdict(instance, "down", HTTP_500)
    down_for(90, start=end + timedelta(seconds=30))
    assert kv.timeline.count() == entries
    assert Incident.objects.filter(category="server.5xx").count() == 1


def test_an_evaluation_without_fresh_data_changes_nothing():
    instance = make_instance(make_host())
    verdict(instance, "up")
    sample(instance, "ttft_p99_s", 9.0, T0 - timedelta(hours=1))
    evaluate(now=T0)
    assert AlertState.objects.get(rule__key="ttft_p99_high", instance=instance).state == "inactive"
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
    verdict(instance, "down", REFUSED)
    for i in range(4):
        evaluate(now=T0 + timedelta(seconds=30 * i))
    incident = Incident.objects.get(category="process.not_started")
    verdict(instance, "up")
    evaluate(now=T0 + timedelta(minutes=3))
    evaluate(now=T0 + timedelta(minutes=4))  # no change: no second entry
    entry = incident.timeline.get(kind="restart")
    assert entry.text == "solo: down → up (back up: restarted)"
    assert incident.timeline.filter(kind="alert_resolved").exists()


def test_a_symptom_of_an_outage_joins_the_outage_s_incident_instead_of_opening_its_own():
    """A hung engine: clients give up (the error rate climbs) while the instance is down for
    the hang; the error-rate alert joins the hang's incident."""
    instance = make_instance(make_host(), name="stalled")
    verdict(instance, "down", HUNG)
    end = down_for(90)
    for i in range(12):
        at = end + timedelta(seconds=30 * (i + 1))
        sample(instance, "error_rate", 1.0, at)
        evaluate(now=at)
    incident = Incident.objects.get()
    assert incident.category == "process.hung"
    fired = incident.timeline.filter(kind="alert_fired")
    assert any("Error rate above 5 %" in entry.text for entry in fired)


def test_an_incident_is_mitigated_only_when_every_alert_that_joined_it_has_cleared():
    host = make_host(name="gpu-node-08")
    a, b = make_instance(host, name="a"), make_instance(host, name="b")
    for instance in (a, b):
        verdict(instance, "down", REFUSED)
    end = down_for(90)
    verdict(a, "up")
    end = down_for(60, start=end + timedelta(seconds=30))
    incident = Incident.objects.get()
    assert incident.status == "open"  # b is still down
    verdict(b, "up")
    down_for(60, start=end + timedelta(seconds=30))
    incident.refresh_from_db()
    assert incident.status == "mitigated"


def test_requests_waiting_as_deferred_do_not_count_as_a_backlog():
    """vLLM 0.20+ tells waits apart: 80 waiting, of which 70 for a LoRA slot or a KV transfer
    ("deferred"), is not more than 50 waiting for capacity; an engine without the split is
    judged on all its waits."""
    split = make_instance(make_host(), name="lora-a")
    whole = make_instance(make_host(name="gpu-b"), name="plain-b")
    for i in range(8):
        at = T0 + timedelta(seconds=30 * i)
        for instance in (split, whole):
            sample(instance, "num_requests_waiting", 80, at)
        sample(split, "num_requests_waiting_capacity", 10, at)
        evaluate(now=at)
    opened = list(Incident.objects.values_list("instances__name", "category"))
    assert opened == [("plain-b", "rate_limit.queue")]
