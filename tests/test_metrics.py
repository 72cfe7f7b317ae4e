"""Who may read /metrics: loopback without a token, anyone with the bearer token, no one else.

What /metrics counts is checked against a real run in tests/test_retry.py."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
def test_metrics_needs_token_or_loopback(settings):
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_TOKEN = ""
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    settings.METRICS_TOKEN = "s3cret"
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 401
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401
    ok = Client(REMOTE_ADDR="10.1.2.3").get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
    assert ok.status_code == 200 and b"ocr_queue_depth" in ok.content
