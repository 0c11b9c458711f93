"""Evaluating the alert rules after each probe cycle: per enabled instance and rule, the
state moves on; a rule that fires opens or joins the incident for that instance and
category (or for its host, when the whole host is down), unless a maintenance window
covers it; a rule that clears mitigates it."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.utils import timezone

from fleet.models import Instance
from incidents import lifecycle
from incidents.alert_engine import RuleSpec, StateSpec, step
from incidents.alert_signals import values_for
from incidents.models import AlertRule, AlertState, Incident, MaintenanceWindow, Source, TimelineEntry


def evaluate(
    *, now: datetime | None = None, instances: list[Instance] | None = None, duration_scale: float = 1.0
) -> dict[str, int]:
    """One evaluation of every enabled rule on `instances` (default: every monitored
    instance). duration_scale divides each rule's `for` (a drill's accelerated time)."""
    now = now or timezone.now()
    rules = list(AlertRule.objects.filter(enabled=True))
    if instances is None:
        instances = list(Instance.objects.monitored().select_related("state", "host"))
    states = {(s.rule_id, s.instance_id): s for s in AlertState.objects.filter(rule__in=rules)}
    down_hosts = _down_hosts(instances)
    signals = values_for(instances, now)
    counts = {"fired": 0, "resolved": 0, "silenced": 0}
    for instance in instances:
        current = signals[instance.pk]
        for rule in rules:
            record = states.get((rule.pk, instance.pk)) or AlertState(rule=rule, instance=instance)
            spec = RuleSpec(
                rule.key, rule.signal, rule.comparison, rule.threshold, rule.for_seconds / duration_scale
            )
            before = StateSpec(record.state, record.active_since, record.fired_at)
            after, transition = step(spec, before, current.get(rule.signal), now)
            record.state, record.active_since, record.fired_at = (
                after.state,
                after.active_since,
                after.fired_at,
            )
            record.value, record.evaluated_at = current.get(rule.signal), now
            if transition == "fire":
                counts[_fire(rule, instance, record, now, down_hosts)] += 1
            elif transition == "resolve":
                record.resolved_at = now
                if record.incident_id:
                    lifecycle.alert_cleared(
                        key=record.incident.dedup_key,
                        at=now,
                        text=f"{rule.name} cleared (value {record.value}).",
                    )
                counts["resolved"] += 1
            record.save()
    _note_probe_changes(instances, now)
    return counts


def _note_probe_changes(instances: list[Instance], now: datetime) -> None:
    """On each unresolved incident, a timeline entry when an affected instance's verdict
    changes; coming back up from down is recorded as a restart."""
    by_id = {i.pk: i for i in instances}
    open_incidents = Incident.objects.unresolved().filter(instances__in=instances).distinct()
    for incident in open_incidents.prefetch_related("instances"):
        for instance in incident.instances.all():
            current = by_id.get(instance.pk)
            if current is None:
                continue
            last = (
                incident.timeline.filter(kind__in=(TimelineEntry.Kind.PROBE, TimelineEntry.Kind.RESTART))
                .filter(data__instance=current.name)
                .last()
            )
            before = last.data.get("verdict") if last else _snapshot_verdict(incident, current.name)
            if before is None or before == current.verdict:
                continue
            restarted = before == "down" and current.verdict == "up"
            TimelineEntry.objects.create(
                incident=incident,
                at=now,
                kind=TimelineEntry.Kind.RESTART if restarted else TimelineEntry.Kind.PROBE,
                text=f"{current.name}: {before} → {current.verdict}"
                + (" (back up: restarted)" if restarted else f" ({current.state_label})"),
                data={"instance": current.name, "verdict": current.verdict},
            )


def _snapshot_verdict(incident: Incident, name: str) -> str | None:
    return (incident.evidence or {}).get("instances", {}).get(name, {}).get("verdict")


def _down_hosts(instances: list[Instance]) -> set[int]:
    """Hosts whose every enabled instance is down: their alerts belong to one host incident."""
    verdicts: dict[int, list[str]] = defaultdict(list)
    for instance in instances:
        verdicts[instance.host_id].append(instance.verdict)
    return {host for host, found in verdicts.items() if len(found) > 1 and all(v == "down" for v in found)}


def _fire(
    rule: AlertRule, instance: Instance, record: AlertState, now: datetime, down_hosts: set[int]
) -> str:
    if MaintenanceWindow.objects.covering(instance=instance, at=now):
        return "silenced"
    if instance.host_id in down_hosts:
        key = lifecycle.dedup_key(host=instance.host, category="process.not_started")
        title, category = f"Host {instance.host.name} down: every instance unreachable", "process.not_started"
    else:
        key = lifecycle.dedup_key(instance=instance, category=rule.category)
        title, category = f"{rule.name} on {instance.name}", rule.category
    started = record.active_since or now
    incident, _ = lifecycle.open_or_join(
        key=key,
        title=title,
        category=category,
        severity=rule.severity,
        source=Source.RULE,
        at=now,
        started_at=started,
        text=f"{rule.name} fired on {instance.name}: {rule.signal} = {record.value:g} "
        f"({rule.get_comparison_display()} {rule.threshold:g} for {rule.for_seconds} s).",
        instances=[instance],
        data={"rule": rule.key, "value": record.value, "instance": instance.name},
    )
    record.incident = incident
    return "fired"
