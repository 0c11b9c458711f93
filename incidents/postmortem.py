"""An incident as a Markdown postmortem: summary, impact, timeline, root cause, resolution,
follow-ups and the evidence captured when it opened.

Whatever people or probes wrote goes in through core.safe_markdown: the file is rendered
later by tools we do not control, so links may only lead to web and mail addresses and raw
HTML shows as text.
"""

from __future__ import annotations

from django.utils.translation import gettext

from core.safe_markdown import inert_line, inert_markdown
from incidents.lifecycle import acknowledged_by
from incidents.models import Incident
from incidents.people_format import duration


def _when(value) -> str:  # noqa: ANN001
    return value.strftime("%Y-%m-%d %H:%M:%S %Z") if value else "—"


def _by(user: str) -> str:
    return gettext(" by %(user)s") % {"user": inert_line(user)} if user else ""


def postmortem(incident: Incident) -> str:
    """In the active language; names, keys and times as they are."""
    names = {
        "hosts": inert_line(", ".join(h.name for h in incident.hosts.all())) or "—",
        "instances": inert_line(", ".join(i.name for i in incident.instances.all())) or "—",
        "models": inert_line(", ".join(map(str, incident.models_affected))) or "—",
    }
    lines = [
        gettext("# Postmortem: %(title)s") % {"title": inert_line(incident.shown_title)},
        "",
        gettext("- Category: %(label)s (`%(key)s`)")
        % {"label": incident.get_category_display(), "key": inert_line(incident.category)},
        gettext("- Severity: %(severity)s; status: %(status)s")
        % {"severity": incident.get_severity_display(), "status": incident.get_status_display()},
        gettext("- Started: %(started)s; detected: %(detected)s")
        % {"started": _when(incident.started_at), "detected": _when(incident.detected_at)},
        gettext("- Acknowledged: %(acknowledged)s%(by)s; resolved: %(resolved)s")
        % {
            "acknowledged": _when(incident.acknowledged_at),
            "by": _by(acknowledged_by(incident)),
            "resolved": _when(incident.resolved_at),
        },
        gettext("- Time to acknowledge: %(duration)s") % {"duration": duration(incident.time_to_acknowledge)},
        gettext("- Time to resolve: %(duration)s") % {"duration": duration(incident.time_to_resolve)},
        gettext("- Owner: %(owner)s") % {"owner": incident.owner.get_username() if incident.owner else "—"},
        "",
        gettext("## Impact"),
        "",
        gettext("- Hosts: %(hosts)s") % names,
        gettext("- Instances: %(instances)s") % names,
        gettext("- Models: %(models)s") % names,
        "",
        gettext("## Timeline"),
        "",
    ]
    for entry in incident.timeline.all():
        who = f" ({inert_line(entry.author)})" if entry.author else ""
        text = inert_markdown(entry.shown_text)
        lines.append(f"- {_when(entry.at)}: {entry.get_kind_display()}{who}: {text}".rstrip(": "))
    for title, body in (
        (gettext("Root cause"), incident.root_cause),
        (gettext("Resolution"), incident.resolution),
        (gettext("Follow-up actions"), incident.follow_ups),
    ):
        lines += ["", f"## {title}", "", inert_markdown(body) or "—"]
    evidence = incident.evidence.get("instances", {}) if incident.evidence else {}
    if evidence:
        lines += ["", gettext("## Evidence when it opened"), ""]
        for name, facts in evidence.items():
            findings = inert_line(
                "; ".join(str(f["evidence"]) for f in facts.get("findings", []) if f.get("evidence"))
            )
            head = gettext("- %(instance)s (%(model)s on %(host)s): %(verdict)s") % {
                "instance": inert_line(name),
                "model": inert_line(facts.get("model", "")),
                "host": inert_line(facts.get("host", "")),
                "verdict": inert_line(str(facts.get("verdict"))),
            }
            lines.append(head + (f" — {findings}" if findings else ""))
    return "\n".join(lines) + "\n"
