"""A GPU host's agent: this project's Celery worker started on the host, consuming the
host's queues (fleet.agent.routing). The row holds what the agent last said: its
heartbeat, its GPU reading and its snapshot of the host's checks (docs/host-agent.md)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from fleet.models.hosts import GpuHost


def new_salt() -> str:
    return secrets.token_hex(8)


def new_request_id() -> str:
    return secrets.token_hex(16)


class HostAgent(models.Model):
    # An agent heartbeats every HEARTBEAT_S; one silent for MISSING_AFTER is missing.
    HEARTBEAT_S = 30
    MISSING_AFTER = timedelta(seconds=3 * HEARTBEAT_S)

    host = models.OneToOneField(GpuHost, on_delete=models.CASCADE, related_name="agent")
    token_salt = models.CharField(
        max_length=32,
        default=new_salt,
        help_text=_("Part of the host's agent credential; a new one revokes the old credential."),
    )
    enrolled_at = models.DateTimeField(auto_now_add=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    hostname = models.CharField(max_length=253, blank=True, help_text=_("As the agent reports it."))
    agent_version = models.CharField(max_length=64, blank=True)
    pid = models.PositiveIntegerField(_("PID"), null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)
    gpu_reading = models.JSONField(_("GPU reading"), null=True, blank=True)
    gpu_reading_at = models.DateTimeField(_("GPU reading at"), null=True, blank=True)
    gpu_error = models.TextField(_("GPU error"), blank=True)
    snapshot = models.JSONField(null=True, blank=True)
    snapshot_at = models.DateTimeField(null=True, blank=True)
    rejected_reports = models.PositiveIntegerField(
        default=0, help_text=_("Reports for this host whose signature did not check out.")
    )

    class Meta:
        verbose_name = _("host agent")
        verbose_name_plural = _("host agents")
        ordering = ["host__name"]

    def __str__(self) -> str:
        return f"agent on {self.host.name}" if self.host_id else "agent"

    def is_missing(self, *, now: datetime | None = None) -> bool:
        """No heartbeat yet, or none for MISSING_AFTER."""
        now = now or timezone.now()
        return self.last_heartbeat_at is None or now - self.last_heartbeat_at > self.MISSING_AFTER


class AgentRequest(models.Model):
    """One check asked of a host's agent whose answer someone waits for (a pre-deploy
    checklist, a log pull): the answer lands here by its request id, and
    fleet.agent.signals.agent_answered tells whoever asked."""

    class Status(models.TextChoices):
        SENT = "sent", _("sent")
        ANSWERED = "answered", _("answered")
        EXPIRED = "expired", _("no answer")

    host = models.ForeignKey(GpuHost, on_delete=models.CASCADE, related_name="agent_requests")
    request_id = models.CharField(_("request ID"), max_length=32, unique=True, default=new_request_id)
    task = models.CharField(max_length=32)  # the agent task, e.g. agent.pull_logs
    purpose = models.CharField(max_length=64, blank=True, help_text=_("Who asked, e.g. incident:42."))
    sent_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    answered_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.SENT)
    answer = models.JSONField(null=True, blank=True)

    class Meta:
        verbose_name = _("agent request")
        verbose_name_plural = _("agent requests")
        ordering = ["-sent_at"]

    def __str__(self) -> str:
        return f"{self.task} on {self.host_id} ({self.status})"

    def shown_status(self, *, now: datetime | None = None) -> str:
        """sent, answered, or expired once its time passed unanswered."""
        if self.status == self.Status.SENT and (now or timezone.now()) > self.expires_at:
            return self.Status.EXPIRED
        return self.status
