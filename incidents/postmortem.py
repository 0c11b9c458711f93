"""An incident as a Markdown postmortem: summary, impact, timeline, root cause, resolution,
follow-ups and the evidence captured when it opened."""

from __future__ import annotations

from incidents.lifecycle import acknowledged_by
from incidents.models import Incident
from incidents.people_format import duration


def _when(value) -> str:  # noqa: ANN001
    return value.strftime("%Y-%m-%d %H:%M:%S %Z") if value else "—"


def _by(user: str) -> str:
    return f" by {user}" if user else ""


def postmortem(incident: Incident) -> str:
    lines = [
        f"# Postmortem: {incident.title}",
        "",
        f"- Category: {incident.get_category_display()} (`{incident.category}`)",
        f"- Severity: {incident.severity}; status: {incident.status}",
        f"- Started: {_when(incident.started_at)}; detected: {_when(incident.detected_at)}",
        f"- Acknowledged: {_when(incident.acknowledged_at)}{_by(acknowledged_by(incident))}; "
        f"resolved: {_when(incident.resolved_at)}",
        f"- Time to acknowledge: {duration(incident.time_to_acknowledge)}",
        f"- Time to resolve: {duration(incident.time_to_resolve)}",
        f"- Owner: {incident.owner.get_username() if incident.owner else '—'}",
        "",
        "## Impact",
        "",
        f"- Hosts: {', '.join(h.name for h in incident.hosts.all()) or '—'}",
        f"- Instances: {', '.join(i.name for i in incident.instances.all()) or '—'}",
        f"- Models: {', '.join(incident.models_affected) or '—'}",
        "",
        "## Timeline",
        "",
    ]
    for entry in incident.timeline.all():
        who = f" ({entry.author})" if entry.author else ""
        lines.append(f"- {_when(entry.at)}: {entry.get_kind_display()}{who}: {entry.text}".rstrip(": "))
    for title, body in (
        ("Root cause", incident.root_cause),
        ("Resolution", incident.resolution),
        ("Follow-up actions", incident.follow_ups),
    ):
        lines += ["", f"## {title}", "", body or "—"]
    evidence = incident.evidence.get("instances", {}) if incident.evidence else {}
    if evidence:
        lines += ["", "## Evidence when it opened", ""]
        for name, facts in evidence.items():
            findings = "; ".join(
                f.get("evidence", "") for f in facts.get("findings", []) if f.get("evidence")
            )
            head = f"- {name} ({facts.get('model', '')} on {facts.get('host', '')}): {facts.get('verdict')}"
            lines.append(head + (f" — {findings}" if findings else ""))
    return "\n".join(lines) + "\n"
