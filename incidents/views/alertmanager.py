"""Alertmanager's webhook receiver: a machine endpoint, so a bearer token instead of a session
and no CSRF check. It checks the payload, stores it in one write and answers at once; a
worker processes it (incidents.alert_deliveries)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from incidents import alert_deliveries, alertmanager_payload

NOT_CONFIGURED = (
    "The Alertmanager receiver is not configured: set ALERTMANAGER_TOKEN in the console's environment "
    "and give Alertmanager the same token, in the webhook receiver's "
    "http_config: {authorization: {type: Bearer, credentials: <token>}}."
)
BUSY = "The database is busy; the alerts were not stored. Send them again."
RETRY_AFTER_S = 5


@csrf_exempt
@require_POST
def receive(request: HttpRequest) -> JsonResponse:
    refusal = _refuse_unauthenticated(request)
    if refusal is not None:
        return refusal
    body = _read_body(request)
    if body is None:
        limit = alertmanager_payload.MAX_BODY_BYTES
        return JsonResponse({"error": f"The payload is larger than {limit} bytes."}, status=413)
    try:
        webhook = alertmanager_payload.parse(body=body)
    except alertmanager_payload.PayloadError as exc:
        return JsonResponse({"error": str(exc), "field": exc.field}, status=400)
    try:
        delivery = alert_deliveries.accept(body=body, webhook=webhook, at=timezone.now())
    except alert_deliveries.DatabaseBusy:
        response = JsonResponse({"error": BUSY}, status=503)  # Alertmanager retries a 5xx
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    return JsonResponse({"received": len(webhook.alerts), "delivery": delivery.pk})


def _refuse_unauthenticated(request: HttpRequest) -> JsonResponse | None:
    expected = getattr(settings, "ALERTMANAGER_TOKEN", "")
    if not expected:
        return JsonResponse({"error": NOT_CONFIGURED}, status=503)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode()):
        return None
    response = JsonResponse({"error": "A valid bearer token is needed (Authorization: Bearer <token>)."})
    response.status_code = 401
    response["WWW-Authenticate"] = 'Bearer realm="alertmanager"'
    return response


def _read_body(request: HttpRequest) -> bytes | None:
    """The body, or None when it is over the limit. Read from the stream, not request.body,
    which would stop at Django's smaller DATA_UPLOAD_MAX_MEMORY_SIZE with a 400."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > alertmanager_payload.MAX_BODY_BYTES:
        return None
    body = request.read(alertmanager_payload.MAX_BODY_BYTES + 1)
    return None if len(body) > alertmanager_payload.MAX_BODY_BYTES else body
