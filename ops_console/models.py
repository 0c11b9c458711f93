from django.db import models


class WorkerHeartbeat(models.Model):
    """Written by a periodic task, so /healthz can tell that worker and beat are alive."""

    worker = models.CharField(max_length=200, unique=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.worker} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
