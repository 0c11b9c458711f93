"""Alerts from Alertmanager's webhook (payload version 4) into incidents.

The payload is checked at the boundary by alertmanager_payload.parse() and kept whole by
alert_deliveries; a worker hands it to receive(). receive() keeps each alert by fingerprint
(written in bulk, so a burst of a thousand alerts costs a few statements) and moves
incidents on through lifecycle: an alert that starts firing opens or joins the incident for
its fault, an alert that resolves mitigates it.

Which incident an alert belongs to: an alert on an inventory instance uses the console's own
key for that instance and category, so a Prometheus alert joins the incident an alert rule
opened for the same fault instead of opening a second one. Any other alert belongs to its
notification group (the payload's groupKey), as Alertmanager groups it: one incident per
group and category, not one per alert."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import F

from core.alert_set import by_alertname
from core.i18n import Message, later
from core.taxonomy import CATEGORIES
from fleet.models import Instance
from incidents import lifecycle
from incidents.alertmanager_payload import FIRING, AlertSpec, WebhookSpec
from incidents.models import Incident, MaintenanceWindow, ReceivedAlert, Source, Status
from incidents.notify import SEVERITY_ORDER

BATCH_SIZE = 500

# The guide's alerting rules for vLLM, by alertname (core.alert_set: the one table).
ALERTNAME_CATEGORIES = {name: alert.category for name, alert in by_alertname().items()}
# Prometheus's severity labels onto the console's severities; the console's own pass through.
SEVERITIES = {"critical": "critical", "warning": "major", "info": "info", "major": "major", "minor": "minor"}
DEFAULT_SEVERITY = "major"
# Labels that describe an alert rather than say which fault it is: left out of "am:" keys.
DESCRIPTIVE_LABELS = frozenset({"alertname", "severity", "category"})
INSTANCE_NAME_LABELS = ("llm_instance", "vllm_instance")
MAX_KEY_LENGTH = 200  # Incident.dedup_key
ALERTS_IN_TIMELINE = 20


@dataclass
class Outcome:
    received: int
    new: int = 0
    incidents_opened: int = 0
    silenced: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


# --- what an alert means ------------------------------------------------------------------


def category_for(*, labels: dict[str, str]) -> str:
    """A `category` label naming a taxonomy key wins; then the guide's alertnames; else other."""
    if labels.get("category") in CATEGORIES:
        return labels["category"]
    return ALERTNAME_CATEGORIES.get(labels.get("alertname", ""), "other")


def severity_for(*, labels: dict[str, str]) -> str:
    return SEVERITIES.get(labels.get("severity", "").lower(), DEFAULT_SEVERITY)


class Inventory:
    """The instances an alert's labels can name: by name, or by the host:port Prometheus
    scrapes (its `instance` label), read once per payload."""

    def __init__(self, instances: list[Instance]) -> None:
        self.by_name = {i.name: i for i in instances}
        self.by_address: dict[str, Instance] = {}
        for instance in instances:
            for address in _addresses(instance.base_url):
                self.by_address.setdefault(address, instance)

    @classmethod
    def load(cls) -> Inventory:
        return cls(list(Instance.objects.select_related("host", "state")))

    def instance_for(self, labels: dict[str, str]) -> Instance | None:
        for name in INSTANCE_NAME_LABELS:
            if labels.get(name) in self.by_name:
                return self.by_name[labels[name]]
        return self.by_address.get(labels.get("instance", "").lower())


def _addresses(base_url: str) -> list[str]:
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if not host:
        return []
    host = f"[{host}]" if ":" in host else host
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return []
    return [f"{host}:{port}"] + ([] if parts.port else [host])


def key_for(*, labels: dict[str, str], category: str, instance: Instance | None, group_key: str = "") -> str:
    """The incident key: the console's own for an inventory instance; else the notification
    group's, "am:group:" with a hash of the groupKey (any length fits) and the category; else,
    from a sender that names no group, "am:" with the alertname and the labels that identify
    the fault (hashed when they would not fit)."""
    if instance is not None:
        return lifecycle.dedup_key(instance=instance, category=category)
    if group_key:
        return f"am:group:{hashlib.sha256(group_key.encode()).hexdigest()[:40]}:{category}"
    alertname = labels.get("alertname", "")
    identity = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in DESCRIPTIVE_LABELS)
    key = f"am:{alertname}:{identity}" if identity else f"am:{alertname}"
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return f"am:{alertname[:120]}:sha256:{hashlib.sha256(identity.encode()).hexdigest()[:40]}"


# --- receiving ----------------------------------------------------------------------------


@dataclass
class _Fault:
    """The alerts of one payload that share an incident key."""

    key: str
    category: str
    instance: Instance | None
    alerts: list[AlertSpec] = field(default_factory=list)


def receive(*, webhook: WebhookSpec, at: datetime) -> Outcome:
    """Store every alert of the payload (upserted by fingerprint) and move incidents on, in
    one transaction: a payload is taken whole or not at all. `at` is when the payload
    arrived. Only alerts that changed state move incidents, because Alertmanager resends a
    group's firing alerts with every notification. An alert stored from a payload that
    arrived later is only counted: it stays as that one said (payloads may be processed out
    of order)."""
    alerts = {a.fingerprint: a for a in webhook.alerts}  # the last of a duplicated fingerprint wins
    outcome = Outcome(received=len(webhook.alerts))
    inventory = Inventory.load()
    with transaction.atomic():
        previous = _lock_rows(sorted(alerts), at=at)
        outdated = {fp for fp in alerts if _outdated(previous.get(fp), at)}
        ReceivedAlert.objects.filter(fingerprint__in=outdated).update(times_received=F("times_received") + 1)
        alerts = {fp: a for fp, a in alerts.items() if fp not in outdated}
        outcome.new = sum(1 for fp in alerts if fp not in previous)
        rows = _upsert(alerts, previous, receiver=webhook.receiver, at=at)
        links: dict[str, Incident] = {}
        for fault in _faults(alerts, previous, inventory, group_key=webhook.group_key):
            _move_incident(fault, webhook, at, outcome, links)
        linked = [row for row in rows if row.fingerprint in links]
        for row in linked:
            row.incident = links[row.fingerprint]
        ReceivedAlert.objects.bulk_update(linked, ["incident"], batch_size=BATCH_SIZE)
    return outcome


@dataclass(frozen=True)
class _Previous:
    status: str
    times_received: int
    incident_id: int | None
    last_received: datetime


def _lock_rows(fingerprints: list[str], *, at: datetime) -> dict[str, _Previous]:
    """The stored alerts among `fingerprints`, locked. Missing ones are first inserted as
    placeholders (times_received 0, filled in by _upsert before the commit), so a fingerprint
    that two payloads bring at once is locked by one and waited for by the other, which then
    counts it once more instead of overwriting it as new."""
    placeholders = [
        ReceivedAlert(fingerprint=fp, status="", first_received=at, last_received=at, times_received=0)
        for fp in fingerprints
    ]
    ReceivedAlert.objects.bulk_create(placeholders, batch_size=BATCH_SIZE, ignore_conflicts=True)
    return {fp: before for fp, before in _lock_previous(fingerprints).items() if before.times_received}


def _lock_previous(fingerprints: list[str]) -> dict[str, _Previous]:
    """The rows of `fingerprints`, locked in fingerprint order (so concurrent payloads take
    their locks in one order and do not deadlock)."""
    found = {}
    for start in range(0, len(fingerprints), BATCH_SIZE):
        rows = (
            ReceivedAlert.objects.select_for_update()
            .filter(fingerprint__in=fingerprints[start : start + BATCH_SIZE])
            .order_by("fingerprint")
            .values_list("fingerprint", "status", "times_received", "incident_id", "last_received")
        )
        found.update({fp: _Previous(*rest) for fp, *rest in rows})
    return found


def _outdated(before: _Previous | None, at: datetime) -> bool:
    return before is not None and before.last_received > at


UPSERT_FIELDS = [
    "status", "alertname", "labels", "annotations", "starts_at", "ends_at", "generator_url", "receiver",
    "last_received", "times_received",
]  # fmt: skip


def _upsert(
    alerts: dict[str, AlertSpec], previous: dict[str, _Previous], *, receiver: str, at: datetime
) -> list[ReceivedAlert]:
    rows = []
    for fingerprint in sorted(alerts):
        alert, before = alerts[fingerprint], previous.get(fingerprint)
        rows.append(
            ReceivedAlert(
                fingerprint=fingerprint,
                status=alert.status,
                alertname=alert.alertname[:200],
                labels=alert.labels,
                annotations=alert.annotations,
                starts_at=alert.starts_at,
                ends_at=alert.ends_at,
                generator_url=alert.generator_url[:1000],
                receiver=receiver[:200],
                first_received=at,
                last_received=at,
                times_received=before.times_received + 1 if before else 1,
                incident_id=before.incident_id if before else None,
            )
        )
    # Every row exists by now (stored before, or a placeholder of _lock_rows): each is updated.
    return ReceivedAlert.objects.bulk_create(
        rows,
        batch_size=BATCH_SIZE,
        update_conflicts=True,
        unique_fields=["fingerprint"],
        update_fields=UPSERT_FIELDS,
    )


def _faults(
    alerts: dict[str, AlertSpec], previous: dict[str, _Previous], inventory: Inventory, *, group_key: str
) -> list[_Fault]:
    """The alerts that changed state, grouped by incident key, in key order. A firing alert
    not yet on an incident (new, or silenced before) counts as changed."""
    faults: dict[str, _Fault] = {}
    for fingerprint, alert in alerts.items():
        if not _changed(alert, previous.get(fingerprint)):
            continue
        instance = inventory.instance_for(alert.labels)
        category = category_for(labels=alert.labels)
        key = key_for(labels=alert.labels, category=category, instance=instance, group_key=group_key)
        faults.setdefault(key, _Fault(key, category, instance)).alerts.append(alert)
    return [faults[key] for key in sorted(faults)]


def _changed(alert: AlertSpec, before: _Previous | None) -> bool:
    if before is None or before.status != alert.status:
        return True
    return alert.status == FIRING and before.incident_id is None


def _move_incident(
    fault: _Fault, webhook: WebhookSpec, at: datetime, outcome: Outcome, links: dict[str, Incident]
) -> None:
    firing = [a for a in fault.alerts if a.status == FIRING]
    if firing:
        if fault.instance is not None and MaintenanceWindow.objects.covering(instance=fault.instance, at=at):
            outcome.silenced += len(firing)
            return
        incident, opened = _fire(fault, firing, webhook, at)
        outcome.incidents_opened += opened
    else:
        incident = _clear(fault, webhook, at)
    if incident is not None:
        links.update({a.fingerprint: incident for a in fault.alerts})


def _fire(
    fault: _Fault, firing: list[AlertSpec], webhook: WebhookSpec, at: datetime
) -> tuple[Incident, bool]:
    severities = [severity_for(labels=a.labels) for a in firing]
    return lifecycle.open_or_join(
        key=fault.key,
        title=_title(*_named(fault, firing, webhook)),
        category=fault.category,
        severity=max(severities, key=SEVERITY_ORDER.index),
        source=Source.ALERTMANAGER,
        at=at,
        started_at=min((a.starts_at for a in firing if a.starts_at), default=at),
        text=_text(firing, "firing"),
        instances=[fault.instance] if fault.instance else [],
        data=_data(firing, webhook),
    )


def _named(fault: _Fault, firing: list[AlertSpec], webhook: WebhookSpec) -> tuple[str, str]:
    """The alertname and the place a title names: on an inventory instance, the first alert's
    name and the instance; for a group, what its alerts share, else what the group's labels
    (what Alertmanager grouped them by) say, else nothing."""
    if fault.instance is not None:
        return firing[0].alertname, fault.instance.name
    labels = webhook.group_labels
    return _shared(firing, "alertname", labels), _shared(firing, "instance", labels)


def _shared(alerts: list[AlertSpec], label: str, group_labels: dict[str, str]) -> str:
    values = {a.labels.get(label, "") for a in alerts}
    return values.pop() if len(values) == 1 else group_labels.get(label, "")


def _clear(fault: _Fault, webhook: WebhookSpec, at: datetime) -> Incident | None:
    """Mitigate the fault's incident, unless another alert on it still fires."""
    still_firing = ReceivedAlert.objects.filter(
        incident__dedup_key=fault.key, incident__status__in=[Status.OPEN, Status.MITIGATED], status=FIRING
    ).exists()
    if still_firing:
        return Incident.objects.unresolved().filter(dedup_key=fault.key).first()
    return lifecycle.alert_cleared(
        key=fault.key, at=at, text=_text(fault.alerts, "resolved"), data=_data(fault.alerts, webhook)
    )


def _title(alertname: str, where: str) -> Message | str:
    if alertname and where:
        return later("%(alertname)s on %(where)s", alertname=alertname, where=where)
    if where:
        return later("Alertmanager alert on %(where)s", where=where)
    return alertname or later("Alertmanager alert")


def _text(alerts: list[AlertSpec], status: str) -> Message:
    """The timeline's words for the alerts: the first one's name and status, how many more,
    and its summary (the rule's own text, as Prometheus sent it)."""
    first = alerts[0]
    summary = first.annotations.get("summary") or first.annotations.get("description", "")
    values = {"alertname": first.alertname, "more": len(alerts) - 1}
    if status == FIRING:
        text = (
            later("Alertmanager: %(alertname)s firing and %(more)s more alert(s).", **values)
            if len(alerts) > 1
            else later("Alertmanager: %(alertname)s firing.", **values)
        )
    else:
        text = (
            later("Alertmanager: %(alertname)s resolved and %(more)s more alert(s).", **values)
            if len(alerts) > 1
            else later("Alertmanager: %(alertname)s resolved.", **values)
        )
    # Joined with a space in every language: not a catalogue message of its own.
    return Message("%(text)s %(summary)s", {"text": text, "summary": summary}) if summary else text


def _data(alerts: list[AlertSpec], webhook: WebhookSpec) -> dict[str, Any]:
    return {
        "receiver": webhook.receiver,
        "external_url": webhook.external_url,
        "alerts": [
            {
                "fingerprint": a.fingerprint,
                "labels": a.labels,
                "starts_at": a.starts_at.isoformat() if a.starts_at else None,
                "generator_url": a.generator_url,
            }
            for a in alerts[:ALERTS_IN_TIMELINE]
        ],
        "alert_count": len(alerts),
    }
