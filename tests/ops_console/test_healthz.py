"""/healthz: no login, database and broker reachability as JSON, 503 when either is down."""

import time

import pytest
from django.urls import reverse

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def test_it_reports_the_database_and_broker_without_login(client):
    response = client.get(reverse("healthz"))
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]
    assert body["checks"]["database"]["latency_ms"] >= 0


def test_it_answers_503_quickly_when_the_broker_is_unreachable(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    started = time.monotonic()
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    broker = response.json()["checks"]["broker"]
    assert broker["ok"] is False and "Error" in broker["detail"]
    assert time.monotonic() - started < 15


def test_it_says_when_no_worker_has_sent_a_heartbeat_yet(client):
    worker = client.get(reverse("healthz")).json()["checks"]["worker"]
    assert worker == {"ok": False, "detail": "no heartbeat yet", "last_beat": None}


def test_it_never_shows_a_broker_password(client, settings):
    settings.CELERY_BROKER_URL = "redis://:s3cret-pass@127.0.0.1:1/0"
    assert "s3cret-pass" not in client.get(reverse("healthz")).content.decode()
