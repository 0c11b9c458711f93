"""Celery tasks of the incidents app: thin wrappers around their services."""

from celery import shared_task
from django.conf import settings

RETRY_CEILING_S = 300


# max_retries: delivery.MAX_ATTEMPTS - 1 (not imported: this module loads before the models).
@shared_task(name="incidents.send_delivery", ignore_result=True, bind=True, max_retries=4)
def send_delivery(self, *, delivery_id: int) -> None:
    """Send one notification; retried with exponential backoff (NOTIFY_RETRY_BACKOFF_S, then
    twice as long each time, at most five minutes) while the target fails. The delivery row
    counts the attempts and marks itself failed after the last."""
    from incidents import delivery

    if delivery.send(delivery_id=delivery_id) == delivery.RETRY:
        base = getattr(settings, "NOTIFY_RETRY_BACKOFF_S", 5)
        raise self.retry(countdown=min(base * 2**self.request.retries, RETRY_CEILING_S))


@shared_task(name="incidents.evaluate_alerts", ignore_result=True, soft_time_limit=120, time_limit=150)
def evaluate_alerts() -> None:
    """The alert rules over the latest probe data; beat sends it every 15 s."""
    from incidents import alerting

    alerting.evaluate()


@shared_task(name="incidents.run_drill", ignore_result=True, soft_time_limit=900, time_limit=960)
def run_drill(*, run_id: int) -> None:
    """Replay a drill's scenario, recording progress and the report on its run row."""
    from incidents.drills import service

    service.run_stored(run_id=run_id)


@shared_task(
    name="incidents.process_alert_delivery",
    ignore_result=True,
    bind=True,
    max_retries=3,
    soft_time_limit=240,
    time_limit=300,
)
def process_alert_delivery(self, *, delivery_id: int) -> None:
    """Turn a stored Alertmanager payload into alerts and incidents, with any others waiting;
    retried a few times (5 s, then twice as long each time) when it fails, after which the
    sweep takes it."""
    from incidents import alert_deliveries

    if alert_deliveries.process_waiting(delivery_id=delivery_id) == alert_deliveries.Result.FAILED:
        raise self.retry(countdown=5 * 2**self.request.retries)


@shared_task(name="incidents.sweep_alert_deliveries", ignore_result=True, soft_time_limit=240, time_limit=300)
def sweep_alert_deliveries() -> None:
    """Process the Alertmanager payloads left unprocessed, oldest first; beat sends it every minute."""
    from incidents import alert_deliveries

    alert_deliveries.sweep()
