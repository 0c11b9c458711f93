"""Alertmanager's webhook (payload version 4): bearer-token auth, payloads checked at the
boundary and stored as they came; then, as a worker processes them, alerts kept by
fingerprint and written in bulk, and incidents opened, joined and mitigated through the
lifecycle: one per notification group and category, or the console's own incident for the
same fault on an inventory instance. (How deliveries are stored, processed, retried and
swept: test_alertmanager_delivery.py.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from fleet.models import InstanceState, MetricSample
from incidents import alert_deliveries, alertmanager, alertmanager_payload
from incidents.alerting import evaluate
from incidents.models import AlertDelivery, Incident, MaintenanceWindow, ReceivedAlert
from tests.factories import make_host, make_instance

TOKEN = "am-webhook-token-0123456789"
URL = "/incidents/alertmanager/"
T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
GROUP_KEY = '{}:{alertname="NodeDiskFull"}'


@pytest.fixture(autouse=True)
def token(settings):
    settings.ALERTMANAGER_TOKEN = TOKEN


def alert(name: str = "NodeDiskFull", status: str = "firing", fingerprint: str = "", **labels) -> dict:
    labels = {"alertname": name, "severity": "warning", **labels}
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{name} on {labels.get('instance', 'somewhere')}"},
        "startsAt": "2026-12-03T02:58:00.123456789Z",
        "endsAt": "2026-12-03T03:05:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
        "fingerprint": fingerprint or alertmanager_payload.fingerprint_of(labels),
    }


def webhook(*alerts: dict, group_key: str = GROUP_KEY) -> dict:
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "ops-console",
        "groupLabels": {"alertname": "NodeDiskFull"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


def post(client: Client, payload: dict | str | bytes, *, token: str | None = TOKEN):
    body = payload if isinstance(payload, str | bytes) else json.dumps(payload)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
    return client.post(URL, body, content_type="application/json", **headers)


def deliver(client: Client, payload: dict) -> dict:
    """Post the payload as Alertmanager does, then process it as the worker does (here, in
    the test's own transaction: its on-commit task never runs). The processing's outcome."""
    response = post(client, payload)
    assert response.status_code == 200, response.content
    delivery_id = response.json()["delivery"]
    assert alert_deliveries.process(delivery_id=delivery_id) == alert_deliveries.Result.PROCESSED
    return AlertDelivery.objects.get(pk=delivery_id).outcome


def test_the_url_is_named_in_the_incidents_namespace():
    assert reverse("incidents:alertmanager") == URL


# --- firing, resolved, grouped ------------------------------------------------------------


@pytest.mark.django_db
def test_the_receiver_answers_with_what_it_accepted_and_leaves_the_processing_to_a_worker(client):
    response = post(client, webhook(alert(node="n1"), alert(node="n2")))
    assert response.status_code == 200
    delivery = AlertDelivery.objects.get()
    assert response.json() == {"received": 2, "delivery": delivery.pk}
    assert delivery.alert_count == 2 and delivery.group_key == GROUP_KEY and delivery.processed_at is None
    assert json.loads(bytes(delivery.body)) == webhook(alert(node="n1"), alert(node="n2"))
    assert not ReceivedAlert.objects.exists() and not Incident.objects.exists()


@pytest.mark.django_db
def test_a_firing_alert_is_kept_by_fingerprint_and_opens_an_incident_for_its_group(client):
    outcome = deliver(client, webhook(alert("NodeDiskFull", node="n1", device="sda")))
    assert outcome == {"received": 1, "new": 1, "incidents_opened": 1, "silenced": 0}
    stored = ReceivedAlert.objects.get()
    incident = Incident.objects.get()
    assert (
        stored.status == "firing" and stored.alertname == "NodeDiskFull" and stored.receiver == "ops-console"
    )
    assert stored.starts_at == datetime(2026, 12, 3, 2, 58, 0, 123456, tzinfo=UTC) and stored.ends_at is None
    assert stored.incident == incident and stored.times_received == 1
    assert incident.source == "alertmanager" and incident.status == "open" and incident.category == "other"
    assert incident.severity == "major" and incident.started_at == stored.starts_at
    assert incident.dedup_key == alertmanager.key_for(
        labels=stored.labels, category="other", instance=None, group_key=GROUP_KEY
    )
    assert incident.dedup_key.startswith("am:group:") and incident.dedup_key.endswith(":other")
    assert incident.title == "NodeDiskFull"
    assert incident.timeline.get(kind="opened").text.startswith("Alertmanager: NodeDiskFull firing.")


@pytest.mark.django_db
def test_a_resent_firing_alert_is_counted_once_more_and_adds_nothing_to_the_timeline(client):
    payload = webhook(alert(node="n1"))
    deliver(client, payload)
    outcome = deliver(client, payload)  # Alertmanager resends a group's alerts with each notification
    assert outcome == {"received": 1, "new": 0, "incidents_opened": 0, "silenced": 0}
    stored = ReceivedAlert.objects.get()
    assert stored.times_received == 2 and stored.last_received > stored.first_received
    assert Incident.objects.get().timeline.count() == 1


@pytest.mark.django_db
def test_a_resolved_alert_mitigates_the_incident_it_opened(client):
    deliver(client, webhook(alert(node="n1")))
    outcome = deliver(client, webhook(alert(node="n1", status="resolved")))
    assert outcome == {"received": 1, "new": 0, "incidents_opened": 0, "silenced": 0}
    stored, incident = ReceivedAlert.objects.get(), Incident.objects.get()
    assert stored.status == "resolved" and stored.ends_at == datetime(2026, 12, 3, 3, 5, tzinfo=UTC)
    assert incident.status == "mitigated" and incident.mitigated_at is not None
    kinds = list(incident.timeline.values_list("kind", flat=True))
    assert kinds == ["opened", "alert_resolved", "status"]


@pytest.mark.django_db
def test_firing_again_after_resolving_opens_the_mitigated_incident_again(client):
    deliver(client, webhook(alert(node="n1")))
    deliver(client, webhook(alert(node="n1", status="resolved")))
    deliver(client, webhook(alert(node="n1")))
    incident = Incident.objects.get()
    assert incident.status == "open" and incident.timeline.filter(kind="alert_fired").count() == 1
    assert ReceivedAlert.objects.get().times_received == 3


@pytest.mark.django_db
def test_several_alerts_of_one_group_are_each_kept_and_open_one_incident_for_the_group(client):
    payload = webhook(
        alert("NodeDiskFull", node="n1", device="sda"),
        alert("NodeDiskFull", node="n2", device="sda"),
        alert("NodeDiskFull", node="n3", device="sdb", severity="critical"),
    )
    outcome = deliver(client, payload)
    assert outcome == {"received": 3, "new": 3, "incidents_opened": 1, "silenced": 0}
    incident = Incident.objects.get()
    assert incident.severity == "critical" and incident.title == "NodeDiskFull"
    assert "and 2 more alert(s)" in incident.timeline.get(kind="opened").text
    assert set(ReceivedAlert.objects.values_list("incident", flat=True)) == {incident.pk}


@pytest.mark.django_db
def test_each_group_and_each_category_of_a_group_has_its_own_incident(client):
    on_n1 = [alert("NodeDiskFull", node="n1"), alert("GPUTemperatureHigh", node="n1")]
    deliver(client, webhook(*on_n1, group_key="{}:{node=n1}"))
    deliver(client, webhook(alert("NodeDiskFull", node="n2"), group_key="{}:{node=n2}"))
    incidents = Incident.objects.order_by("category", "dedup_key")
    assert [i.category for i in incidents] == ["gpu.thermal", "other", "other"]
    assert len({i.dedup_key for i in incidents}) == 3


@pytest.mark.django_db
def test_a_group_s_title_names_what_its_alerts_share_or_what_the_group_is_by(client):
    payload = webhook(
        alert("NodeDiskFull", node="n1", instance="n1:9100"), alert("NodeFilesystemFull", instance="n1:9100")
    )
    payload["groupLabels"] = {"team": "storage"}
    deliver(client, payload)
    assert Incident.objects.get().title == "Alertmanager alert on n1:9100"
    payload = webhook(alert("NodeDiskFull", instance="n2:9100"), alert("NodeDiskFull", instance="n3:9100"))
    payload["groupKey"], payload["groupLabels"] = "{}:{alertname=NodeDiskFull}", {"alertname": "NodeDiskFull"}
    deliver(client, payload)
    assert Incident.objects.filter(title="NodeDiskFull").exists()


@pytest.mark.django_db
def test_alerts_from_a_sender_that_names_no_group_open_one_incident_per_fault(client):
    deliver(client, webhook(alert(node="n1"), alert(node="n2"), group_key=""))
    keys = set(Incident.objects.values_list("dedup_key", flat=True))
    assert keys == {"am:NodeDiskFull:node=n1", "am:NodeDiskFull:node=n2"}


@pytest.mark.django_db
def test_alerts_of_one_payload_on_the_same_instance_and_category_share_one_incident(client):
    instance = make_instance(make_host(), base_url="http://10.0.0.7:8000")
    payload = webhook(
        alert("VLLMHighErrorRate", instance="10.0.0.7:8000", job="vllm"),
        alert("VLLMHighErrorRate", instance="10.0.0.7:8000", job="vllm-federated"),
    )
    assert deliver(client, payload)["incidents_opened"] == 1
    incident = Incident.objects.get()
    assert incident.category == "server.5xx" and list(incident.instances.all()) == [instance]
    assert incident.title == f"VLLMHighErrorRate on {instance.name}"
    assert "and 1 more alert(s)" in incident.timeline.get(kind="opened").text
    assert set(ReceivedAlert.objects.values_list("incident", flat=True)) == {incident.pk}


@pytest.mark.django_db
def test_a_resolved_alert_leaves_the_incident_open_while_another_of_its_alerts_still_fires(client):
    make_instance(make_host(), base_url="http://10.0.0.7:8000")
    first = alert("VLLMHighErrorRate", instance="10.0.0.7:8000", job="a")
    second = alert("VLLMHighErrorRate", instance="10.0.0.7:8000", job="b")
    deliver(client, webhook(first, second))
    deliver(client, webhook({**first, "status": "resolved"}))
    assert Incident.objects.get().status == "open"
    deliver(client, webhook({**second, "status": "resolved"}))
    assert Incident.objects.get().status == "mitigated"


# --- joining the console's own incidents ---------------------------------------------------


def _console_opens_kv_pressure_incident(instance) -> Incident:
    """What the console's own alert rule does when the probes judge KV pressure for 2 min."""
    pressure = {"code": "kv.pressure", "category": "oom.kv_pressure", "severity": "degraded", "evidence": "x"}
    InstanceState.objects.update_or_create(
        instance=instance, defaults={"verdict": "degraded", "findings": [pressure]}
    )
    for i in range(6):
        at = T0 + timedelta(seconds=30 * i)
        MetricSample.objects.create(instance=instance, name="kv_cache_usage", value=0.97, ts=at)
        evaluate(now=at)
    return Incident.objects.get(source="rule")


@pytest.mark.django_db
def test_an_alert_on_an_inventory_instance_joins_the_console_s_incident_for_the_same_fault(client):
    instance = make_instance(make_host(), name="chat-a", base_url="http://127.0.0.1:8101")
    console_incident = _console_opens_kv_pressure_incident(instance)
    payload = webhook(alert("VLLMKVCacheNearFull", instance="127.0.0.1:8101", job="vllm"))
    assert deliver(client, payload)["incidents_opened"] == 0
    assert Incident.objects.get() == console_incident
    assert ReceivedAlert.objects.get().incident == console_incident
    joined = console_incident.timeline.get(kind="alert_fired")
    assert joined.text.startswith("Alertmanager: VLLMKVCacheNearFull firing.")
    assert joined.data["alerts"][0]["labels"]["instance"] == "127.0.0.1:8101"


@pytest.mark.django_db
def test_a_vllm_instance_label_names_the_inventory_instance_and_a_category_label_the_fault(client):
    instance = make_instance(make_host(), name="chat-b", base_url="http://gpu-7.internal:8000")
    console_incident = _console_opens_kv_pressure_incident(instance)
    payload = webhook(alert("SomeTeamsKvAlert", vllm_instance="chat-b", category="oom.kv_pressure"))
    deliver(client, payload)
    assert Incident.objects.get() == console_incident


@pytest.mark.django_db
def test_a_resolved_prometheus_alert_mitigates_the_console_s_incident(client):
    instance = make_instance(make_host(), name="chat-c", base_url="http://127.0.0.1:8102")
    console_incident = _console_opens_kv_pressure_incident(instance)
    deliver(client, webhook(alert("VLLMGPUCacheNearFull", status="resolved", llm_instance="chat-c")))
    console_incident.refresh_from_db()
    assert console_incident.status == "mitigated"
    assert console_incident.timeline.filter(kind="alert_resolved").count() == 1


@pytest.mark.django_db
def test_an_alert_on_an_instance_in_a_maintenance_window_opens_nothing_until_the_window_ends(client):
    instance = make_instance(make_host(), base_url="http://10.0.0.8:8000")
    now = datetime.now(UTC)
    window = MaintenanceWindow.objects.create(
        name="driver upgrade",
        instance=instance,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(hours=1),
    )
    payload = webhook(alert("VLLMServiceDown", instance="10.0.0.8:8000"))
    assert deliver(client, payload) == {"received": 1, "new": 1, "incidents_opened": 0, "silenced": 1}
    assert not Incident.objects.exists() and ReceivedAlert.objects.get().incident is None
    window.delete()
    assert deliver(client, payload)["incidents_opened"] == 1  # still firing when the window is over
    assert Incident.objects.get().category == "process.not_started"


@pytest.mark.parametrize(
    ("labels", "category"),
    [
        ({"alertname": "VLLMHighTTFT", "category": "cuda.xid"}, "cuda.xid"),
        ({"alertname": "VLLMHighTTFT", "category": "not-a-category"}, "timeout.ttft"),
        ({"alertname": "VLLMGPUCacheNearFull"}, "oom.kv_pressure"),
        ({"alertname": "VLLMQueueBacklog"}, "rate_limit.queue"),
        ({"alertname": "GPUTemperatureHigh"}, "gpu.thermal"),
        ({"alertname": "VLLMHighLatency"}, "timeout.tps"),
        ({"alertname": "NodeDiskFull"}, "other"),
    ],
)
def test_the_category_comes_from_a_taxonomy_label_then_the_guide_s_alertnames_else_other(labels, category):
    assert alertmanager.category_for(labels=labels) == category


@pytest.mark.parametrize(
    ("severity", "expected"),
    [("critical", "critical"), ("warning", "major"), ("info", "info"), ("page", "major"), ("", "major")],
)
def test_prometheus_severities_map_onto_the_console_s(severity, expected):
    assert alertmanager.severity_for(labels={"severity": severity}) == expected


def test_a_key_too_long_for_the_incident_is_hashed_but_stays_stable():
    labels = {"alertname": "NodeDiskFull", "mountpoint": "/" + "x" * 300}
    key = alertmanager.key_for(labels=labels, category="other", instance=None)
    assert len(key) <= 200 and key.startswith("am:NodeDiskFull:sha256:")
    assert key == alertmanager.key_for(labels=dict(labels), category="other", instance=None)


# --- refusals ------------------------------------------------------------------------------


def _without(data: dict, key: str) -> dict:
    return {k: v for k, v in data.items() if k != key}


MALFORMED = {
    "not JSON": ("{not json", "body"),
    "not an object": ("[1, 2]", "body"),
    "wrong version": ({**webhook(alert()), "version": "3"}, "version"),
    "no version": (_without(webhook(alert()), "version"), "version"),
    "missing alerts": (_without(webhook(alert()), "alerts"), "alerts"),
    "alerts not a list": ({**webhook(alert()), "alerts": {"a": 1}}, "alerts"),
    "an alert not an object": (webhook("firing"), "alerts[0]"),
    "bad status": (webhook({**alert(), "status": "pending"}), "alerts[0].status"),
    "no labels": (webhook(_without(alert(), "labels")), "alerts[0].labels"),
    "labels not an object": (webhook({**alert(), "labels": ["a"]}), "alerts[0].labels"),
    "a label value not a string": (
        webhook({**alert(), "labels": {"alertname": "X", "gpu": 3}}),
        "alerts[0].labels.gpu",
    ),
    "annotations not strings": (
        webhook({**alert(), "annotations": {"runbook": None}}),
        "alerts[0].annotations.runbook",
    ),
    "no startsAt": (webhook(_without(alert(), "startsAt")), "alerts[0].startsAt"),
    "bad startsAt": (webhook({**alert(), "startsAt": "yesterday"}), "alerts[0].startsAt"),
    "startsAt without offset": (
        webhook({**alert(), "startsAt": "2026-12-03T02:58:00"}),
        "alerts[0].startsAt",
    ),
    "bad endsAt": (webhook(alert(), {**alert(node="n2"), "endsAt": 1733194680}), "alerts[1].endsAt"),
    "fingerprint too long": (webhook({**alert(), "fingerprint": "f" * 65}), "alerts[0].fingerprint"),
    "commonLabels not strings": ({**webhook(alert()), "commonLabels": {"a": 1}}, "commonLabels.a"),
    "truncatedAlerts negative": ({**webhook(alert()), "truncatedAlerts": -1}, "truncatedAlerts"),
    # what neither database could store, refused rather than retried for ever
    "a NUL in a label": (webhook(alert(node="n\u0000")), "alerts[0].labels.node"),
    "a lone surrogate in an annotation": (
        webhook({**alert(), "annotations": {"summary": "\ud800"}}),
        "alerts[0].annotations.summary",
    ),
    "a NUL in the receiver": ({**webhook(alert()), "receiver": "ops\u0000"}, "receiver"),
    "startsAt beyond UTC's years": (
        webhook({**alert(), "startsAt": "9999-12-31T23:00:00-05:00"}),
        "alerts[0].startsAt",
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_payload_is_refused_with_400_naming_the_field(client, case):
    payload, field = MALFORMED[case]
    response = post(client, payload)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field and response.json()["error"].startswith(field)
    assert not AlertDelivery.objects.exists()


@pytest.mark.django_db
def test_a_payload_over_5_mb_is_refused_with_413(client):
    payload = webhook(alert(node="n1"))
    payload["commonAnnotations"] = {"padding": "x" * alertmanager_payload.MAX_BODY_BYTES}
    response = post(client, payload)
    assert response.status_code == 413 and "larger than" in response.json()["error"]
    assert not AlertDelivery.objects.exists()


@pytest.mark.django_db
def test_a_payload_under_5_mb_but_over_django_s_form_limit_is_accepted(client, settings):
    payload = webhook(alert(node="n1"))
    payload["commonAnnotations"] = {"padding": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1000)}
    assert post(client, payload).status_code == 200


@pytest.mark.django_db
def test_without_a_configured_token_it_answers_503_saying_how_to_configure_it(client, settings):
    settings.ALERTMANAGER_TOKEN = ""
    response = post(client, webhook(alert()))
    assert response.status_code == 503 and "ALERTMANAGER_TOKEN" in response.json()["error"]
    assert not AlertDelivery.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer", f"{TOKEN}"]
)
def test_a_missing_or_wrong_token_is_refused_with_401(client, authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization is not None else {}
    response = client.post(URL, json.dumps(webhook(alert())), content_type="application/json", **headers)
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert not AlertDelivery.objects.exists()


@pytest.mark.django_db
def test_it_needs_no_csrf_token_being_a_machine_endpoint():
    client = Client(enforce_csrf_checks=True)
    assert post(client, webhook(alert())).status_code == 200


@pytest.mark.django_db
def test_only_post_is_allowed(client):
    assert client.get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


# --- bursts --------------------------------------------------------------------------------


@pytest.mark.embedded
@pytest.mark.django_db
def test_a_burst_of_1000_alerts_in_one_payload_is_processed_whole_into_one_incident_for_its_group(
    client, django_assert_max_num_queries
):
    alerts = [alert("NodeDiskFull", node=f"n{i // 10}", device=f"sd{i % 10}") for i in range(1000)]
    with django_assert_max_num_queries(12_000):
        outcome = deliver(client, webhook(*alerts))
    assert outcome == {"received": 1000, "new": 1000, "incidents_opened": 1, "silenced": 0}
    assert ReceivedAlert.objects.count() == 1000
    assert ReceivedAlert.objects.filter(incident__isnull=True).count() == 0
    assert Incident.objects.count() == 1
    again = deliver(client, webhook(*alerts))
    assert again == {"received": 1000, "new": 0, "incidents_opened": 0, "silenced": 0}
    assert set(ReceivedAlert.objects.values_list("times_received", flat=True)) == {2}
