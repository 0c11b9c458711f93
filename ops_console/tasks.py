import socket

from celery import shared_task
from django.utils import timezone

from ops_console.models import WorkerHeartbeat


@shared_task(name="ops_console.heartbeat", ignore_result=True)
def heartbeat() -> None:
    WorkerHeartbeat.objects.update_or_create(
        worker=socket.gethostname(), defaults={"beat_at": timezone.now()}
    )
