"""Signed job events: queue one delivery per finished job, attempt it, retry it, re-send it.

Events are Standard Webhooks messages: headers ``webhook-id`` (the delivery's id, the same on
every attempt), ``webhook-timestamp`` and ``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` of
``id.timestamp.body``, one per unexpired tenant secret, space-separated, so a rotation overlaps).
The body holds the job id, status, error code and links, never document text.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets as pysecrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from apps.jobs import enqueue
from apps.jobs.models import Job
from apps.webhooks import egress
from apps.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookSecret
from ocrsite import backoff
from ocrsite.vocabulary import ErrorCode, TaskName

log = logging.getLogger(__name__)

EVENTS = {Job.Status.DONE: "job.done", Job.Status.FAILED: "job.failed", Job.Status.CANCELLED: "job.cancelled"}
EXCERPT_CHARS = 500


# --- secrets ------------------------------------------------------------------------------------


def new_secret() -> str:
    return "whsec_" + base64.b64encode(pysecrets.token_bytes(32)).decode()


def signing_secrets(tenant: str) -> list[str]:
    """The tenant's unexpired secrets, newest first; the first event of a tenant creates one."""
    now = timezone.now()
    active = WebhookSecret.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), tenant=tenant)
    found = list(active.order_by("-created_at").values_list("secret", flat=True))
    # Two first events racing may each create one: both then sign, and the admin lists both.
    return found or [WebhookSecret.objects.create(tenant=tenant, secret=new_secret()).secret]


def rotate_secret(tenant: str, overlap: timedelta | None = None) -> WebhookSecret:
    """A new secret signs from now on; the current ones keep signing alongside it for ``overlap``."""
    overlap = overlap if overlap is not None else timedelta(hours=settings.OCR_WEBHOOK_ROTATION_OVERLAP_H)
    now = timezone.now()
    with transaction.atomic():
        WebhookSecret.objects.filter(tenant=tenant).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=now + overlap)
        ).update(expires_at=now + overlap)
        return WebhookSecret.objects.create(tenant=tenant, secret=new_secret())


def sign(msg_id: str, timestamp: datetime, body: str, secrets: list[str]) -> str:
    return " ".join(Webhook(secret).sign(msg_id, timestamp, body) for secret in secrets)


# --- events -------------------------------------------------------------------------------------


def _absolute(path: str) -> str:
    return f"{settings.OCR_PUBLIC_URL}{path}"


def event_payload(job: Job) -> dict:
    detail = reverse("job-detail", args=[job.pk])
    result = reverse("job-result", args=[job.pk])
    return {
        "type": EVENTS[job.status],
        "timestamp": timezone.now().isoformat(),
        "data": {
            "job_id": str(job.pk),
            "status": job.status,
            "error_code": job.error_code or None,
            "pages": {"done": job.pages_done, "failed": job.pages_failed, "total": job.page_count},
            "links": {
                "self": _absolute(detail),
                "markdown": _absolute(f"{result}?format=markdown"),
                "json": _absolute(f"{result}?format=json"),
            },
        },
    }


def on_job_finished(sender=None, job_id=None, **_) -> None:
    """``services.job_finished`` receiver: a delivery for a job that carries a callback URL."""
    job = Job.objects.filter(pk=job_id).first()
    url = (job.options or {}).get("callback_url") if job else None
    if not job or not url or job.status not in EVENTS:
        return
    delivery = WebhookDelivery.objects.create(
        job=job,
        tenant=job.tenant,
        event=EVENTS[job.status],
        url=url,
        payload=event_payload(job),
        next_attempt_at=timezone.now(),
    )
    transaction.on_commit(lambda: enqueue.send(TaskName.DELIVER_WEBHOOK, str(delivery.pk), 1))


def resend(delivery_id, actor: str = "") -> bool:
    """Operator's re-send: one more attempt now, whatever happened before; the log keeps counting."""
    with transaction.atomic():
        delivery = WebhookDelivery.objects.select_for_update().filter(pk=delivery_id).first()
        if delivery is None:
            return False
        delivery.status = WebhookDelivery.Status.PENDING
        delivery.next_attempt_at = timezone.now()
        delivery.save(update_fields=["status", "next_attempt_at", "updated_at"])
        number = delivery.attempts + 1
        transaction.on_commit(lambda: enqueue.send(TaskName.DELIVER_WEBHOOK, str(delivery_id), number))
    log.info("webhook re-send", extra={"delivery": str(delivery_id), "actor": actor})
    return True


def resend_lost(limit: int = 1000) -> int:
    """Beat: pending deliveries whose next attempt is long overdue lost their message (a Redis
    restart, a worker gone with it): send that attempt again. The attempt number is the claim,
    so a message that was only late, not lost, and this one cannot both POST."""
    overdue = timezone.now() - timedelta(seconds=settings.OCR_STALE_AFTER)
    rows = list(
        WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lt=overdue)
        .order_by("next_attempt_at")
        .values_list("pk", "attempts")[:limit]
    )
    for pk, attempts in rows:
        enqueue.send(TaskName.DELIVER_WEBHOOK, str(pk), attempts + 1)
    return len(rows)


# --- one attempt --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    status_code: int | None = None
    error_code: str = ""
    error: str = ""
    excerpt: str = ""
    permanent: bool = False

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def backoff_s(attempt: int) -> float:
    """Exponential (base × 2^(n-1), capped) with ±10% jitter, so retries of one outage spread out
    while the receiver still sees the schedule it was promised."""
    return backoff.backoff_s(
        attempt, settings.OCR_WEBHOOK_BACKOFF_S, settings.OCR_WEBHOOK_BACKOFF_MAX_S, low=0.9, high=1.1
    )


def attempt(delivery_id: str, number: int) -> WebhookAttempt | None:
    """POST attempt ``number`` of a delivery if it is still that attempt's turn; schedule the next."""
    now = timezone.now()
    # The claim also leases the delivery past this attempt's longest run, so resend_lost() does not
    # take an attempt still in flight for a lost one.
    lease = now + timedelta(seconds=settings.OCR_WEBHOOK_TIMEOUT_S * 2 + 60)
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=WebhookDelivery.Status.PENDING, attempts=number - 1
    ).update(attempts=number, next_attempt_at=lease, updated_at=now)
    if not claimed:
        return None  # a duplicate message, or superseded by a re-send
    delivery = WebhookDelivery.objects.get(pk=delivery_id)
    body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True)
    started = time.monotonic()
    outcome = post(delivery, body, now)
    latency_ms = int((time.monotonic() - started) * 1000)
    row = WebhookAttempt.objects.create(
        delivery=delivery,
        number=number,
        started_at=now,
        status_code=outcome.status_code,
        latency_ms=latency_ms,
        error_code=outcome.error_code,
        error=outcome.error[:2000],
        response_excerpt=outcome.excerpt,
    )
    update = {
        "last_status_code": outcome.status_code,
        "last_error_code": outcome.error_code,
        "updated_at": timezone.now(),
    }
    if outcome.ok:
        update["status"] = WebhookDelivery.Status.DELIVERED
        update["next_attempt_at"] = None
    elif outcome.permanent or number >= settings.OCR_WEBHOOK_MAX_ATTEMPTS:
        update["status"] = WebhookDelivery.Status.FAILED
        update["next_attempt_at"] = None
    else:
        delay = backoff_s(number)
        update["next_attempt_at"] = timezone.now() + timedelta(seconds=delay)
        enqueue.send(TaskName.DELIVER_WEBHOOK, str(delivery.pk), number + 1, countdown=delay)
    WebhookDelivery.objects.filter(pk=delivery.pk, attempts=number).update(**update)
    log.info(
        "webhook attempt",
        extra={
            "delivery": str(delivery.pk),
            "attempt": number,
            "status_code": outcome.status_code,
            "error_code": outcome.error_code,
        },
    )
    return row


def post(delivery: WebhookDelivery, body: str, now: datetime) -> Outcome:
    headers = {
        "content-type": "application/json",
        "user-agent": "ocr-platform-webhooks/1",
        "webhook-id": str(delivery.pk),
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": sign(str(delivery.pk), now, body, signing_secrets(delivery.tenant)),
    }
    timeout = settings.OCR_WEBHOOK_TIMEOUT_S
    cap = settings.OCR_WEBHOOK_MAX_RESPONSE_BYTES
    deadline = time.monotonic() + timeout
    # The platform's allowed networks, and this tenant's own: one tenant's in-cluster receiver
    # never opens that network to the others.
    allow = egress.parse_nets([*settings.OCR_WEBHOOK_ALLOW_NETS, *egress.tenant_allow_nets(delivery.tenant)])
    try:
        with (
            # A total deadline, not only a per-read timeout: a receiver that sends one header byte
            # every few seconds would otherwise hold the delivery for as long as it likes.
            egress.guarded_client(allow, timeout, deadline=deadline) as client,
            client.stream("POST", delivery.url, content=body.encode(), headers=headers) as response,
        ):
            # Only the start of the answer is kept: a receiver cannot make us read (or wait) forever.
            received = b""
            for chunk in response.iter_bytes():
                received += chunk[: cap - len(received)]
                if len(received) >= cap or time.monotonic() > deadline:
                    break
            excerpt = received[:EXCERPT_CHARS].decode("utf-8", "replace")
            if response.is_success:
                return Outcome(response.status_code, excerpt=excerpt)
            return Outcome(
                response.status_code,
                ErrorCode.WEBHOOK_HTTP_STATUS,
                f"the receiver answered {response.status_code}",
                excerpt,
            )
    except egress.AddressRefused as exc:
        return Outcome(error_code=ErrorCode.WEBHOOK_ADDRESS_REFUSED, error=str(exc), permanent=True)
    except egress.ResolveFailed as exc:
        return Outcome(error_code=ErrorCode.WEBHOOK_DNS, error=str(exc))
    except httpx.TimeoutException as exc:
        return Outcome(error_code=ErrorCode.WEBHOOK_TIMEOUT, error=f"{type(exc).__name__}: {exc}")
    except httpx.HTTPError as exc:
        return Outcome(error_code=ErrorCode.WEBHOOK_CONNECT, error=f"{type(exc).__name__}: {exc}")
