"""How incidents open, join, mitigate and resolve, whatever raised them (an alert rule, an
Alertmanager alert, a person): one unresolved incident per dedup key, so nothing opens
twice for one fault; a snapshot of the evidence when it opens; a timeline entry for each
step; notifications queued on commit.

A fault that fires again soon after its incident was mitigated reopens that incident; one
that fires after the incident stayed clear for longer than INCIDENT_REOPEN_WINDOW_S is a new
incident (the old one is resolved then), so a different fault days later does not land in a
closed story. Acknowledging is a person saying "I am on it", apart from any status change:
MTTA is measured only from real acknowledgements."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from core.i18n import Message, later
from diagnostics.models import CapacityFinding
from fleet.models import GpuHost, Instance, MetricSample
from incidents import people_format, words
from incidents.models import Incident, Source, Status, TimelineEntry

SNAPSHOT_WINDOW = timedelta(minutes=30)
SNAPSHOT_SAMPLES = (
    "kv_cache_usage",
    "num_requests_waiting",
    "num_requests_running",
    "ttft_p99_s",
    "e2e_p99_s",
    "gpu_memory_used_pct",
    "gpu_temperature_c",
    "probe_ttfb_s",
    "preemptions_per_s",
    "error_rate",
    "generation_tokens_per_s",
    "stream_tokens_per_s",
)  # fmt: skip  (fleet.series names)


def dedup_key(*, instance: Instance | None = None, host: GpuHost | None = None, category: str) -> str:
    if instance is not None:
        return f"instance:{instance.pk}:{category}"
    if host is not None:
        return f"host:{host.pk}:{category}"
    return f"fleet:{category}"


def open_or_join(
    *,
    key: str,
    title: Message | str,
    category: str,
    severity: str,
    source: str,
    at: datetime,
    text: Message | str,
    instances: list[Instance] = (),  # type: ignore[assignment]
    hosts: list[GpuHost] = (),  # type: ignore[assignment]
    data: dict[str, Any] | None = None,
    started_at: datetime | None = None,
) -> tuple[Incident, bool]:
    """The unresolved incident for `key`, joined with a timeline entry, or a new one with an
    evidence snapshot. `title` and `text` are kept as messages when they are (core.i18n), so
    they read in the reader's language. A mitigated incident that fires again within the
    reopen window is open again; one mitigated for longer is resolved, and a new incident
    opens."""
    for _attempt in range(2):
        try:
            with transaction.atomic():
                fields = (title, category, severity, source, at, text)
                return _open_or_join(key, *fields, list(instances), list(hosts), data or {}, started_at)
        except IntegrityError:  # another worker opened it between our read and write: join that one
            continue
    raise RuntimeError(f"could not open or join the incident for {key}")


def _open_or_join(key, title, category, severity, source, at, text, instances, hosts, data, started_at):  # noqa: ANN001
    incident = Incident.objects.select_for_update().unresolved().filter(dedup_key=key).first()
    if incident is not None and stayed_clear(incident, at=at):
        _resolve_as_stayed_clear(incident, at)
        incident = None
    if incident is not None:
        if incident.status == Status.MITIGATED:
            incident.status, incident.mitigated_at = Status.OPEN, None
            incident.save(update_fields=["status", "mitigated_at", "updated_at"])
            _entry(
                incident,
                at,
                TimelineEntry.Kind.STATUS,
                later("Fired again: open again."),
                data={"status": "open"},
            )
        _entry(incident, at, TimelineEntry.Kind.ALERT_FIRED, text, data=data)
        _affect(incident, instances, hosts)
        return incident, False
    incident = Incident.objects.create(
        title=str(title)[:200],
        title_message=title.to_json() if isinstance(title, Message) else {},
        category=category,
        severity=severity,
        source=source,
        started_at=started_at or at,
        detected_at=at,
        dedup_key=key,
        evidence=snapshot(instances=instances, at=at),
    )
    _affect(incident, instances, hosts)
    _entry(incident, at, TimelineEntry.Kind.OPENED, text, data=data)
    from incidents import notify

    transaction.on_commit(lambda: notify.queue(incident_id=incident.pk, event="opened"))
    transaction.on_commit(lambda: _pull_engine_logs(incident.pk))
    return incident, True


def _pull_engine_logs(incident_id: int) -> None:
    """The agents of the incident's hosts pull their engines' logs (incidents.log_pulls)."""
    from incidents.log_pulls import request_engine_logs

    try:
        request_engine_logs(incident_id=incident_id)
    except Exception:  # the broker is away: the incident stands without the pulled log
        logging.getLogger("incidents").warning("could not ask for the engine logs", exc_info=True)


def reopen_window() -> timedelta:
    return timedelta(seconds=settings.INCIDENT_REOPEN_WINDOW_S)


def stayed_clear(incident: Incident, *, at: datetime) -> bool:
    """True when a mitigated incident has been clear for longer than the reopen window at `at`.
    A mitigated incident without a mitigation time (set by an edit) counts as recent."""
    if incident.status != Status.MITIGATED or incident.mitigated_at is None:
        return False
    return at - incident.mitigated_at > reopen_window()


def _resolve_as_stayed_clear(incident: Incident, at: datetime) -> None:
    window = people_format.duration_message(reopen_window())
    incident.status, incident.resolved_at = Status.RESOLVED, at
    incident.save(update_fields=["status", "resolved_at", "updated_at"])
    text = later(
        "Stayed clear for longer than the reopen window (%(window)s): resolved. "
        "The fault fired again later, so it is a new incident.",
        window=window,
    )
    _entry(incident, at, TimelineEntry.Kind.STATUS, text, data={"status": "resolved", "stayed_clear": True})
    _notify_resolved(incident)


def _notify_resolved(incident: Incident) -> None:
    from incidents import notify

    transaction.on_commit(lambda: notify.queue(incident_id=incident.pk, event="resolved"))


def _affect(incident: Incident, instances: list[Instance], hosts: list[GpuHost]) -> None:
    if instances:
        incident.instances.add(*instances)
        hosts = [*hosts, *(i.host for i in instances)]
        names = sorted({*incident.models_affected, *(i.served_model_name for i in instances)})
        if names != incident.models_affected:
            incident.models_affected = names
            incident.save(update_fields=["models_affected", "updated_at"])
    if hosts:
        incident.hosts.add(*hosts)


def _entry(
    incident: Incident,
    at: datetime,
    kind: str,
    text: Message | str,
    *,
    author: str = "",
    data: dict | None = None,
) -> TimelineEntry:
    return TimelineEntry.objects.create(
        incident=incident, at=at, kind=kind, author=author, data=data or {}, **entry_text(text)
    )


def entry_text(text: Message | str) -> dict[str, Any]:
    """A timeline entry's `text` (English) and `text_message` (the message, to show it in
    the reader's language) for automatic text; typed text as it is."""
    if isinstance(text, Message):
        return {"text": str(text), "text_message": text.to_json()}
    return {"text": text, "text_message": {}}


def alert_cleared(
    *,
    key: str,
    at: datetime,
    text: Message | str,
    data: dict | None = None,
    others_firing: bool = False,
) -> Incident | None:
    """The alert behind `key` cleared: the open incident is mitigated (a person resolves it),
    unless other alerts that joined it still fire (then the clearing is only noted)."""
    with transaction.atomic():
        incident = Incident.objects.select_for_update().unresolved().filter(dedup_key=key).first()
        if incident is None:
            return None
        _entry(incident, at, TimelineEntry.Kind.ALERT_RESOLVED, text, data=data)
        if incident.status == Status.OPEN and not others_firing:
            incident.status, incident.mitigated_at = Status.MITIGATED, at
            incident.save(update_fields=["status", "mitigated_at", "updated_at"])
            _entry(
                incident,
                at,
                TimelineEntry.Kind.STATUS,
                later("Alert cleared: mitigated."),
                data={"status": "mitigated"},
            )
        return incident


def set_status(incident: Incident, *, status: str, at: datetime, user: str) -> None:
    """A person moves an incident on: mitigating or resolving stamps its time. Neither is an
    acknowledgement (see acknowledge), so neither touches acknowledged_at."""
    if status == incident.status:
        return
    incident.status = status
    if status == Status.MITIGATED and not incident.mitigated_at:
        incident.mitigated_at = at
    if status == Status.RESOLVED:
        incident.resolved_at = incident.resolved_at or at
    incident.save()
    _entry(
        incident,
        at,
        TimelineEntry.Kind.STATUS,
        later("Status set to %(status)s.", status=words.word(Status(status).label)),
        author=user,
        data={"status": status},
    )
    if status == Status.RESOLVED:
        _notify_resolved(incident)


def acknowledge(incident: Incident, *, at: datetime, user: str) -> bool:
    """`user` says they are on it: stamps acknowledged_at and adds a timeline entry, once; True
    when this call acknowledged it, False when someone had already. A resolved incident has
    nothing left to acknowledge: ValueError. The stamp is a conditional update, so two people
    pressing at once record one acknowledgement, the first."""
    if incident.status == Status.RESOLVED:
        raise ValueError(_resolved_error(incident))
    with transaction.atomic():
        stamped = (
            Incident.objects.unresolved()
            .filter(pk=incident.pk, acknowledged_at__isnull=True)
            .update(acknowledged_at=at, updated_at=timezone.now())
        )
        if not stamped:
            incident.refresh_from_db(fields=["acknowledged_at", "status", "resolved_at"])
            if incident.status == Status.RESOLVED and incident.acknowledged_at is None:
                raise ValueError(_resolved_error(incident))
            return False
        incident.acknowledged_at = at
        text = later("Acknowledged by %(user)s.", user=user)
        _entry(incident, at, TimelineEntry.Kind.STATUS, text, author=user, data={"acknowledged": True})
    return True


def _resolved_error(incident: Incident) -> str:
    return gettext("Incident %(id)s is resolved: there is nothing left to acknowledge.") % {"id": incident.pk}


def acknowledged_by(incident: Incident) -> str:
    """Who acknowledged the incident, from its timeline (prefetched or not); blank when nobody
    did through the console (an acknowledgement typed into the edit form has no author)."""
    for entry in incident.timeline.all():
        if entry.kind == TimelineEntry.Kind.STATUS and entry.data.get("acknowledged"):
            return entry.author
    return ""


def snapshot(*, instances: list[Instance], at: datetime) -> dict[str, Any]:
    """What the affected instances looked like when the incident opened, so the record stays
    true after the fleet changes: probe state and findings, recent samples, GPU state, sizing
    findings and launch flags."""
    result: dict[str, Any] = {"taken_at": at.isoformat(), "instances": {}}
    points = MetricSample.objects.points(
        instances=instances, names=SNAPSHOT_SAMPLES, since=at - SNAPSHOT_WINDOW, until=at
    )
    for instance in instances:
        state = getattr(instance, "state", None)
        stored = points.get(instance.pk, {})
        samples = {name: [[ts.isoformat(), v] for ts, v in rows] for name, rows in stored.items()}
        result["instances"][instance.name] = {
            "host": instance.host.name,
            "model": instance.served_model_name,
            "engine": f"{instance.engine} {instance.engine_version}".strip(),
            "verdict": state.verdict if state else "unknown",
            "findings": list(state.findings) if state else [],
            "gpu": state.kind_result("gpu") if state else {},
            "metrics": (state.kind_result("metrics") or {}).get("derived", {}) if state else {},
            "samples": samples,
            "capacity_findings": list(
                CapacityFinding.objects.filter(instance=instance).active().values("code", "severity", "title")
            ),
            "launch_flags": {
                f: getattr(instance, f) for f in Instance.EDITABLE_FIELDS if f not in ("host", "gpus")
            },
        }
    return result


def open_by_hand(*, form: Any, at: datetime, author: str) -> Incident:
    """A person opens an incident from the incident form (a ModelForm, validated): saved
    with its instances and hosts, an evidence snapshot and an "opened by hand" entry."""
    with transaction.atomic():
        incident = form.save(commit=False)
        incident.source = Source.MANUAL
        incident.save()
        form.save_m2m()
        incident.evidence = snapshot(instances=list(incident.instances.all()), at=at)
        incident.save(update_fields=["evidence"])
        _entry(incident, at, TimelineEntry.Kind.OPENED, later("Opened by hand."), author=author)
    return incident


def edit_by_hand(*, form: Any, at: datetime, author: str, shown: Any) -> Incident:
    """A person edits an incident (a bound, valid ModelForm): saved, and every changed
    field kept in the timeline as "label: before → after" (`shown` renders a value)."""
    original = Incident.objects.get(pk=form.instance.pk)  # validation already changed form.instance
    before = {name: _edited_value(name, getattr(original, name), shown) for name in form.changed_data}
    with transaction.atomic():
        saved = form.save()
        if "title" in form.changed_data and saved.title_message:  # a person's title now
            saved.title_message = {}
            saved.save(update_fields=["title_message"])
        for name in form.changed_data:
            text = later(
                "%(field)s: %(before)s → %(after)s",
                field=words.word(form.fields[name].label),
                before=before[name],
                after=_edited_value(name, getattr(saved, name), shown),
            )
            _entry(saved, at, TimelineEntry.Kind.EDIT, text, author=author, data={"field": name})
    return saved


def _edited_value(name: str, value: Any, shown: Any) -> Message | str:
    """A value as an edit entry keeps it: a choice by its label (a message), the rest as
    `shown` renders it."""
    choices = dict(Incident._meta.get_field(name).flatchoices)
    if choices and value in choices:
        return words.word(choices[value])
    return shown(value)
