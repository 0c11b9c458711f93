"""Alertmanager's deliveries are never lost: the receiver stores each payload in one write and
answers at once (503 with Retry-After when the database stays locked, so Alertmanager sends
it again), a worker processes each delivery once, idempotent by fingerprint, and the sweep
processes whatever is left unprocessed, in arrival order, keeping each failure on its row."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from incidents import alert_deliveries
from incidents.alert_deliveries import Result
from incidents.alertmanager import key_for
from incidents.models import AlertDelivery, Incident, ReceivedAlert, TimelineEntry
from ops_console.schedules import sync_periodic_tasks
from tests.conftest import wait_for
from tests.factories import make_host, make_instance
from tests.incidents.test_alertmanager import TOKEN, URL, alert, post, webhook

ROOT = Path(__file__).resolve().parents[2]
LATER = timedelta(minutes=5)  # past the sweep's grace for fresh deliveries


@pytest.fixture(autouse=True)
def token(settings):
    settings.ALERTMANAGER_TOKEN = TOKEN


def _process_all() -> int:
    return alert_deliveries.sweep(now=timezone.now() + LATER)


def _state() -> dict:
    """What processing can change, to compare before and after."""
    return {
        "alerts": sorted(
            ReceivedAlert.objects.values_list("fingerprint", "status", "times_received", "incident")
        ),
        "incidents": sorted(Incident.objects.values_list("dedup_key", "status")),
        "timeline": TimelineEntry.objects.count(),
    }


# --- accepting ----------------------------------------------------------------------------


@contextlib.contextmanager
def _database_held_by_another_writer():
    """Another connection holds the lock the receiver's write needs (a long write transaction
    on SQLite; a table lock, as a migration takes, on PostgreSQL), and this connection waits
    for it only briefly, so the test need not sit out the real busy timeout."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        other = sqlite3.connect(db["NAME"], isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        wait, back = "PRAGMA busy_timeout = 50", f"PRAGMA busy_timeout = {db['OPTIONS']['timeout'] * 1000}"
    else:
        import psycopg

        keys = {"dbname": db["NAME"], "user": db["USER"], "password": db["PASSWORD"], "host": db["HOST"]}
        other = psycopg.connect(**{k: v for k, v in keys.items() if v}, port=db["PORT"] or None)
        other.execute("LOCK TABLE incidents_alertdelivery IN ACCESS EXCLUSIVE MODE")
        wait, back = "SET lock_timeout = '50ms'", "RESET lock_timeout"
    with connection.cursor() as cursor:
        cursor.execute(wait)
    try:
        yield
    finally:
        other.rollback()
        other.close()
        with connection.cursor() as cursor:
            cursor.execute(back)


@pytest.mark.embedded
@pytest.mark.django_db(transaction=True)
def test_while_the_database_stays_locked_it_answers_503_with_retry_after_and_stores_on_the_retry(client):
    payload = webhook(alert(node="n1"))
    with _database_held_by_another_writer():
        busy = post(client, payload)
    assert busy.status_code == 503 and busy["Retry-After"] == "5"
    assert "Send them again" in busy.json()["error"]
    assert not AlertDelivery.objects.exists()
    assert post(client, payload).status_code == 200  # as Alertmanager retries a 5xx
    assert AlertDelivery.objects.count() == 1


# --- processing ---------------------------------------------------------------------------


@pytest.mark.embedded
@pytest.mark.django_db
def test_a_payload_of_1000_alerts_opens_one_incident_per_group_and_category_not_1000(client):
    instance = make_instance(make_host(), base_url="http://10.0.3.1:8000")
    names = ["NodeDiskFull", "GPUTemperatureHigh", "VLLMHighTTFT"]  # other, gpu.thermal, timeout.ttft
    alerts = [alert(names[i % 3], node=f"n{i}") for i in range(900)]
    alerts += [alert("VLLMHighErrorRate", instance="10.0.3.1:8000", pod=f"p{i}") for i in range(100)]
    delivery_id = post(client, webhook(*alerts)).json()["delivery"]
    assert alert_deliveries.process(delivery_id=delivery_id) == Result.PROCESSED
    assert AlertDelivery.objects.get().outcome["incidents_opened"] == 4
    assert ReceivedAlert.objects.count() == 1000
    assert sorted(Incident.objects.values_list("category", flat=True)) == [
        "gpu.thermal", "other", "server.5xx", "timeout.ttft"
    ]  # fmt: skip
    assert Incident.objects.get(category="server.5xx").dedup_key == f"instance:{instance.pk}:server.5xx"
    assert not ReceivedAlert.objects.filter(incident__isnull=True).exists()


@pytest.mark.embedded
@pytest.mark.django_db
def test_a_delivery_processed_again_changes_nothing(client):
    delivery_id = post(client, webhook(alert(node="n1"), alert(node="n2"))).json()["delivery"]
    assert alert_deliveries.process(delivery_id=delivery_id) == Result.PROCESSED
    before = _state()
    assert alert_deliveries.process(delivery_id=delivery_id) == Result.SKIPPED
    assert _process_all() == 0
    assert _state() == before and AlertDelivery.objects.get().attempts == 1


@pytest.mark.embedded
@pytest.mark.django_db
def test_the_same_payload_delivered_again_opens_nothing_and_adds_nothing_to_the_timeline(client):
    payload = webhook(alert(node="n1"), alert(node="n2"))
    post(client, payload)
    post(client, payload)  # Alertmanager resends a group with each notification, or retried after a timeout
    assert _process_all() == 2
    assert Incident.objects.count() == 1 and TimelineEntry.objects.count() == 1
    assert list(ReceivedAlert.objects.values_list("times_received", flat=True)) == [2, 2]


@pytest.mark.embedded
@pytest.mark.django_db(transaction=True)
def test_one_delivery_processed_by_several_workers_at_once_is_processed_once(client):
    delivery_id = post(client, webhook(*(alert(node=f"n{i}") for i in range(50)))).json()["delivery"]
    start = threading.Barrier(4)

    def worker() -> Result:
        start.wait()
        try:
            return alert_deliveries.process(delivery_id=delivery_id)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = [f.result() for f in [pool.submit(worker) for _ in range(4)]]
    assert sorted(r.value for r in results) == ["processed", "skipped", "skipped", "skipped"]
    assert set(ReceivedAlert.objects.values_list("times_received", flat=True)) == {1}
    assert AlertDelivery.objects.get().attempts == 1 and TimelineEntry.objects.count() == 1


# --- failures and the sweep ---------------------------------------------------------------


@contextlib.contextmanager
def _timeline_table_away():
    """The database refuses processing halfway (after the alerts are written, as the incident
    opens): its timeline table is renamed away for a while."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE incidents_timelineentry RENAME TO incidents_timelineentry_away")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE incidents_timelineentry_away RENAME TO incidents_timelineentry")


@pytest.mark.embedded
@pytest.mark.django_db
def test_a_delivery_whose_processing_fails_is_kept_with_its_error_and_processed_by_the_sweep_later(client):
    delivery_id = post(client, webhook(alert(node="n1"), alert(node="n2"))).json()["delivery"]
    with _timeline_table_away():
        assert alert_deliveries.process(delivery_id=delivery_id) == Result.FAILED
        assert _process_all() == 0  # still failing: tried again, kept again
    failed = AlertDelivery.objects.get()
    assert failed.processed_at is None and failed.attempts == 2 and failed.last_attempt_at is not None
    assert "incidents_timelineentry" in failed.last_error
    assert not ReceivedAlert.objects.exists() and not Incident.objects.exists()  # taken whole or not at all
    assert _process_all() == 1
    done = AlertDelivery.objects.get()
    assert done.processed_at is not None and done.attempts == 3
    assert done.outcome == {"received": 2, "new": 2, "incidents_opened": 1, "silenced": 0}
    assert ReceivedAlert.objects.filter(incident=Incident.objects.get()).count() == 2


@pytest.mark.embedded
@pytest.mark.django_db
def test_deliveries_whose_task_never_ran_are_swept_in_arrival_order(client):
    # A test's own transaction never commits, so no on-commit task is sent: as with the
    # broker away when the deliveries arrived.
    post(client, webhook(alert(node="n1")))
    post(client, webhook(alert(node="n1", status="resolved")))
    assert alert_deliveries.sweep() == 0  # fresh: left to their tasks for now
    assert _process_all() == 2
    assert ReceivedAlert.objects.get().status == "resolved"
    incident = Incident.objects.get()
    assert incident.status == "mitigated"
    assert list(incident.timeline.values_list("kind", flat=True)) == ["opened", "alert_resolved", "status"]


@pytest.mark.embedded
@pytest.mark.django_db
def test_an_earlier_delivery_processed_after_a_later_one_does_not_undo_it(client):
    firing = post(client, webhook(alert(node="n1"))).json()["delivery"]
    resolved = post(client, webhook(alert(node="n1", status="resolved"))).json()["delivery"]
    assert alert_deliveries.process(delivery_id=resolved) == Result.PROCESSED
    assert alert_deliveries.process(delivery_id=firing) == Result.PROCESSED
    stored = ReceivedAlert.objects.get()
    assert stored.status == "resolved" and stored.times_received == 2  # counted, not undone
    assert not Incident.objects.exists()  # it fired and cleared before the console heard of it


@pytest.mark.embedded
@pytest.mark.django_db
def test_a_task_takes_the_deliveries_waiting_with_its_own_oldest_first_leaving_failed_ones_to_the_sweep(
    client,
):
    failed = post(client, webhook(alert(node="n0"))).json()["delivery"]
    with _timeline_table_away():
        assert alert_deliveries.process(delivery_id=failed) == Result.FAILED
    firing, resolved = (
        post(client, webhook(alert(node="n1", status=s))).json()["delivery"] for s in ("firing", "resolved")
    )
    assert alert_deliveries.process_waiting(delivery_id=resolved) == Result.PROCESSED
    assert list(AlertDelivery.objects.unprocessed().values_list("pk", flat=True)) == [failed]
    assert alert_deliveries.process_waiting(delivery_id=firing) == Result.SKIPPED  # its task comes too late
    incident = Incident.objects.get()
    assert incident.status == "mitigated" and ReceivedAlert.objects.get().times_received == 2


@pytest.mark.embedded
@pytest.mark.django_db
def test_the_sweep_prunes_processed_deliveries_after_a_week_and_keeps_unprocessed_ones(client):
    old, unprocessed = (post(client, webhook(alert(node=n))).json()["delivery"] for n in ("n1", "n2"))
    assert alert_deliveries.process(delivery_id=old) == Result.PROCESSED
    week_ago = timezone.now() - alert_deliveries.KEEP_PROCESSED - timedelta(hours=1)
    AlertDelivery.objects.filter(pk=old).update(received_at=week_ago, processed_at=week_ago)
    AlertDelivery.objects.filter(pk=unprocessed).update(received_at=week_ago)
    assert alert_deliveries.sweep() == 1
    assert list(AlertDelivery.objects.values_list("pk", flat=True)) == [unprocessed]


@pytest.mark.embedded
@pytest.mark.django_db
def test_beat_sweeps_the_deliveries_every_minute():
    entry = {t.name: t for t in sync_periodic_tasks()}["sweep alert deliveries"]
    assert entry.task == "incidents.sweep_alert_deliveries" and entry.interval.every == 60


@pytest.mark.django_db
def test_once_processed_the_alerts_show_on_the_incident_page_and_the_incident_list(viewer_client):
    payload = webhook(alert("NodeDiskFull", node="n-page"), alert("NodeDiskFull", node="n-other"))
    delivery_id = post(viewer_client, payload).json()["delivery"]
    assert "NodeDiskFull" not in viewer_client.get(reverse("incidents:index")).content.decode()
    alert_deliveries.process(delivery_id=delivery_id)
    incident = Incident.objects.get()
    assert "NodeDiskFull" in viewer_client.get(reverse("incidents:index")).content.decode()
    page = viewer_client.get(incident.get_absolute_url()).content.decode()
    assert "Alertmanager: NodeDiskFull firing and 1 more alert(s)." in page


@pytest.mark.django_db
def test_the_admin_lists_deliveries_and_shows_each_payload_read_only(client, admin_client):
    delivery_id = post(client, webhook(alert("NodeDiskFull", node="n-admin"))).json()["delivery"]
    listing = admin_client.get("/admin/incidents/alertdelivery/")
    assert listing.status_code == 200 and f"/admin/incidents/alertdelivery/{delivery_id}/" in listing.text
    page = admin_client.get(f"/admin/incidents/alertdelivery/{delivery_id}/change/")
    assert page.status_code == 200 and "n-admin" in page.text and 'name="_save"' not in page.text


# --- under load, through a real server and worker -----------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    login = quote(db["USER"]) + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    return f"postgres://{login}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def web_server(transactional_db):
    """gunicorn as the Procfile runs it (two processes of four threads) on the test's own
    database and broker: its base URL."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "OPS_VAR_DIR": str(settings.VAR_DIR),
        "ALERTMANAGER_TOKEN": TOKEN,
        "DB_CONN_MAX_AGE": "0",
    }
    gunicorn = Path(sys.executable).parent / "gunicorn"
    server = subprocess.Popen(
        [str(gunicorn), "ops_console.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
         "--threads", "4"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert server.poll() is None, server.stderr.read().decode()[-3000:]
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(url + URL, timeout=2).status_code == 405
        return False

    try:
        assert wait_for(up, timeout=60), "gunicorn did not start"
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def _send_as_alertmanager(url: str, payload: dict) -> list[int]:
    """POST like Alertmanager: a 5xx is sent again after a pause. The statuses, in order."""
    statuses = []
    for _ in range(10):
        response = httpx.post(
            url + URL, json=payload, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )
        statuses.append(response.status_code)
        if response.status_code < 500:
            break
        time.sleep(float(response.headers.get("Retry-After", "1")))
    return statuses


@pytest.mark.embedded
@pytest.mark.django_db(transaction=True)
def test_50_concurrent_payloads_through_a_real_server_and_worker_lose_no_alert(
    web_server, celery_worker_thread
):
    instances = [make_instance(make_host(), base_url=f"http://10.0.2.{n}:8000") for n in (1, 2)]
    shared = [alert("VLLMHighErrorRate", instance="10.0.2.1:8000", pod=f"shared-{i}") for i in range(2)]

    def payload(p: int) -> dict:
        # 16 alerts of the payload's own off the inventory, 2 of its own and 2 shared by all
        # payloads on inventory instances; five notification groups.
        own = [alert("NodeDiskFull", node=f"p{p}-n{i}") for i in range(16)]
        own += [
            alert("VLLMHighErrorRate", instance=f"10.0.2.{i + 1}:8000", pod=f"p{p}-{i}") for i in range(2)
        ]
        return webhook(*own, *shared, group_key=f'{{}}:{{team="t{p % 5}"}}')

    payloads = [payload(p) for p in range(50)]
    with ThreadPoolExecutor(max_workers=25) as pool:
        answers = list(pool.map(lambda p: _send_as_alertmanager(web_server, p), payloads))
    assert all(statuses[-1] == 200 and set(statuses) <= {200, 503} for statuses in answers), answers
    assert AlertDelivery.objects.count() == 50
    assert wait_for(lambda: not AlertDelivery.objects.unprocessed().exists(), timeout=180), list(
        AlertDelivery.objects.unprocessed().values_list("attempts", "last_error")
    )
    assert not AlertDelivery.objects.exclude(last_error="").exists()
    assert ReceivedAlert.objects.count() == 50 * 18 + 2  # each fingerprint once
    counts = dict(ReceivedAlert.objects.values_list("fingerprint", "times_received"))
    assert [counts.pop(a["fingerprint"]) for a in shared] == [50, 50]
    assert set(counts.values()) == {1}
    groups = {key_for(labels={}, category="other", instance=None, group_key=p["groupKey"]) for p in payloads}
    expected = groups | {f"instance:{i.pk}:server.5xx" for i in instances}
    assert set(Incident.objects.values_list("dedup_key", flat=True)) == expected and len(expected) == 7
    assert TimelineEntry.objects.filter(kind="opened").count() == 7
    assert not ReceivedAlert.objects.filter(incident__isnull=True).exists()
