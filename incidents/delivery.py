"""Sending a notification: a generic JSON body or a Slack-compatible one, recorded on its
delivery with the response code or the error. Placeholder until the notifications part of
the incidents issue lands: it sends once and records the outcome."""

from __future__ import annotations

import httpx
from django.utils import timezone

MAX_ATTEMPTS = 5


def payload(delivery) -> dict:  # noqa: ANN001
    incident = delivery.incident
    text = f"[{incident.severity}] {incident.title} ({incident.status})"
    if delivery.target.kind == "slack":
        return {"text": text}
    return {
        "event": delivery.event,
        "incident": {"id": incident.pk, "title": incident.title, "category": incident.category,
                     "severity": incident.severity, "status": incident.status,
                     "started_at": incident.started_at.isoformat()},
    }  # fmt: skip


def send(*, delivery_id: int) -> str:
    """'sent', 'failed' or 'retry'."""
    from incidents.models import NotificationDelivery

    delivery = NotificationDelivery.objects.select_related("target", "incident").get(pk=delivery_id)
    if delivery.status == NotificationDelivery.Status.SENT:
        return "sent"
    delivery.payload = payload(delivery)
    delivery.attempts += 1
    try:
        response = httpx.post(delivery.target.url, json=delivery.payload, timeout=10)
        delivery.response_code = response.status_code
        ok = response.status_code < 300
        delivery.error = "" if ok else response.text[:500]
    except httpx.HTTPError as exc:
        ok, delivery.error = False, f"{type(exc).__name__}: {exc}"[:500]
    if ok:
        delivery.status, delivery.sent_at = NotificationDelivery.Status.SENT, timezone.now()
    elif delivery.attempts >= MAX_ATTEMPTS:
        delivery.status = NotificationDelivery.Status.FAILED
    delivery.save()
    return "sent" if ok else ("failed" if delivery.status == NotificationDelivery.Status.FAILED else "retry")
