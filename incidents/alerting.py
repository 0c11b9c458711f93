"""Evaluating the alert rules over the probes' latest results: per monitored instance and
rule, the state moves on; a rule that fires opens or joins the incident for that
instance and cause, unless a maintenance window covers it; a rule that clears mitigates it.

Incidents are by cause. The category comes from the evidence that fired the rule: for
"service down" it is the category of the instance's own down finding (refused →
process.not_started, 5xx → server.5xx, XID → cuda.xid, hung → process.hung, ...), for the
metric rules the rule's own cause. The dedup key is instance + category, so two faults
are two incidents. A host incident only when the host itself is the evidence: every
instance of it (two or more) failing the same way at once."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.utils import timezone

from core.i18n import Message, later
from fleet.models import Instance
from incidents import lifecycle, words
from incidents.alert_engine import RuleSpec, StateSpec, step
from incidents.alert_signals import values_for
from incidents.models import (
    AlertRule,
    AlertState,
    Incident,
    MaintenanceWindow,
    Source,
    Status,
    TimelineEntry,
)


def evaluate(
    *,
    now: datetime | None = None,
    instances: list[Instance] | None = None,
    duration_scale: float = 1.0,
    source: str = Source.RULE,
) -> dict[str, int]:
    """One evaluation of every enabled rule on `instances` (default: every monitored
    instance). duration_scale divides each rule's `for` (a drill's accelerated time);
    source marks the incidents it opens (a drill's are "drill")."""
    now = now or timezone.now()
    rules = list(AlertRule.objects.filter(enabled=True))
    if instances is None:
        instances = list(Instance.objects.monitored().select_related("state", "host"))
    states = {(s.rule_id, s.instance_id): s for s in AlertState.objects.filter(rule__in=rules)}
    host_causes = _host_causes(instances)
    signals = values_for(instances, now)
    _note_probe_changes(instances, now)  # before the rules move: a recovery lands while still open
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
                counts[_fire(rule, instance, record, now, host_causes, source)] += 1
            elif transition == "resolve":
                record.resolved_at = now
                if record.incident_id:
                    others = AlertState.objects.filter(incident_id=record.incident_id, state="firing")
                    lifecycle.alert_cleared(
                        key=record.incident.dedup_key,
                        at=now,
                        text=_cleared(rule, instance, record.value),
                        others_firing=others.exclude(pk=record.pk).exists(),
                    )
                counts["resolved"] += 1
            record.save()
    return counts


def down_cause(instance: Instance) -> str | None:
    """The taxonomy category of the instance's most severe down finding, if any."""
    state = getattr(instance, "state", None)
    for finding in state.findings if state is not None else ():
        if finding.get("severity") == "down" and finding.get("category"):
            return finding["category"]
    return None


def _failing_categories(instance: Instance) -> set[str]:
    state = getattr(instance, "state", None)
    return {f["category"] for f in (state.findings if state else ()) if f.get("severity") != "info"}


def _host_causes(instances: list[Instance]) -> dict[int, str]:
    """Hosts whose every monitored instance (two or more) is failing or down for the same
    cause at once: the host is the evidence, so their alerts join one host incident."""
    by_host: dict[int, list[Instance]] = defaultdict(list)
    for instance in instances:
        by_host[instance.host_id].append(instance)
    causes = {}
    for host_id, members in by_host.items():
        found = {down_cause(i) if i.verdict in ("down", "failing") else None for i in members}
        if len(members) > 1 and len(found) == 1 and None not in found:
            causes[host_id] = found.pop()
    return causes


def _fire(
    rule: AlertRule,
    instance: Instance,
    record: AlertState,
    now: datetime,
    host_causes: dict[int, str],
    source: str,
) -> str:
    if MaintenanceWindow.objects.covering(instance=instance, at=now):
        return "silenced"
    evidence = down_cause(instance) if rule.signal == "service_down" else None
    category = evidence or rule.category
    outage = _outage(instance, host_causes) if not evidence else None
    if outage is not None:  # a symptom of the instance's outage joins the outage's incident
        key = outage.dedup_key
        title = Message.from_json(outage.title_message) if outage.title_message else outage.title
        category, evidence = outage.category, outage.category
    elif evidence and host_causes.get(instance.host_id) == evidence:
        key = lifecycle.dedup_key(host=instance.host, category=category)
        title = later(
            "Host %(host)s: every instance down (%(category)s)",
            host=instance.host.name,
            category=words.category(category),
        )
    else:
        key = lifecycle.dedup_key(instance=instance, category=category)
        title = _title(rule, instance, category if evidence else None)
    incident, _ = lifecycle.open_or_join(
        key=key,
        title=title,
        category=category,
        severity=rule.severity,
        source=source,
        at=now,
        started_at=record.active_since or now,
        text=_fired(rule, instance, record.value, category if evidence else None),
        instances=[instance],
        data={"rule": rule.key, "value": record.value, "instance": instance.name, "category": category},
    )
    record.incident = incident
    return "fired"


def _title(rule: AlertRule, instance: Instance, cause: str | None) -> Message | str:
    if cause is None:
        return later("%(rule)s on %(instance)s", rule=words.rule_name(rule.name), instance=instance.name)
    return later(
        "%(rule)s on %(instance)s: %(category)s",
        rule=words.rule_name(rule.name),
        instance=instance.name,
        category=words.category(cause),
    )


def _fired(rule: AlertRule, instance: Instance, value: float | None, cause: str | None) -> Message:
    """What a firing rule adds to the timeline: the signal's value against the threshold,
    and the cause when the evidence named one."""
    values = {
        "rule": words.rule_name(rule.name),
        "instance": instance.name,
        "signal": rule.signal,
        "value": f"{value:.3g}",
        "comparison": rule.get_comparison_display(),
        "threshold": f"{rule.threshold:g}",
        "for_s": rule.for_seconds,
    }
    if cause is None:
        return later(
            "%(rule)s fired on %(instance)s: %(signal)s = %(value)s "
            "(%(comparison)s %(threshold)s for %(for_s)s s).",
            **values,
        )
    return later(
        "%(rule)s fired on %(instance)s: %(signal)s = %(value)s "
        "(%(comparison)s %(threshold)s for %(for_s)s s); cause: %(category)s.",
        category=words.category(cause),
        **values,
    )


def _cleared(rule: AlertRule, instance: Instance, value: float | None) -> Message:
    if value is None:
        return later(
            "%(rule)s cleared on %(instance)s.", rule=words.rule_name(rule.name), instance=instance.name
        )
    return later(
        "%(rule)s cleared on %(instance)s (value %(value)s).",
        rule=words.rule_name(rule.name),
        instance=instance.name,
        value=f"{value:.3g}",
    )


def _outage(instance: Instance, host_causes: dict[int, str]) -> Incident | None:
    """The unresolved incident of the instance's own down cause, while it is failing or
    down: the other rules' alerts on it then (errors from clients giving up, a queue that
    grows behind a hung engine) are that outage's symptoms, not incidents of their own."""
    cause = down_cause(instance) if instance.verdict in ("down", "failing") else None
    if cause is None:
        return None
    keys = [lifecycle.dedup_key(instance=instance, category=cause)]
    if host_causes.get(instance.host_id) == cause:
        keys.append(lifecycle.dedup_key(host=instance.host, category=cause))
    return Incident.objects.unresolved().filter(dedup_key__in=keys).first()


def _note_probe_changes(instances: list[Instance], now: datetime) -> None:
    """On each open incident, a timeline entry when an affected instance's verdict changes
    for the incident's own cause (its findings name the incident's category) or it comes
    back; coming back up from down is recorded as a restart. Mitigated incidents and
    other causes' changes stay out: a later, unrelated fault is not this incident's."""
    by_id = {i.pk: i for i in instances}
    open_incidents = Incident.objects.filter(status=Status.OPEN, instances__in=instances).distinct()
    for incident in open_incidents.prefetch_related("instances"):
        for instance in incident.instances.all():
            current = by_id.get(instance.pk)
            if current is None:
                continue
            mine = incident.category in _failing_categories(current)
            if not mine and current.verdict not in ("up", "degraded"):
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
                data={"instance": current.name, "verdict": current.verdict},
                **lifecycle.entry_text(_verdict_change(current, before, restarted=restarted)),
            )


def _verdict_change(instance: Instance, before: str, *, restarted: bool) -> Message:
    values = {
        "instance": instance.name,
        "before": words.verdict(before),
        "after": words.verdict(instance.verdict),
    }
    if restarted:
        return later("%(instance)s: %(before)s → %(after)s (back up: restarted)", **values)
    return later("%(instance)s: %(before)s → %(after)s (%(state)s)", state=_state(instance), **values)


def _state(instance: Instance) -> Message | str:
    """The instance's state as its tile says it (Instance.state_label), kept as a message."""
    state = getattr(instance, "state", None)
    if not instance.enabled:
        return later("disabled")
    if state is None or (state.verdict == "unknown" and not state.consecutive_failures):
        return later("not probed yet")
    if state.verdict == "failing" and state.consecutive_failures:
        return later("failing %(count)s× in a row", count=state.consecutive_failures)
    return words.verdict(state.verdict)


def _snapshot_verdict(incident: Incident, name: str) -> str | None:
    return (incident.evidence or {}).get("instances", {}).get(name, {}).get("verdict")
