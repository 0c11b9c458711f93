"""Reachability checks behind /healthz: database, broker, and the last worker heartbeat."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from ops_console.models import WorkerHeartbeat

BROKER_TIMEOUT_S = 2.0
HEARTBEAT_STALE_AFTER = timedelta(minutes=3)


@dataclass(frozen=True, kw_only=True)
class Check:
    ok: bool
    detail: str
    latency_ms: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _timed(fn) -> Check:
    started = time.perf_counter()
    try:
        detail = fn()
    except Exception as exc:  # reported, not raised: /healthz must always answer
        return Check(ok=False, detail=f"{type(exc).__name__}: {exc}")
    return Check(ok=True, detail=detail, latency_ms=round((time.perf_counter() - started) * 1000, 1))


def check_database() -> Check:
    def probe() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return connection.vendor

    return _timed(probe)


def check_broker(url: str | None = None) -> Check:
    from ops_console.celery import app

    def probe() -> str:
        with app.connection_for_write(url or settings.CELERY_BROKER_URL) as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_S)
            return conn.as_uri()  # kombu masks any password

    return _timed(probe)


def check_worker() -> dict:
    """Informational: how long ago a worker last ran the heartbeat task."""
    latest = WorkerHeartbeat.objects.order_by("-beat_at").first()
    if latest is None:
        return {"ok": False, "detail": "no heartbeat yet", "last_beat": None}
    age = timezone.now() - latest.beat_at
    return {
        "ok": age <= HEARTBEAT_STALE_AFTER,
        "detail": f"{latest.worker}, {int(age.total_seconds())} s ago",
        "last_beat": latest.beat_at.isoformat(),
    }
