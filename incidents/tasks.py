"""Celery tasks of the incidents app: thin wrappers around their services."""

from celery import shared_task


@shared_task(name="incidents.send_delivery", ignore_result=True, bind=True, max_retries=5)
def send_delivery(self, *, delivery_id: int) -> None:
    """Send one notification; retried with backoff while the target fails."""
    from incidents import delivery

    if delivery.send(delivery_id=delivery_id) == "retry":
        raise self.retry(countdown=min(2**self.request.retries * 5, 300))
