"""Alertmanager's webhook payload (version 4) checked at the boundary: parse() returns a typed
spec or raises PayloadError naming the field at fault, like alerts[3].startsAt.

What parse() accepts can be stored on either database: text without NUL characters or lone
surrogates (PostgreSQL refuses the one, both refuse the other) and timestamps that convert to
UTC. A payload the console took but could never store would be retried for ever."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

MAX_BODY_BYTES = 5 * 1024 * 1024
FIRING, RESOLVED = "firing", "resolved"


class PayloadError(ValueError):
    """A payload the receiver refuses; `field` names where it went wrong, like alerts[3].startsAt."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class AlertSpec:
    status: str
    fingerprint: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime | None
    ends_at: datetime | None
    generator_url: str

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")


@dataclass(frozen=True)
class WebhookSpec:
    receiver: str
    status: str
    group_key: str
    truncated_alerts: int
    external_url: str
    alerts: tuple[AlertSpec, ...]
    group_labels: dict[str, str] = field(default_factory=dict)


def parse(*, body: bytes) -> WebhookSpec:
    """The webhook spec of a request body, or PayloadError naming the first field at fault."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise PayloadError("body", "is not valid JSON") from None
    if not isinstance(data, dict):
        raise PayloadError("body", "must be a JSON object")
    version = data.get("version")
    if version != "4":
        raise PayloadError("version", f'must be "4" (Alertmanager\'s webhook payload), not {_shown(version)}')
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("alerts", "must be a list of alerts")
    group_labels = _string_map(data.get("groupLabels", {}), "groupLabels")
    for name in ("commonLabels", "commonAnnotations"):
        _string_map(data.get(name, {}), name)
    truncated = data.get("truncatedAlerts", 0)
    if not isinstance(truncated, int) or isinstance(truncated, bool) or truncated < 0:
        raise PayloadError("truncatedAlerts", "must be a whole number of at least 0")
    return WebhookSpec(
        receiver=_string(data, "receiver", "receiver"),
        status=_string(data, "status", "status"),
        group_key=_string(data, "groupKey", "groupKey"),
        truncated_alerts=truncated,
        external_url=_string(data, "externalURL", "externalURL"),
        alerts=tuple(_alert(item, f"alerts[{i}]") for i, item in enumerate(alerts)),
        group_labels=group_labels,
    )


def _alert(item: Any, where: str) -> AlertSpec:
    if not isinstance(item, dict):
        raise PayloadError(where, "must be an object")
    status = item.get("status")
    if status not in (FIRING, RESOLVED):
        raise PayloadError(f"{where}.status", f'must be "firing" or "resolved", not {_shown(status)}')
    if "labels" not in item:
        raise PayloadError(f"{where}.labels", "is missing")
    labels = _string_map(item["labels"], f"{where}.labels")
    fingerprint = item.get("fingerprint") or fingerprint_of(labels)
    if not isinstance(fingerprint, str) or len(fingerprint) > 64:
        raise PayloadError(f"{where}.fingerprint", "must be a string of at most 64 characters")
    _storable(fingerprint, f"{where}.fingerprint")
    if "startsAt" not in item:
        raise PayloadError(f"{where}.startsAt", "is missing")
    return AlertSpec(
        status=status,
        fingerprint=fingerprint,
        labels=labels,
        annotations=_string_map(item.get("annotations", {}), f"{where}.annotations"),
        starts_at=_timestamp(item["startsAt"], f"{where}.startsAt"),
        ends_at=_timestamp(item.get("endsAt"), f"{where}.endsAt"),
        generator_url=_string(item, "generatorURL", f"{where}.generatorURL"),
    )


def _string(data: dict, key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise PayloadError(where, "must be a string")
    return _storable(value, where)


def _string_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise PayloadError(where, "must be an object of strings")
    for key, item in value.items():
        if not isinstance(item, str):
            raise PayloadError(f"{where}.{key}", "must be a string")
        _storable(key, f"{where}.{key}")
        _storable(item, f"{where}.{key}")
    return value


def _storable(text: str, where: str) -> str:
    if "\x00" in text:
        raise PayloadError(where, "must not contain NUL characters (\\u0000)")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise PayloadError(where, "must not contain lone surrogates (like \\ud800)") from None
    return text


def _timestamp(value: Any, where: str) -> datetime | None:
    """RFC 3339, as Go writes it (nanoseconds allowed); Go's zero time means "not set"."""
    if value is None or value == "":
        return None
    try:
        if not isinstance(value, str) or "T" not in value:
            raise ValueError
        at = datetime.fromisoformat(value)
    except ValueError:
        raise PayloadError(where, f"must be an RFC 3339 timestamp, not {_shown(value)}") from None
    if at.tzinfo is None:
        raise PayloadError(where, f"must carry a time zone offset: {_shown(value)}")
    if at.year == 1:
        return None
    try:
        return at.astimezone(UTC)
    except OverflowError:
        raise PayloadError(where, f"is out of range in UTC: {_shown(value)}") from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fingerprint_of(labels: dict[str, str]) -> str:
    """For senders that leave fingerprints out: stable over the labels, like Alertmanager's."""
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
