"""Sending a notification about an incident to a webhook: a generic JSON body or a
Slack-compatible one (one sink class per target kind), with links to the incident and to its
acknowledge page, recorded on its delivery with the response code or the error and the number
of attempts. The worker task retries with backoff (incidents/tasks.py); the delivery is marked
failed after MAX_ATTEMPTS, or at once when the target refuses it for good (a 4xx other than
408 and 429).

A notification is read by people who are not at the console, so its words are in one
language for all: settings.NOTIFICATION_LANGUAGE ("en" unless set; "zh-hans" for Chinese)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, override

from core.i18n import later
from incidents.models import (
    CATEGORY_CHOICES,
    Incident,
    NotificationDelivery,
    NotificationTarget,
    Status,
    TimelineEntry,
)

MAX_ATTEMPTS = 5
TIMEOUT_S = 10.0
RETRYABLE_CODES = frozenset({408, 425, 429})
SENT, FAILED, RETRY, SKIPPED = "sent", "failed", "retry", "skipped"
EVENT_WORDS = {"opened": gettext_lazy("Incident opened"), "resolved": gettext_lazy("Incident resolved")}


def language() -> str:
    """The language notifications are written in."""
    return getattr(settings, "NOTIFICATION_LANGUAGE", "en") or "en"


class Sink:
    """How one kind of target wants its body. Subclasses register themselves by kind."""

    kind: ClassVar[str]
    registry: ClassVar[dict[str, type[Sink]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Sink.registry[cls.kind] = cls

    def body(self, *, incident: Incident, event: str) -> dict[str, Any]:
        raise NotImplementedError


class WebhookSink(Sink):
    kind = NotificationTarget.Kind.WEBHOOK

    def body(self, *, incident: Incident, event: str) -> dict[str, Any]:
        return {
            "event": event,
            "incident": {
                "id": incident.pk,
                "title": incident.shown_title,
                "category": incident.category,
                "severity": incident.severity,
                "status": incident.status,
                "started_at": incident.started_at.isoformat(),
                "url": incident_url(incident),
                "acknowledge_url": acknowledge_url(incident),
            },
        }


class SlackSink(Sink):
    kind = NotificationTarget.Kind.SLACK

    def body(self, *, incident: Incident, event: str) -> dict[str, Any]:
        shown_title = incident.shown_title
        heading = gettext("%(event)s: [%(severity)s] %(title)s") % {
            "event": EVENT_WORDS.get(event, event),
            "severity": incident.get_severity_display(),
            "title": shown_title,
        }
        url = incident_url(incident)
        title = f"<{url}|{_escape(shown_title)}>" if url.startswith("http") else _escape(shown_title)
        details = gettext(
            "*Category:* %(category)s   *Severity:* %(severity)s   "
            "*Status:* %(status)s   *Started:* %(started)s"
        ) % {
            "category": _escape(str(dict(CATEGORY_CHOICES).get(incident.category, incident.category))),
            "severity": incident.get_severity_display(),
            "status": incident.get_status_display(),
            "started": f"{incident.started_at:%Y-%m-%d %H:%M %Z}",
        }
        blocks = [
            {"type": "header", "text": {"type": "plain_text", "text": heading[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": title}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": details}]},
        ]
        if _awaits_acknowledgement(incident):
            link = acknowledge_url(incident)
            word = gettext("Acknowledge")
            text = f"<{link}|{word}>" if link.startswith("http") else f"{word}: {link}"
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
        return {"text": heading, "blocks": blocks}  # text: what notifications and plain clients show


def _escape(text: str) -> str:
    """Slack's mrkdwn control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def incident_url(incident: Incident) -> str:
    """Absolute when CONSOLE_URL says where the console is served, else the path."""
    base = getattr(settings, "CONSOLE_URL", "").rstrip("/")
    return base + incident.get_absolute_url()


def acknowledge_url(incident: Incident) -> str:
    """The incident's acknowledge page (a confirm page: following the link changes nothing)."""
    base = getattr(settings, "CONSOLE_URL", "").rstrip("/")
    return base + reverse("incidents:acknowledge", args=[incident.pk])


def _awaits_acknowledgement(incident: Incident) -> bool:
    return incident.acknowledged_at is None and incident.status != Status.RESOLVED


def payload(*, target: NotificationTarget, incident: Incident, event: str) -> dict[str, Any]:
    """The body for `target`, in the notifications' language (NOTIFICATION_LANGUAGE)."""
    with override(language()):
        return Sink.registry[target.kind]().body(incident=incident, event=event)


@dataclass(frozen=True)
class Response:
    code: int | None
    error: str

    @property
    def ok(self) -> bool:
        return self.code is not None and 200 <= self.code < 300

    @property
    def retryable(self) -> bool:
        return self.code is None or self.code >= 500 or self.code in RETRYABLE_CODES


def post(*, url: str, body: dict[str, Any]) -> Response:
    try:
        response = httpx.post(url, json=body, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        return Response(None, f"{type(exc).__name__}: {exc}"[:500])
    error = "" if 200 <= response.status_code < 300 else f"HTTP {response.status_code}: {response.text}"
    return Response(response.status_code, error[:500])


def send(*, delivery_id: int) -> str:
    """One attempt at a delivery: 'sent', 'failed' (gave up), 'retry', or 'skipped' when it is
    no longer pending or another worker holds this attempt. No transaction stays open over
    the request (a slow target would hold SQLite's write lock): the attempt is claimed by a
    conditional update, so a duplicated task cannot send one notification twice at once."""
    delivery = (
        NotificationDelivery.objects.select_related("target", "incident").filter(pk=delivery_id).first()
    )
    if delivery is None or delivery.status != NotificationDelivery.Status.PENDING:
        return delivery.status if delivery else SKIPPED  # sent or failed before; or deleted with its incident
    if not _claim(delivery):
        return SKIPPED
    if delivery.target.enabled:
        response = post(url=delivery.target.url, body=delivery.payload)
    else:
        response = Response(None, "The target was disabled before the notification went out.")
    return _record(delivery, response)


def _claim(delivery: NotificationDelivery) -> bool:
    if not delivery.payload:
        delivery.payload = payload(target=delivery.target, incident=delivery.incident, event=delivery.event)
    claimed = NotificationDelivery.objects.filter(
        pk=delivery.pk, status=NotificationDelivery.Status.PENDING, attempts=delivery.attempts
    ).update(attempts=delivery.attempts + 1, payload=delivery.payload)
    delivery.attempts += 1
    return claimed == 1


def _record(delivery: NotificationDelivery, response: Response) -> str:
    delivery.response_code, delivery.error = response.code, response.error
    if response.ok:
        delivery.status, delivery.sent_at = NotificationDelivery.Status.SENT, timezone.now()
    elif delivery.attempts >= MAX_ATTEMPTS or not response.retryable or not delivery.target.enabled:
        delivery.status = NotificationDelivery.Status.FAILED
    delivery.save(update_fields=["status", "sent_at", "response_code", "error"])
    if delivery.status == NotificationDelivery.Status.PENDING:
        return RETRY
    _record_on_timeline(delivery)
    return delivery.status


def _record_on_timeline(delivery: NotificationDelivery) -> None:
    from incidents.lifecycle import entry_text
    from incidents.words import word

    values = {"target": delivery.target.name, "event": word(delivery.event)}  # opened, resolved
    if delivery.status == NotificationDelivery.Status.SENT:
        text = later("Notified %(target)s (%(event)s).", **values)
    else:
        text = later(
            "Notifying %(target)s (%(event)s) failed after %(attempts)s attempt(s): %(error)s",
            attempts=delivery.attempts,
            error=delivery.error,
            **values,
        )
    TimelineEntry.objects.create(
        incident=delivery.incident,
        kind=TimelineEntry.Kind.NOTIFICATION,
        data={"delivery": delivery.pk, "target": delivery.target.name, "status": delivery.status},
        **entry_text(text),
    )
