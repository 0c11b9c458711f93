"""Notifications about incidents to webhooks. queue() records a delivery per enabled target,
with its body as of the event, and hands it to a worker; the sending itself (with retries)
lives in incidents/delivery.py."""

from __future__ import annotations

import logging

from django.db import transaction

SEVERITY_ORDER = ("info", "minor", "major", "critical")

log = logging.getLogger(__name__)


def queue(*, incident_id: int, event: str) -> list[int]:
    """Record a pending delivery for every enabled target whose minimum severity the incident
    meets, and enqueue their sending once the deliveries are committed; returns their ids."""
    from incidents.delivery import payload
    from incidents.models import Incident, NotificationDelivery, NotificationTarget, Source

    incident = Incident.objects.get(pk=incident_id)
    if incident.source == Source.DRILL:  # a game day pages nobody
        return []
    rank = SEVERITY_ORDER.index(incident.severity)
    ids = []
    for target in NotificationTarget.objects.filter(enabled=True).order_by("pk"):
        if rank < SEVERITY_ORDER.index(target.min_severity):
            continue
        body = payload(target=target, incident=incident, event=event)
        delivery = NotificationDelivery.objects.create(
            target=target, incident=incident, event=event, payload=body
        )
        ids.append(delivery.pk)
    if ids:
        transaction.on_commit(lambda: _enqueue(ids))
    return ids


def _enqueue(delivery_ids: list[int]) -> None:
    from kombu.exceptions import OperationalError

    from incidents.tasks import send_delivery

    for delivery_id in delivery_ids:
        try:
            send_delivery.delay(delivery_id=delivery_id)
        except OperationalError:  # the broker is down: the delivery stays pending, on record
            log.exception("Could not enqueue notification delivery %s", delivery_id)
