"""Reachability checks behind /healthz: database, broker, and the last worker heartbeat.

/healthz answers within 3 s even when a server accepts connections and never answers (a hung
database or broker would otherwise hold the request until the web server kills its worker):
the database and broker checks run side by side, each with its own connect and read
timeouts, and a check still running when the budget is spent counts as failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.utils import load_backend
from django.utils import timezone

from ops_console.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

BUDGET_S = 2.5  # all checks together, leaving room for the request itself within 3 s
CHECK_CONNECT_TIMEOUT_S = 2  # the database check's; libpq reads anything less as 2
STATEMENT_TIMEOUT_S = 1.0
BROKER_TIMEOUT_S = 1.0
HEARTBEAT_STALE_AFTER = timedelta(minutes=3)


@dataclass(frozen=True, kw_only=True)
class Check:
    ok: bool
    detail: str
    latency_ms: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Report:
    database: Check
    broker: Check
    worker: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.database.ok and self.broker.ok

    def as_dict(self, *, details: bool) -> dict:
        """With details: each check's host, address or error, for staff. Without: only whether
        each part is up, for anyone who can reach the URL."""
        checks = {"database": self.database.as_dict(), "broker": self.broker.as_dict(), "worker": self.worker}
        if not details:
            checks = {name: {"ok": check["ok"]} for name, check in checks.items()}
        return {"status": "ok" if self.ok else "fail", "checks": checks}


def run_checks(*, budget_s: float = BUDGET_S) -> Report:
    """All three checks within budget_s; failures are logged with their details."""
    deadline = time.monotonic() + budget_s
    database_settings, broker_url = dict(connection.settings_dict), settings.CELERY_BROKER_URL
    results = _side_by_side(
        {"database": lambda: check_database(database_settings), "broker": lambda: check_broker(broker_url)},
        deadline=deadline,
        budget_s=budget_s,
    )
    if results["database"].ok:
        worker = check_worker(within_s=deadline - time.monotonic())
    else:
        worker = {"ok": False, "detail": "database down", "last_beat": None}
    for name, check in results.items():
        if not check.ok:
            logger.warning("/healthz: the %s check failed: %s", name, check.detail)
    return Report(database=results["database"], broker=results["broker"], worker=worker)


def _side_by_side(
    calls: dict[str, Callable[[], Check]], *, deadline: float, budget_s: float
) -> dict[str, Check]:
    """Each call in a thread of its own. A call still running at the deadline counts as failed;
    its thread ends later, by its own timeouts."""
    results: dict[str, Check] = {}

    def run(name: str, call: Callable[[], Check]) -> None:
        results[name] = call()

    threads = [
        threading.Thread(target=run, args=item, name=f"healthz-{item[0]}", daemon=True)
        for item in calls.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    done = dict(results)
    late = Check(ok=False, detail=f"no answer within {budget_s:g} s")
    return {name: done.get(name, late) for name in calls}


def _timed(fn: Callable[[], str]) -> Check:
    started = time.perf_counter()
    try:
        detail = fn()
    except Exception as exc:  # reported, not raised: /healthz must always answer
        return Check(ok=False, detail=f"{type(exc).__name__}: {exc}")
    return Check(ok=True, detail=detail, latency_ms=round((time.perf_counter() - started) * 1000, 1))


def check_database(settings_dict: dict[str, Any] | None = None) -> Check:
    """SELECT 1 over a connection of its own (not the request's, which may be open to a server
    that stopped answering), with a short connect timeout and statement timeout."""
    params = dict(settings_dict or connection.settings_dict)
    wrapper = load_backend(params["ENGINE"]).DatabaseWrapper
    postgresql = wrapper.vendor == "postgresql"
    options = {key: value for key, value in params.get("OPTIONS", {}).items() if key != "pool"}
    params["OPTIONS"] = options | ({"connect_timeout": CHECK_CONNECT_TIMEOUT_S} if postgresql else {})

    def probe() -> str:
        database = wrapper(params)
        try:
            if postgresql:
                database.set_autocommit(False)
            with database.cursor() as cursor:
                if postgresql:
                    # SET LOCAL, not SET nor a startup option: the limit ends with this
                    # transaction, also behind a transaction pooler such as PgBouncer.
                    cursor.execute(f"SET LOCAL statement_timeout = {_ms(STATEMENT_TIMEOUT_S)}")
                cursor.execute("SELECT 1")
                cursor.fetchone()
            return database.vendor
        finally:
            database.close()  # the server rolls the transaction back

    return _timed(probe)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def check_broker(url: str | None = None) -> Check:
    from ops_console.celery import app

    # A Redis that accepts and never answers would otherwise hold the first PING forever.
    timeouts = {"socket_timeout": BROKER_TIMEOUT_S, "socket_connect_timeout": BROKER_TIMEOUT_S}

    def probe() -> str:
        with app.connection_for_write(
            url or settings.CELERY_BROKER_URL, connect_timeout=BROKER_TIMEOUT_S, transport_options=timeouts
        ) as conn:
            conn.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_S)  # no retry: no sleep
            return conn.as_uri()  # kombu masks any password

    return _timed(probe)


def check_worker(*, within_s: float = STATEMENT_TIMEOUT_S) -> dict:
    """Informational: how long ago a worker last ran the heartbeat task. Runs on the request's
    own connection (after check_database found the server answering), its query bounded by
    within_s on PostgreSQL."""
    if within_s <= 0.05:
        return {"ok": False, "detail": "no time left to read the heartbeat", "last_beat": None}
    try:
        latest = _latest_heartbeat(within_s)
    except Exception as exc:  # reported, not raised, as in _timed
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}", "last_beat": None}
    if latest is None:
        return {"ok": False, "detail": "no heartbeat yet", "last_beat": None}
    age = timezone.now() - latest.beat_at
    return {
        "ok": age <= HEARTBEAT_STALE_AFTER,
        "detail": f"{latest.worker}, {int(age.total_seconds())} s ago",
        "last_beat": latest.beat_at.isoformat(),
    }


def _latest_heartbeat(within_s: float) -> WorkerHeartbeat | None:
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {_ms(within_s)}")
        latest = WorkerHeartbeat.objects.order_by("-beat_at").first()
        transaction.set_rollback(True)  # nothing was written; the rollback takes the SET LOCAL back
    return latest
