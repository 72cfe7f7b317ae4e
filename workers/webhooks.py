"""Webhook delivery [queue: webhooks]: one POST attempt per message, by delivery id and attempt
number, within OCR_WEBHOOK_TIMEOUT_S in all (``apps.webhooks.egress``: a total deadline, so a
receiver that trickles its answer cannot hold a delivery longer). Its own queue: a receiver's
latency never takes a slot of the pipeline's ``cpu`` queue; KEDA wakes the tier on pending
deliveries due, counted in PostgreSQL. The beat's re-send of lost
deliveries stays on ``cpu`` (a database scan), so the webhook tier may sleep at zero.

The attempt number is the claim (``apps.webhooks.services.attempt``), so a redelivered message
sends nothing twice; the attempt schedules its own successor with exponential backoff.
"""

from __future__ import annotations

from apps.webhooks import services
from ocrsite.celery import app
from ocrsite.vocabulary import TaskName


@app.task(name=TaskName.DELIVER_WEBHOOK.value, max_retries=0)
def deliver_webhook(delivery_id: str, attempt: int) -> None:
    """POST one signed event; retries are new messages with a countdown, logged per attempt."""
    services.attempt(delivery_id, attempt)


@app.task(name=TaskName.RESEND_LOST_WEBHOOKS.value, max_retries=0)
def resend_lost_webhooks() -> int:
    """Beat, every OCR_SWEEP_EVERY s: re-send deliveries whose retry message was lost."""
    return services.resend_lost()
