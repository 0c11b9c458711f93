"""Notifications about incidents to webhooks. queue() records a delivery per enabled target
and hands it to a worker; the sending itself (with retries) lives in incidents/delivery.py."""

from __future__ import annotations

SEVERITY_ORDER = ("info", "minor", "major", "critical")


def queue(*, incident_id: int, event: str) -> list[int]:
    """Record a pending delivery for every enabled target whose minimum severity the incident
    meets, and enqueue their sending; returns the delivery ids."""
    from incidents.models import Incident, NotificationDelivery, NotificationTarget

    incident = Incident.objects.get(pk=incident_id)
    rank = SEVERITY_ORDER.index(incident.severity)
    ids = []
    for target in NotificationTarget.objects.filter(enabled=True):
        if rank < SEVERITY_ORDER.index(target.min_severity):
            continue
        delivery = NotificationDelivery.objects.create(target=target, incident=incident, event=event)
        ids.append(delivery.pk)
    if ids:
        from incidents.tasks import send_delivery

        for delivery_id in ids:
            send_delivery.delay(delivery_id=delivery_id)
    return ids
