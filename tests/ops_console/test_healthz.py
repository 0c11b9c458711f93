"""/healthz: no login, database and broker reachability as JSON, 503 when either is down,
within 3 s even when a server accepts connections and never answers. Hosts, ports and errors
only for staff."""

import socket
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from ops_console.models import WorkerHeartbeat
from tests.ops_console.test_settings import run_manage

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

# The promise: an answer within 3 s. A bound on a hang, not a speed measurement.
ANSWERS_WITHIN_S = 3.5

needs_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a silent server stands in for PostgreSQL only"
)


@pytest.fixture
def silent_port():
    """A hostile peer: a TCP server that accepts every connection and never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for peer in held:
        peer.close()
    server.close()


@pytest.fixture
def staff_client(client, cast):
    cast.admin.is_staff = True
    cast.admin.save()
    client.force_login(cast.admin)
    return client


def timed_get(client, url):
    started = time.monotonic()
    response = client.get(url)
    return response, time.monotonic() - started


def test_it_reports_the_database_and_broker_without_login(client):
    response = client.get(reverse("healthz"))
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]


def test_anonymous_callers_get_only_whether_each_part_is_up(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response.json() == {
        "status": "fail",
        "checks": {"database": {"ok": True}, "broker": {"ok": False}, "worker": {"ok": False}},
    }
    assert "127.0.0.1" not in response.content.decode()


def test_signed_in_users_below_admin_get_no_details_either(client, cast, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    client.force_login(cast.sre)
    body = client.get(reverse("healthz")).json()
    assert body["checks"]["broker"] == {"ok": False}


def test_staff_see_each_check_with_its_details(staff_client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = staff_client.get(reverse("healthz"))
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] and checks["database"]["detail"] == connection.vendor
    assert checks["database"]["latency_ms"] >= 0
    broker = checks["broker"]
    assert broker["ok"] is False and "Error" in broker["detail"] and "127.0.0.1" in broker["detail"]


def test_an_admin_without_the_staff_flag_sees_the_details_too(client, cast):
    client.force_login(cast.admin)
    assert client.get(reverse("healthz")).json()["checks"]["broker"]["detail"]


def test_it_answers_503_quickly_when_the_broker_is_unreachable(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response, took = timed_get(client, reverse("healthz"))
    assert response.status_code == 503 and response.json()["checks"]["broker"]["ok"] is False
    assert took < ANSWERS_WITHIN_S


def test_a_broker_that_accepts_and_never_answers_is_down_within_the_bound(
    staff_client, settings, silent_port
):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{silent_port}/0"
    response, took = timed_get(staff_client, reverse("healthz"))
    assert response.status_code == 503, response.json()
    broker = response.json()["checks"]["broker"]
    assert broker["ok"] is False and "imeout" in broker["detail"], broker
    assert took < ANSWERS_WITHIN_S


@needs_postgresql
def test_a_database_that_accepts_and_never_answers_is_down_within_the_bound(client, monkeypatch, silent_port):
    # Where the check connects; the test's own connection is already open and stays so.
    monkeypatch.setitem(connection.settings_dict, "HOST", "127.0.0.1")
    monkeypatch.setitem(connection.settings_dict, "PORT", str(silent_port))
    response, took = timed_get(client, reverse("healthz"))
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == {"ok": False}
    assert response.json()["checks"]["worker"] == {"ok": False}
    assert took < ANSWERS_WITHIN_S


@needs_postgresql
def test_while_the_database_is_down_even_staff_get_no_details(staff_client, monkeypatch, silent_port):
    # Telling staff from anyone else needs the database; the details go to the log instead.
    monkeypatch.setitem(connection.settings_dict, "PORT", str(silent_port))
    monkeypatch.setitem(connection.settings_dict, "HOST", "127.0.0.1")
    body = staff_client.get(reverse("healthz")).content.decode()
    assert "127.0.0.1" not in body and str(silent_port) not in body and "timeout" not in body.lower()


def test_it_says_when_no_worker_has_sent_a_heartbeat_yet(staff_client):
    worker = staff_client.get(reverse("healthz")).json()["checks"]["worker"]
    assert worker == {"ok": False, "detail": "no heartbeat yet", "last_beat": None}


def test_a_recent_heartbeat_shows_the_worker_up(staff_client):
    WorkerHeartbeat.objects.create(worker="worker-1", beat_at=timezone.now() - timedelta(seconds=20))
    worker = staff_client.get(reverse("healthz")).json()["checks"]["worker"]
    assert worker["ok"] and worker["detail"].startswith("worker-1, ")
    # The check reads in a transaction it rolls back (its statement timeout goes with it):
    # what was there before stays.
    assert WorkerHeartbeat.objects.get().worker == "worker-1"


def test_it_never_shows_a_broker_password(staff_client, settings):
    settings.CELERY_BROKER_URL = "redis://:s3cret-pass@127.0.0.1:1/0"
    assert "s3cret-pass" not in staff_client.get(reverse("healthz")).content.decode()


def database_options(tmp_path, **env):
    code = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'])"
    env = {"DATABASE_URL": "postgres://console@db.invalid:5432/console", **env}
    result = run_manage("shell", "--no-imports", "-c", code, env_overrides=env, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_apps_postgresql_connections_give_up_connecting_after_db_connect_timeout_s(tmp_path):
    assert database_options(tmp_path) == "{'connect_timeout': 5}"
    assert database_options(tmp_path, DB_CONNECT_TIMEOUT_S="12") == "{'connect_timeout': 12}"
