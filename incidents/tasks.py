"""Celery tasks of the incidents app: thin wrappers around their services."""

from celery import shared_task


@shared_task(name="incidents.send_delivery", ignore_result=True, bind=True, max_retries=5)
def send_delivery(self, *, delivery_id: int) -> None:
    """Send one notification; retried with backoff while the target fails."""
    from incidents import delivery

    if delivery.send(delivery_id=delivery_id) == "retry":
        raise self.retry(countdown=min(2**self.request.retries * 5, 300))


@shared_task(name="incidents.evaluate_alerts", ignore_result=True, soft_time_limit=120, time_limit=150)
def evaluate_alerts() -> None:
    """The alert rules over the latest probe data; sent after each probe cycle."""
    from incidents import alerting

    alerting.evaluate()
