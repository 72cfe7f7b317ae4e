"""Verify the platform's webhook deliveries (Standard Webhooks: webhook-id, -timestamp, -signature).

The secret is the ``whsec_...`` string the platform shows for the tenant. During a rotation the
platform signs with both the old and the new secret, so a receiver may keep the old one until it
has switched; pass every secret it should accept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def verify_webhook(body: bytes | str, headers: Mapping[str, str], *secrets: str) -> dict[str, Any]:
    """The event as a dict if any of ``secrets`` signed it within the tolerance; else raises."""
    if not secrets:
        raise ValueError("pass at least one webhook secret")
    lowered = {k.lower(): v for k, v in headers.items()}
    payload = body.decode() if isinstance(body, bytes) else body
    last: Exception | None = None
    for secret in secrets:
        try:
            Webhook(secret).verify(payload, lowered)
            return json.loads(payload)
        except WebhookVerificationError as exc:
            last = exc
    raise WebhookVerificationError(str(last))


__all__ = ["WebhookVerificationError", "verify_webhook"]
