"""Webhook secrets per tenant, one delivery per job event, one attempt row per POST.

A delivery's id is the Standard Webhooks ``webhook-id``: the same on every attempt, so a receiver
that saw it once can drop a repeat. Its ``attempts`` counter is the claim: an attempt message
names the number it will be, and only the message that moves the counter from n-1 to n sends
(a message delivered twice, or a re-send racing a retry, cannot POST twice).
"""

from __future__ import annotations

import uuid

from django.db import models

from apps.jobs.models import Job


class WebhookSecret(models.Model):
    """A tenant's signing secret (``whsec_`` + base64). Every unexpired one signs each event."""

    tenant = models.CharField(max_length=100, db_index=True)
    secret = models.CharField(max_length=100, help_text="give this to the tenant; they verify with it")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="set by a rotation: signs until then")

    class Meta:
        ordering = ["tenant", "-created_at"]

    def __str__(self) -> str:
        return f"{self.tenant}: {self.secret[:10]}…"


class WebhookDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.ForeignKey(Job, null=True, on_delete=models.SET_NULL, related_name="webhook_deliveries")
    tenant = models.CharField(max_length=100, db_index=True)
    event = models.CharField(max_length=32, help_text="job.done, job.failed or job.cancelled")
    url = models.URLField(max_length=2000)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error_code = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        permissions = [("resend_webhookdelivery", "Can re-send a webhook event")]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="webhook_status_next")]

    def __str__(self) -> str:
        return f"{self.event} → {self.url} ({self.status})"


class WebhookAttempt(models.Model):
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    response_excerpt = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="webhook_attempt_number")]

    def __str__(self) -> str:
        return f"attempt {self.number}: {self.status_code or self.error_code}"
