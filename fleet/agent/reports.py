"""What agents send back, received on the central worker (task fleet.agent_report).

A report is an envelope {host, kind, sent_at, body, signature}. It is checked before
anything is stored: its size, its shape, the host (known, with an agent enrolled), its
signature under that host's token and its age. A refused report changes nothing but the
host's count of rejected reports, and says why in the worker's log."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from fleet.agent.credentials import agent_token, signature_ok
from fleet.agent.signals import agent_answered
from fleet.models import AgentRequest, HostAgent
from fleet.nvml.base import NvmlReading

log = logging.getLogger("fleet.agent")

MAX_REPORT_BYTES = 512 * 1024
# A report older than this (a broker backlog, a replay) or dated in the future is refused.
MAX_AGE = timedelta(minutes=10)
MAX_SKEW = timedelta(minutes=2)
KINDS = frozenset({"heartbeat", "gpus", "snapshot", "misrouted", "answer"})


class ReportRefused(Exception):
    """The report was not stored; the message says why."""


def token_for(agent: HostAgent) -> str:
    return agent_token(host=agent.host.name, salt=agent.token_salt, secret_key=settings.SECRET_KEY)


def _checked(envelope: Any, *, now: datetime) -> tuple[HostAgent, str, dict[str, Any]]:
    if not isinstance(envelope, dict):
        raise ReportRefused("a report must be a JSON object")
    try:
        size = len(json.dumps(envelope))
    except (TypeError, ValueError):
        raise ReportRefused("a report must be plain JSON") from None
    if size > MAX_REPORT_BYTES:
        raise ReportRefused(f"a report of {size} bytes passes the limit of {MAX_REPORT_BYTES}")
    host, kind, body, sent_at = (envelope.get(k) for k in ("host", "kind", "body", "sent_at"))
    if not isinstance(host, str) or kind not in KINDS or not isinstance(body, dict):
        raise ReportRefused(f"a report needs host, a kind of {sorted(KINDS)} and a body object")
    if not isinstance(sent_at, int | float) or isinstance(sent_at, bool):
        raise ReportRefused("a report needs sent_at, seconds since the epoch")
    agent = HostAgent.objects.select_related("host").filter(host__name=host).first()
    if agent is None:
        raise ReportRefused(f"no agent is enrolled for host {host!r}")
    if not signature_ok(token=token_for(agent), envelope=envelope):
        HostAgent.objects.filter(pk=agent.pk).update(rejected_reports=F("rejected_reports") + 1)
        raise ReportRefused(f"the report for host {host!r} is not signed with its agent's token")
    sent = datetime.fromtimestamp(sent_at, tz=UTC)
    if sent < now - MAX_AGE or sent > now + MAX_SKEW:
        raise ReportRefused(f"the report for host {host!r} was sent at {sent.isoformat()}: too old or ahead")
    return agent, kind, body


def receive(*, envelope: Any) -> HostAgent:
    """Check and store one report; ReportRefused when it cannot be trusted or read. Any
    accepted report counts as a heartbeat."""
    now = timezone.now()
    agent, kind, body = _checked(envelope, now=now)
    agent.last_heartbeat_at = now
    fields = ["last_heartbeat_at"]
    if kind == "heartbeat":
        fields += _heartbeat(agent, body)
    elif kind == "gpus":
        fields += _gpus(agent, body, now)
    elif kind == "snapshot":
        agent.snapshot, agent.snapshot_at = body, now
        fields += ["snapshot", "snapshot_at"]
    elif kind == "answer":
        _answer(agent, body, now)
    elif kind == "misrouted":
        log.error("agent on %s refused a task for host %s", agent.host.name, body.get("task_host"))
    agent.save(update_fields=fields)
    if kind == "snapshot":
        from fleet.agent.status import record_rss

        record_rss(agent)
    return agent


def _heartbeat(agent: HostAgent, body: dict[str, Any]) -> list[str]:
    agent.hostname = str(body.get("hostname", ""))[:253]
    agent.agent_version = str(body.get("agent_version", ""))[:64]
    pid = body.get("pid")
    agent.pid = pid if isinstance(pid, int) and 0 < pid < 2**31 else None
    started = body.get("started_at")
    agent.started_at = (
        datetime.fromtimestamp(started, tz=UTC) if isinstance(started, int | float) and started > 0 else None
    )
    capabilities = body.get("capabilities")
    agent.capabilities = capabilities if isinstance(capabilities, dict) else {}
    return ["hostname", "agent_version", "pid", "started_at", "capabilities"]


def _gpus(agent: HostAgent, body: dict[str, Any], now: datetime) -> list[str]:
    agent.gpu_reading_at = now
    if "reading" in body:
        try:
            agent.gpu_reading, agent.gpu_error = NvmlReading.from_dict(body["reading"]).to_dict(), ""
        except (ValueError, TypeError) as exc:
            agent.gpu_reading, agent.gpu_error = None, f"the agent sent a bad reading: {exc}"
    else:
        agent.gpu_reading, agent.gpu_error = None, str(body.get("error") or "no reading")[:1000]
    return ["gpu_reading", "gpu_reading_at", "gpu_error"]


def _answer(agent: HostAgent, body: dict[str, Any], now: datetime) -> None:
    """The answer to an AgentRequest of this host; one for another host's request, an unknown
    or an already answered one is dropped (and logged)."""
    request_id = body.get("request_id")
    answer = body.get("answer")
    request = AgentRequest.objects.filter(request_id=str(request_id), host=agent.host).first()
    if request is None or request.status != AgentRequest.Status.SENT or not isinstance(answer, dict):
        log.warning("agent on %s answered an unknown request %r", agent.host.name, request_id)
        return
    request.answer, request.answered_at, request.status = answer, now, AgentRequest.Status.ANSWERED
    request.save(update_fields=["answer", "answered_at", "status"])
    agent_answered.send(sender=AgentRequest, request=request)
