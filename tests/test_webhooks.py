"""Signed webhooks end to end: a real worker POSTs to a receiver on 127.0.0.1 in this process.

The webhook worker is allow-listed for 127.0.0.1/32 only (loopback is refused by default, and the
tests need a receiver they can run); the shared worker is paused while these tests run so every
delivery goes through the allow-listed one.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from celery import current_app
from django.contrib.auth import get_user_model
from django.utils import timezone
from ocrclient import verify_webhook
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.api.models import TenantAPIKey
from apps.jobs import services as job_services
from apps.jobs.models import Job
from apps.webhooks import egress
from apps.webhooks import services as hooks
from apps.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookSecret
from tests.support.documents import dev_file
from tests.support.queues import Broker

HOOK_WORKER_ENV = {
    "OCR_WEBHOOK_ALLOW_NETS": "127.0.0.1/32",
    "OCR_WEBHOOK_BACKOFF_S": "0.3",
    "OCR_WEBHOOK_MAX_ATTEMPTS": "4",
    "OCR_WEBHOOK_TIMEOUT_S": "5",
    "OCR_PUBLIC_URL": "https://ocr.example.test",
}


class Receiver:
    """An HTTP receiver that answers each POST with the next scripted status (then 200)."""

    def __init__(self, host: str = "127.0.0.1", script: list[int] | None = None) -> None:
        self.script = list(script or [])
        self.received: list[tuple[dict[str, str], bytes, float]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()))
                status = receiver.script.pop(0) if receiver.script else 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"boom")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/hooks/ocr"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received) < n:
            assert time.monotonic() < deadline, f"received {len(self.received)} of {n} deliveries"
            time.sleep(0.05)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def hook_worker(start_worker):
    return start_worker(name="webhooks", env=HOOK_WORKER_ENV)


@pytest.fixture
def only_hook_worker(live_api, hook_worker, redis_client) -> Iterator[None]:
    broker = Broker(current_app, redis_client)
    others = tuple(n for n in broker.consumers() if n.startswith("webhooks@"))
    with broker.paused(keep=others):
        yield
        broker.wait_idle()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _delivery(job_id) -> WebhookDelivery:
    return WebhookDelivery.objects.get(job_id=job_id)


def _wait_status(delivery_id, status: str, timeout: float = 60) -> WebhookDelivery:
    deadline = time.monotonic() + timeout
    while True:
        d = WebhookDelivery.objects.get(pk=delivery_id)
        if d.status == status:
            return d
        assert time.monotonic() < deadline, f"delivery stayed {d.status} after {d.attempts} attempt(s)"
        time.sleep(0.1)


def _running_job(tenant: str, url: str) -> Job:
    return Job.objects.create(
        tenant=tenant, kind="pdf", sha256="0" * 64, status="running", page_count=1, options={"callback_url": url}
    )


def test_done_event_is_signed_and_verifies_and_tampering_fails(live_api, only_hook_worker, receiver):
    with httpx.Client(base_url=live_api.url, headers={"X-API-Key": live_api.key}) as http:
        doc = dev_file("multi_page.pdf")
        resp = http.post(
            "/api/v1/jobs", files={"file": (doc.name, doc.read_bytes())}, data={"callback_url": receiver.url}
        )
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["id"]
    receiver.wait_for(1)
    headers, body, _ = receiver.received[0]
    secrets = hooks.signing_secrets(live_api.tenant)
    event = Webhook(secrets[0]).verify(body, headers)
    assert event["type"] == "job.done"
    assert event["data"]["job_id"] == job_id and event["data"]["status"] == "done"
    assert event["data"]["links"]["markdown"] == f"https://ocr.example.test/api/v1/jobs/{job_id}/result?format=markdown"
    assert headers["webhook-id"] == str(_delivery(job_id).pk)
    # Never the document's text: only ids, status, codes and links.
    markdown = httpx.get(f"{live_api.url}/api/v1/jobs/{job_id}/result", headers={"X-API-Key": live_api.key}).text
    assert markdown.split()[0] not in body.decode() and len(body) < 1000
    assert verify_webhook(body, headers, *secrets)["data"]["job_id"] == job_id

    tampered = body.replace(b'"done"', b'"fail"')
    with pytest.raises(WebhookVerificationError):
        Webhook(secrets[0]).verify(tampered, headers)
    stale = {**headers, "webhook-timestamp": str(int(time.time()) - 600)}
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secrets[0]).verify(body, stale)
    with pytest.raises(WebhookVerificationError):
        Webhook(hooks.new_secret()).verify(body, headers)


def test_receiver_failing_twice_gets_the_third_attempt_and_the_log_shows_three(
    live_api, only_hook_worker, receiver, client
):
    receiver.script = [500, 500]
    job = _running_job(live_api.tenant, receiver.url)
    assert job_services.fail_job(job.pk, "engine:ocr-failed", "boom")
    delivery = _wait_status(_delivery(job.pk).pk, "delivered")
    attempts = list(WebhookAttempt.objects.filter(delivery=delivery).order_by("number"))
    assert [(a.number, a.status_code, a.error_code) for a in attempts] == [
        (1, 500, "webhook:http-status"),
        (2, 500, "webhook:http-status"),
        (3, 200, ""),
    ]
    assert all(a.latency_ms >= 0 for a in attempts) and attempts[0].response_excerpt == "boom"
    assert len({h["webhook-id"] for h, _, _ in receiver.received}) == 1, "one id on every attempt"
    times = [t for _, _, t in receiver.received]
    # Exponential backoff: 0.3 s then 0.6 s (±10%), on top of the POST itself.
    assert times[1] - times[0] >= 0.27 and times[2] - times[1] >= 0.54
    event = json.loads(receiver.received[2][1])
    assert event["type"] == "job.failed" and event["data"]["error_code"] == "engine:ocr-failed"

    # The admin's delivery log shows the attempts, and its re-send action sends the event again.
    admin = get_user_model().objects.create_superuser("hookadmin", "a@example.test", "pw")
    client.force_login(admin)
    page = client.get(f"/admin/webhooks/webhookdelivery/{delivery.pk}/change/")
    assert page.status_code == 200 and page.content.count(b"webhook:http-status") >= 2
    resp = client.post("/admin/webhooks/webhookdelivery/", {"action": "resend", "_selected_action": [str(delivery.pk)]})
    assert resp.status_code == 302
    receiver.wait_for(4)
    # The attempt row is written once the POST has returned: poll for it.
    deadline = time.monotonic() + 30
    while WebhookAttempt.objects.filter(delivery=delivery).count() < 4:
        assert time.monotonic() < deadline, "the re-send was not logged"
        time.sleep(0.1)
    assert WebhookAttempt.objects.get(delivery=delivery, number=4).status_code == 200


def test_private_and_metadata_addresses_are_refused_unless_allow_listed(live_api, hook_worker):
    # No pause needed: neither worker allow-lists these (the shared one allows nothing).
    other_loopback = Receiver(host="127.0.0.2")  # loopback, but outside the worker's allow-list
    try:
        for url in (other_loopback.url, "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/hook"):
            job = _running_job(live_api.tenant, url)
            job_services.cancel(job.pk, actor="test")
            delivery = _wait_status(_delivery(job.pk).pk, "failed")
            attempt = WebhookAttempt.objects.get(delivery=delivery)
            assert attempt.error_code == "webhook:address-refused" and attempt.status_code is None, url
            assert "OCR_WEBHOOK_ALLOW_NETS" in attempt.error
        assert other_loopback.received == [], "nothing was sent to a refused address"
    finally:
        other_loopback.close()


def test_address_rules_after_dns_resolution():
    allow = egress.parse_nets(["127.0.0.1/32"])
    for address in (
        "127.0.0.2",
        "10.0.0.1",
        "192.168.1.1",
        "172.16.0.1",
        "169.254.169.254",
        "100.100.100.200",
        "::1",
        "fd00:ec2::254",
        "fe80::1",
        "0.0.0.0",
        "::ffff:10.0.0.1",
        "224.0.0.1",
    ):
        assert egress.refused(address, allow), address
    assert not egress.refused("127.0.0.1", allow)
    assert not egress.refused("93.184.215.14", [])
    # A name is judged by what it resolves to.
    with pytest.raises(egress.AddressRefused):
        egress.resolve_checked("localhost", 80, [])
    assert egress.resolve_checked("localhost", 80, egress.parse_nets(["127.0.0.0/8", "::1/128"]))
    assert ipaddress.ip_network("::1/128") in egress.parse_nets(["::1"])


@pytest.mark.django_db
def test_rotation_signs_with_old_and_new_during_the_overlap_only():
    old = hooks.signing_secrets("rot")[0]
    new = hooks.rotate_secret("rot", overlap=timedelta(hours=1)).secret
    now = timezone.now()
    signature = hooks.sign("msg_1", now, '{"a":1}', hooks.signing_secrets("rot"))
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": signature}
    for secret in (old, new):
        assert Webhook(secret).verify('{"a":1}', headers) == {"a": 1}
    WebhookSecret.objects.filter(secret=old).update(expires_at=now - timedelta(seconds=1))
    assert hooks.signing_secrets("rot") == [new]
    headers["webhook-signature"] = hooks.sign("msg_1", now, '{"a":1}', hooks.signing_secrets("rot"))
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify('{"a":1}', headers)
    assert verify_webhook('{"a":1}', headers, old, new) == {"a": 1}


def test_a_key_default_callback_and_a_bad_callback_url(live_api, only_hook_worker, receiver):
    TenantAPIKey.objects.filter(tenant=live_api.tenant).update(webhook_url=receiver.url)
    with httpx.Client(base_url=live_api.url, headers={"X-API-Key": live_api.key}) as http:
        doc = dev_file("multi_page.pdf")
        bad = http.post(
            "/api/v1/jobs", files={"file": (doc.name, doc.read_bytes())}, data={"callback_url": "ftp://x/y"}
        )
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "request:invalid"
        ok = http.post("/api/v1/jobs", files={"file": (doc.name, doc.read_bytes())})
        assert ok.status_code == 202
    receiver.wait_for(1)
    assert json.loads(receiver.received[0][1])["data"]["job_id"] == ok.json()["id"]


def test_a_delivery_whose_message_was_lost_is_sent_by_the_beat(live_api, only_hook_worker, receiver, settings):
    job = _running_job(live_api.tenant, receiver.url)
    overdue = timezone.now() - timedelta(seconds=settings.OCR_STALE_AFTER + 60)
    # As on_job_finished leaves it, but its message never reached a worker.
    delivery = WebhookDelivery.objects.create(
        job=job,
        tenant=job.tenant,
        event="job.done",
        url=receiver.url,
        payload={"type": "job.done"},
        next_attempt_at=overdue,
    )
    fresh = WebhookDelivery.objects.create(
        job=job, tenant=job.tenant, event="job.done", url=receiver.url, payload={}, next_attempt_at=timezone.now()
    )
    assert hooks.resend_lost() == 1
    delivered = _wait_status(delivery.pk, "delivered")
    assert delivered.attempts == 1 and len(receiver.received) == 1
    assert WebhookDelivery.objects.get(pk=fresh.pk).attempts == 0, "a delivery not yet overdue is left alone"


class SlowLoris:
    """A receiver that reads the POST, then answers one byte of its status line and headers at a
    time, every ``every`` seconds: each read is well inside a per-read timeout."""

    def __init__(self, every: float) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hooks/ocr"
        self.every = every
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn) -> None:
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 40:
                if self.stop.wait(self.every):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.mark.django_db
def test_a_slow_loris_receiver_cannot_hold_a_delivery_past_its_deadline(settings):
    """The issue's receiver sent one header byte every 5 s and held deliveries 151 s although
    OCR_WEBHOOK_TIMEOUT_S was 10 (a per-read timeout). Here: a byte every 0.5 s, a 2 s deadline."""
    settings.OCR_WEBHOOK_ALLOW_NETS = ["127.0.0.1/32"]
    settings.OCR_WEBHOOK_TIMEOUT_S = 2.0
    loris = SlowLoris(every=0.5)
    try:
        job = _running_job("loris", loris.url)
        delivery = WebhookDelivery.objects.create(job=job, tenant="loris", url=loris.url, event="job.done", payload={})
        started = time.monotonic()
        outcome = hooks.post(delivery, "{}", timezone.now())
        took = time.monotonic() - started
    finally:
        loris.close()
    assert outcome.error_code == "webhook:timeout", outcome
    assert took < settings.OCR_WEBHOOK_TIMEOUT_S + 1.0, f"held {took:.1f} s"


def test_webhook_deliveries_have_their_own_queue():
    """A slow receiver holds a webhooks thread, never a slot of the pipeline's cpu queue."""
    from ocrsite.vocabulary import ROUTES, Queue, TaskName

    assert ROUTES[TaskName.DELIVER_WEBHOOK] == Queue.WEBHOOKS
    assert Queue.WEBHOOKS not in (ROUTES[TaskName.INGEST], ROUTES[TaskName.ASSEMBLE])
