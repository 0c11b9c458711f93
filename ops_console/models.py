from django.db import models
from django.utils.translation import gettext_lazy as _


class WorkerHeartbeat(models.Model):
    """Written by a periodic task, so /healthz can tell that worker and beat are alive."""

    worker = models.CharField(max_length=200, unique=True)
    beat_at = models.DateTimeField()

    class Meta:
        verbose_name = _("worker heartbeat")
        verbose_name_plural = _("worker heartbeats")

    def __str__(self) -> str:
        return f"{self.worker} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
