"""Alertmanager's webhook deliveries: each payload kept whole in one write, then processed.

The receiver does as little as it can before it answers: accept() stores the checked payload
in one row (tried again while SQLite stays locked or the database is away; DatabaseBusy
after a few attempts, which the view answers with 503, and Alertmanager sends it again) and
queues its processing when that row commits. A worker's process() turns the row into
received alerts and incidents (alertmanager.receive, idempotent by fingerprint), once: the
row is locked while it is processed (skip_locked on PostgreSQL; on SQLite every write
transaction is IMMEDIATE, so processing is serial anyway) and marked processed in the same
transaction. The task takes the other deliveries waiting with its own (process_waiting). A
failure is written on the row, which stays unprocessed; sweep(), run by beat, takes whatever
is still unprocessed (the broker was away, a worker died, processing failed) in arrival order.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from enum import Enum

from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from incidents import alertmanager, alertmanager_payload
from incidents.alertmanager_payload import WebhookSpec
from incidents.models import AlertDelivery

log = logging.getLogger("incidents")

STORE_ATTEMPTS = 3
STORE_BACKOFF_S = 0.25  # then twice as long
# The on-commit task normally processes a delivery within a second; the sweep leaves fresh
# ones to it rather than queue behind its lock.
SWEEP_AFTER = timedelta(seconds=30)
SWEEP_LIMIT = 500
WAITING_LIMIT = 200
# Processed deliveries are kept this long for the admin, then pruned by the sweep.
KEEP_PROCESSED = timedelta(days=7)
MAX_ERROR_CHARS = 2000


class DatabaseBusy(Exception):
    """The delivery could not be stored: the database stayed locked (or away) through every
    attempt. Nothing was kept; the sender should try again."""


class Result(Enum):
    PROCESSED = "processed"
    SKIPPED = "skipped"  # processed already, or another worker is processing it
    FAILED = "failed"


def accept(*, body: bytes, webhook: WebhookSpec, at: datetime) -> AlertDelivery:
    """Store a checked payload in one write and queue its processing on commit. On SQLite a
    write waits for the lock (the busy timeout); should it still find the database locked,
    it is tried again, STORE_ATTEMPTS times in all, then DatabaseBusy."""
    for attempt in range(1, STORE_ATTEMPTS):
        try:
            return _store(body, webhook, at)
        except (OperationalError, InterfaceError) as exc:
            log.warning("could not store an Alertmanager delivery (attempt %s): %s", attempt, exc)
            time.sleep(STORE_BACKOFF_S * 2 ** (attempt - 1))
            _reconnect_if_lost()
    try:
        return _store(body, webhook, at)
    except (OperationalError, InterfaceError) as exc:
        raise DatabaseBusy(str(exc)) from exc


def _reconnect_if_lost() -> None:
    """A persistent connection the server dropped (a restart, a failover) fails every query
    after; closed here, the next attempt opens a new one. (SQLite's is always usable.)"""
    if connection.connection is not None and not connection.is_usable():
        connection.close()


def _store(body: bytes, webhook: WebhookSpec, at: datetime) -> AlertDelivery:
    with transaction.atomic():
        delivery = AlertDelivery.objects.create(
            body=body, group_key=webhook.group_key, alert_count=len(webhook.alerts), received_at=at
        )
        # robust: with the broker away the delivery is still kept, and the sweep processes it
        transaction.on_commit(lambda: _queue(delivery.pk), robust=True)
    return delivery


def _queue(delivery_id: int) -> None:
    from incidents.tasks import process_alert_delivery

    process_alert_delivery.delay(delivery_id=delivery_id)


def process_waiting(*, delivery_id: int, limit: int = WAITING_LIMIT) -> Result:
    """Process this delivery together with the others waiting for their first try, oldest
    first (their own tasks then find them processed). A broker that hands each worker one
    message at a time, as the filesystem transport does once a second, would otherwise
    process a burst of deliveries one per poll. The result is this delivery's."""
    waiting = AlertDelivery.objects.unprocessed().filter(attempts=0).values_list("pk", flat=True)[:limit]
    results = {pk: process(delivery_id=pk) for pk in waiting}
    return results.get(delivery_id) or process(delivery_id=delivery_id)


def process(*, delivery_id: int) -> Result:
    """Turn one stored delivery into received alerts and incidents, unless it is processed
    already or being processed. A failure is recorded on the row, which stays unprocessed."""
    try:
        with transaction.atomic():
            delivery = (
                AlertDelivery.objects.select_for_update(skip_locked=True)
                .filter(pk=delivery_id, processed_at__isnull=True)
                .first()
            )
            if delivery is None:
                return Result.SKIPPED
            webhook = alertmanager_payload.parse(body=bytes(delivery.body))
            outcome = alertmanager.receive(webhook=webhook, at=delivery.received_at)
            now = timezone.now()
            delivery.processed_at = delivery.last_attempt_at = now
            delivery.attempts += 1
            delivery.outcome = outcome.as_dict()
            delivery.save(update_fields=["processed_at", "last_attempt_at", "attempts", "outcome"])
        return Result.PROCESSED
    except Exception as exc:  # written on the row: the sweep tries again
        log.exception("could not process Alertmanager delivery %s", delivery_id)
        _record_failure(delivery_id, exc)
        return Result.FAILED


def _record_failure(delivery_id: int, exc: Exception) -> None:
    error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
    try:
        AlertDelivery.objects.filter(pk=delivery_id, processed_at__isnull=True).update(
            attempts=F("attempts") + 1, last_attempt_at=timezone.now(), last_error=error
        )
    except DatabaseError:  # the database itself is away: the row stays unprocessed all the same
        log.exception("could not record the failure of Alertmanager delivery %s", delivery_id)


def sweep(*, now: datetime | None = None, limit: int = SWEEP_LIMIT) -> int:
    """Process the deliveries still unprocessed SWEEP_AFTER after they arrived, oldest first,
    and prune processed ones older than KEEP_PROCESSED. Returns how many it processed."""
    now = now or timezone.now()
    due = AlertDelivery.objects.unprocessed().filter(received_at__lte=now - SWEEP_AFTER)
    processed = sum(
        process(delivery_id=pk) == Result.PROCESSED for pk in due.values_list("pk", flat=True)[:limit]
    )
    AlertDelivery.objects.filter(processed_at__lt=now - KEEP_PROCESSED).delete()
    return processed
