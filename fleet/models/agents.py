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
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)
    gpu_reading = models.JSONField(null=True, blank=True)
    gpu_reading_at = models.DateTimeField(null=True, blank=True)
    gpu_error = models.TextField(blank=True)
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
