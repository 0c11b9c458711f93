"""Notifications about incidents, sent to a real local HTTP server: a generic JSON body or a
Slack-compatible one, retried with backoff by the worker task while the target fails, marked
failed after the last attempt, and sent by a real Celery worker when an incident opens."""

from __future__ import annotations

import json
import socket
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from incidents import delivery, lifecycle, notify
from incidents.models import Incident, NotificationDelivery, NotificationTarget, Source
from incidents.tasks import send_delivery
from tests.conftest import wait_for

T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)


class Handler(BaseHTTPRequestHandler):
    """Answers `server.fail_code` to the first `server.fail_first` requests, then 200."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.received.append(body)
            failing = len(self.server.received) <= self.server.fail_first
        code = self.server.fail_code if failing else 200
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"try again later" if failing else b"ok")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def webhook_server():
    """Start a local webhook receiver: start(fail_first=2, fail_code=500) -> its URL and record."""
    servers = []

    def start(*, fail_first: int = 0, fail_code: int = 500) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.received, server.lock = [], threading.Lock()
        server.fail_first, server.fail_code = fail_first, fail_code
        server.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def make_incident(**fields) -> Incident:
    values = {
        "title": "KV cache full on chat-a",
        "category": "oom.kv_pressure",
        "severity": "critical",
        "source": Source.ALERTMANAGER,
        "started_at": T0,
    }
    return Incident.objects.create(**{**values, **fields})


def make_delivery(
    url: str, *, kind: str = "webhook", event: str = "opened", **incident
) -> NotificationDelivery:
    target = NotificationTarget.objects.create(name=f"{kind}-{url}", kind=kind, url=url)
    return NotificationDelivery.objects.create(target=target, incident=make_incident(**incident), event=event)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/hook"


# --- bodies ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_generic_body_carries_the_event_and_the_incident_with_its_link(settings):
    settings.CONSOLE_URL = "https://ops.example.com/"
    incident = make_incident()
    target = NotificationTarget(name="pager", kind="webhook", url="https://hooks.example.com/x")
    assert delivery.payload(target=target, incident=incident, event="opened") == {
        "event": "opened",
        "incident": {
            "id": incident.pk,
            "title": "KV cache full on chat-a",
            "category": "oom.kv_pressure",
            "severity": "critical",
            "status": "open",
            "started_at": "2026-12-03T03:00:00+00:00",
            "url": f"https://ops.example.com/incidents/{incident.pk}/",
            "acknowledge_url": f"https://ops.example.com/incidents/{incident.pk}/acknowledge/",
        },
    }


@pytest.mark.django_db
def test_a_slack_body_has_text_for_notifications_and_blocks_with_a_link(settings):
    settings.CONSOLE_URL = "https://ops.example.com"
    incident = make_incident(title="5xx <burst> & more")
    target = NotificationTarget(name="chat", kind="slack", url="https://hooks.slack.com/services/x")
    body = delivery.payload(target=target, incident=incident, event="opened")
    assert body["text"] == "Incident opened: [critical] 5xx <burst> & more"
    header, section, context, acknowledge = body["blocks"]
    assert header["type"] == "header" and header["text"]["type"] == "plain_text"
    link = f"<https://ops.example.com/incidents/{incident.pk}/|5xx &lt;burst&gt; &amp; more>"
    assert section["text"] == {"type": "mrkdwn", "text": link}
    assert (
        "KV cache full" in context["elements"][0]["text"]
        and "*Severity:* critical" in context["elements"][0]["text"]
    )
    ack = f"<https://ops.example.com/incidents/{incident.pk}/acknowledge/|Acknowledge>"
    assert acknowledge["text"] == {"type": "mrkdwn", "text": ack}


@pytest.mark.django_db
def test_a_slack_body_offers_no_acknowledge_link_once_acknowledged_or_resolved(settings):
    settings.CONSOLE_URL = "https://ops.example.com"
    target = NotificationTarget(name="chat", kind="slack", url="https://hooks.slack.com/services/x")
    for incident in (make_incident(acknowledged_at=T0), make_incident(status="resolved", resolved_at=T0)):
        body = delivery.payload(target=target, incident=incident, event="resolved")
        assert "acknowledge" not in json.dumps(body["blocks"])


# --- sending and retrying ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_delivery_is_retried_while_the_target_fails_and_ends_sent(webhook_server):
    server = webhook_server(fail_first=2)
    record = make_delivery(server.url)
    send_delivery.apply(kwargs={"delivery_id": record.pk})  # eager: the task's retries run at once
    record.refresh_from_db()
    assert record.status == "sent" and record.attempts == 3
    assert record.response_code == 200 and record.error == "" and record.sent_at is not None
    assert len(server.received) == 3 and all(body == record.payload for body in server.received)
    assert server.received[0]["incident"]["id"] == record.incident_id
    entry = record.incident.timeline.get(kind="notification")
    assert entry.text == f"Notified {record.target.name} (opened)."


@pytest.mark.django_db
def test_sending_step_by_step_records_each_failed_attempt(webhook_server):
    server = webhook_server(fail_first=2, fail_code=503)
    record = make_delivery(server.url)
    outcomes = []
    for _ in range(3):
        outcomes.append(delivery.send(delivery_id=record.pk))
        record.refresh_from_db()
        if outcomes[-1] == "retry":
            assert record.status == "pending" and record.response_code == 503
            assert record.error == "HTTP 503: try again later"
    assert outcomes == ["retry", "retry", "sent"] and record.attempts == 3


@pytest.mark.django_db
def test_a_delivery_is_marked_failed_after_five_attempts(webhook_server):
    server = webhook_server(fail_first=100)
    record = make_delivery(server.url)
    send_delivery.apply(kwargs={"delivery_id": record.pk})
    record.refresh_from_db()
    assert record.status == "failed" and record.attempts == delivery.MAX_ATTEMPTS == 5
    assert len(server.received) == 5 and record.response_code == 500
    entry = record.incident.timeline.get(kind="notification")
    assert "failed after 5 attempt(s): HTTP 500" in entry.text


@pytest.mark.django_db
def test_a_target_that_refuses_for_good_is_not_retried(webhook_server):
    server = webhook_server(fail_first=100, fail_code=404)
    record = make_delivery(server.url, kind="slack")
    send_delivery.apply(kwargs={"delivery_id": record.pk})
    record.refresh_from_db()
    assert record.status == "failed" and record.attempts == 1 and record.response_code == 404
    assert set(server.received[0]) == {"text", "blocks"}


@pytest.mark.django_db
def test_an_unreachable_target_records_the_error_and_is_retried():
    record = make_delivery(closed_port_url())
    assert delivery.send(delivery_id=record.pk) == "retry"
    record.refresh_from_db()
    assert record.status == "pending" and record.attempts == 1
    assert record.response_code is None and record.error.startswith("ConnectError")


@pytest.mark.django_db
def test_a_sent_delivery_is_not_sent_again(webhook_server):
    server = webhook_server()
    record = make_delivery(server.url)
    assert delivery.send(delivery_id=record.pk) == "sent"
    assert delivery.send(delivery_id=record.pk) == "sent"
    assert len(server.received) == 1 and NotificationDelivery.objects.get().attempts == 1


@pytest.mark.django_db
def test_a_target_disabled_before_sending_fails_its_delivery_without_a_request(webhook_server):
    server = webhook_server()
    record = make_delivery(server.url)
    NotificationTarget.objects.update(enabled=False)
    assert delivery.send(delivery_id=record.pk) == "failed"
    assert server.received == [] and "disabled" in NotificationDelivery.objects.get().error


@pytest.mark.django_db
def test_two_workers_holding_one_delivery_cannot_both_claim_the_same_attempt(webhook_server):
    record = make_delivery(webhook_server().url)
    first, second = NotificationDelivery.objects.get(), NotificationDelivery.objects.get()
    assert delivery._claim(first) is True and delivery._claim(second) is False
    assert NotificationDelivery.objects.get().attempts == 1 and record.pk == first.pk


def test_the_task_s_retry_budget_matches_the_delivery_s_attempts():
    assert send_delivery.max_retries == delivery.MAX_ATTEMPTS - 1


@pytest.mark.django_db
def test_only_enabled_targets_whose_minimum_severity_the_incident_meets_are_queued(
    django_capture_on_commit_callbacks,
):
    incident = make_incident(severity="major")
    NotificationTarget.objects.create(name="all", url="https://a.example.com", min_severity="info")
    NotificationTarget.objects.create(name="pages", url="https://b.example.com", min_severity="critical")
    NotificationTarget.objects.create(
        name="off", url="https://c.example.com", min_severity="info", enabled=False
    )
    with django_capture_on_commit_callbacks() as callbacks:
        ids = notify.queue(incident_id=incident.pk, event="opened")
    queued = NotificationDelivery.objects.get(pk__in=ids)
    assert queued.target.name == "all" and queued.payload["incident"]["severity"] == "major"
    assert len(callbacks) == 1  # enqueued once committed, never before


# --- a real worker -----------------------------------------------------------------------------


@pytest.mark.embedded
@pytest.mark.django_db(transaction=True)
def test_opening_an_incident_queues_a_notification_that_a_real_worker_sends(
    webhook_server, settings, celery_worker_thread
):
    settings.NOTIFY_RETRY_BACKOFF_S = 0.1
    server = webhook_server(fail_first=2)
    NotificationTarget.objects.create(name="pager", kind="webhook", url=server.url, min_severity="major")
    incident, opened = lifecycle.open_or_join(
        key="am:VLLMServiceDown:instance=10.0.0.9:8000",
        title="VLLMServiceDown on 10.0.0.9:8000",
        category="process.not_started",
        severity="critical",
        source=Source.ALERTMANAGER,
        at=T0,
        text="Alertmanager: VLLMServiceDown firing.",
    )
    assert opened

    def sent() -> bool:
        return NotificationDelivery.objects.filter(incident=incident, status="sent").exists()

    assert wait_for(sent, 30), list(NotificationDelivery.objects.values("status", "attempts", "error"))
    record = NotificationDelivery.objects.get()
    assert record.attempts == 3 and record.response_code == 200 and len(server.received) == 3
    assert server.received[-1]["event"] == "opened" and server.received[-1]["incident"]["id"] == incident.pk
