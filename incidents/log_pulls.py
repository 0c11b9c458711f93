"""When an incident opens on an instance whose host has an agent, the agent pulls the
engine's last lines of log (its container's, or its systemd unit's journal; bounded, secrets
redacted) and the console triages them and attaches the result to the incident's timeline,
so the on-call engineer finds the log's verdict there instead of asking for the log."""

from __future__ import annotations

import logging

from django.core.files.base import ContentFile
from django.utils import timezone

from core.i18n import Message, later
from diagnostics.models import TriageRun
from diagnostics.triage.engine import triage_text
from fleet.agent.dispatch import ask
from fleet.agent.status import agent_of, log_source_for
from fleet.models import AgentRequest
from incidents import lifecycle, words
from incidents.models import Incident, TimelineEntry

log = logging.getLogger("incidents")

LINES = 300
ANSWER_WITHIN_S = 120
MAX_INSTANCES = 5
PURPOSE = "incident"


def request_engine_logs(*, incident_id: int) -> list[AgentRequest]:
    """Ask the agents of the incident's instances for their engines' logs."""
    incident = Incident.objects.filter(pk=incident_id).first()
    if incident is None:
        return []
    asked = []
    for instance in incident.instances.select_related("host", "host__agent")[:MAX_INSTANCES]:
        agent = agent_of(instance.host)
        source = log_source_for(instance) if agent and not agent.is_missing() else None
        if source is None:
            continue
        asked.append(
            ask(
                "agent.pull_logs",
                host=instance.host,
                purpose=f"{PURPOSE}:{incident.pk}:{instance.pk}",
                expires_s=ANSWER_WITHIN_S,
                source=source,
                lines=LINES,
            )
        )
    return asked


def attach_pulled_log(request: AgentRequest) -> TimelineEntry | None:
    """Triage a pulled log and put the verdict on the incident's timeline (connected to
    fleet's agent_answered)."""
    kind, _, rest = request.purpose.partition(":")
    incident_id, _, instance_id = rest.partition(":")
    if kind != PURPOSE or not incident_id.isdigit():
        return None
    incident = Incident.objects.filter(pk=int(incident_id)).first()
    instance = (
        incident.instances.filter(pk=int(instance_id)).first() if incident and instance_id.isdigit() else None
    )
    if incident is None or instance is None:
        return None
    pulled = (request.answer or {}).get("log") or {}
    source = pulled.get("source") or {}
    where = f"{source.get('kind', '?')} {source.get('target', '?')}"
    text = pulled.get("text") if isinstance(pulled.get("text"), str) else ""
    now = timezone.now()
    if pulled.get("error") or (request.answer or {}).get("error") or not text.strip():
        why = pulled.get("error") or (request.answer or {}).get("error") or later("the log was empty")
        return TimelineEntry.objects.create(
            incident=incident,
            at=now,
            kind=TimelineEntry.Kind.NOTE,
            author="agent",
            data={"pulled_from": source, "host": request.host.name},
            **lifecycle.entry_text(
                later(
                    "The agent on %(host)s could not pull %(instance)s's log (%(where)s): %(why)s",
                    host=request.host.name,
                    instance=instance.name,
                    where=where,
                    why=Message.from_json(why) if isinstance(why, dict) and "msgid" in why else str(why),
                )
            ),
        )
    result = triage_text(text).to_dict()
    run = TriageRun(
        filename=f"{instance.name}-{source.get('target', 'log')}.log"[:255],
        size_bytes=len(text.encode()),
        bytes_read=len(text.encode()),
        status=TriageRun.Status.DONE,
        result=result,
        created_by=f"agent@{request.host.name}",
        finished_at=now,
    )
    run.file.save(run.filename, ContentFile(text.encode()), save=False)
    run.save()
    found = words.category(result["category"]) if result.get("category") else later("no known failure")
    return TimelineEntry.objects.create(
        incident=incident,
        at=now,
        kind=TimelineEntry.Kind.TRIAGE,
        author="agent",
        data={
            "triage": run.pk,
            "category": result.get("category"),
            "cause": result.get("root_cause"),
            "pulled_from": source,
            "host": request.host.name,
            "truncated": bool(pulled.get("truncated")),
        },
        **lifecycle.entry_text(
            later(
                "%(instance)s's last %(lines)s log lines, pulled from %(where)s on %(host)s: %(found)s",
                instance=instance.name,
                lines=LINES,
                where=where,
                host=request.host.name,
                found=found,
            )
        ),
    )
