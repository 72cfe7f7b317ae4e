"""Direct-to-storage uploads: POST /api/v1/uploads, bytes straight to the bucket, a job from the id.

Three backends: local disk (the app's own signed PUT URL), S3 (moto's S3-compatible HTTP server,
the boundary that cannot run for real here) and Azure Blob (Azurite, Microsoft's emulator).

moto accepts any presigned POST whatever its policy says (size, type, expiry: checked by hand
here), so on S3 the test reads the policy the platform signed (what real S3 enforces) and then
shows the platform's own check at job creation refusing what moto let through. Azurite does
enforce a SAS's expiry, permissions and blob name, and the test shows it refusing.

The upload sweep (``direct_uploads.discard_unused``) runs on each of the three stores: refused
and unused objects deleted, slots recorded, a job's object never touched.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.test import override_settings as settings_override
from django.utils import timezone
from rest_framework.test import APIClient

from apps.api.models import Tenant, TenantAPIKey
from apps.jobs import direct_uploads
from apps.jobs.models import DirectUpload, Job
from ocrsite.vocabulary import TaskName
from tests.support.documents import ROOT, dev_file
from tests.support.object_stores import BUCKET, CONTAINER, CREDENTIALS, REGION, azurite, s3_endpoint  # noqa: F401 (fixtures)
from workers.retention import discard_uploads


def _pdf():
    """The dev set's multi-page PDF, looked up per test: at import, a missing file would skip the
    whole module by error (pytest refuses a module-level skip) instead of the tests that need it."""
    return dev_file("multi_page.pdf")


PNG_HEAD = b"\x89PNG\r\n\x1a\n"


def _s3_storage(endpoint: str) -> dict:
    return {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": endpoint,
                "region_name": REGION,
                "access_key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "secret_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                "default_acl": None,
                "file_overwrite": True,
            },
        },
    }


def _azure_storage(conn: str) -> dict:
    return {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.azure_storage.AzureStorage",
            "OPTIONS": {"connection_string": conn, "azure_container": CONTAINER, "overwrite_files": True},
        },
    }


@pytest.fixture
def other_tenant(db) -> str:
    Tenant.objects.get_or_create(slug="other-tenant")
    return "other-tenant"


@pytest.fixture
def other_api(other_tenant) -> APIClient:
    """A second tenant, through an API key of its own."""
    _, key = TenantAPIKey.objects.create_key(name=other_tenant, tenant=other_tenant)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def _slot(api: APIClient, size: int, content_type: str = "application/pdf", filename: str = "doc.pdf") -> dict:
    resp = api.post(
        "/api/v1/uploads", {"filename": filename, "size": size, "content_type": content_type}, format="json"
    )
    assert resp.status_code == 201, resp.content
    return resp.json()


def _send(slot: dict, data: bytes, content_type: str | None = None) -> httpx.Response:
    """What a client does with the slot: bytes straight to the URL (a real HTTP request)."""
    if slot["method"] == "POST":
        fields = dict(slot["fields"])
        if content_type:
            fields["Content-Type"] = content_type
        return httpx.post(slot["url"], data=fields, files={"file": ("doc", data)})
    headers = {**slot["headers"], **({"Content-Type": content_type} if content_type else {})}
    return httpx.put(slot["url"], content=data, headers=headers)


def _job_from(api: APIClient, upload_id: str):
    return api.post("/api/v1/jobs", {"upload": upload_id}, format="json")


def _code(resp) -> str:
    return resp.json()["error"]["code"]


def _refusals_at_job_creation(api: APIClient, other_api: APIClient) -> None:
    """What the platform itself checks, whatever the store enforced; shared by S3 and Azure."""
    data = _pdf().read_bytes()

    # Nothing sent yet: the slot has no object.
    empty = _slot(api, len(data))
    assert _code(_job_from(api, empty["id"])) == "upload:missing"

    # Sent and used: one job, for the tenant that opened the slot only.
    slot = _slot(api, len(data))
    assert _send(slot, data).is_success
    refused = _job_from(other_api, slot["id"])
    assert refused.status_code == 404 and _code(refused) == "upload:not-found"
    made = _job_from(api, slot["id"])
    assert made.status_code == 202, made.content
    job = Job.objects.get(pk=made.json()["id"])
    assert (job.kind, job.page_count, job.size_bytes) == ("pdf", 5, len(data))
    assert job.source.name == f"uploads/{slot['id']}", "the object is used in place, not copied"
    again = _job_from(api, slot["id"])
    assert again.status_code == 200 and again.json()["id"] == str(job.pk), "a slot makes one job"

    # The same bytes again, in a new slot, under the first job's Idempotency-Key: the first job.
    keyed = _slot(api, len(data))
    _send(keyed, data)
    first = api.post("/api/v1/jobs", {"upload": keyed["id"]}, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    assert first.status_code == 202, first.content
    resent = _slot(api, len(data))
    _send(resent, data)
    replay = api.post("/api/v1/jobs", {"upload": resent["id"]}, format="json", HTTP_IDEMPOTENCY_KEY="batch-1")
    assert replay.status_code == 200 and replay.json()["id"] == first.json()["id"], replay.content
    Job.objects.filter(pk=first.json()["id"]).delete()

    # Bytes of another type than declared, of the declared size: refused by their magic bytes.
    png = PNG_HEAD + b"\0" * (len(data) - len(PNG_HEAD))
    wrong = _slot(api, len(data))
    _send(wrong, png)
    resp = _job_from(api, wrong["id"])
    assert resp.status_code == 415 and _code(resp) == "input:type-mismatch", resp.content

    # Bytes written after the slot expired (a store that does not enforce expiry let them in).
    late = _slot(api, len(data))
    _send(late, data)
    DirectUpload.objects.filter(pk=late["id"]).update(expires_at=timezone.now() - timedelta(hours=1))
    resp = _job_from(api, late["id"])
    assert resp.status_code == 410 and _code(resp) == "upload:expired", resp.content
    assert Job.objects.count() == 1, "no refused upload became a job"


@pytest.mark.django_db
def test_s3_presigned_post_is_bound_to_key_size_type_and_expiry(api, other_api, other_tenant, s3_endpoint):  # noqa: F811
    data = _pdf().read_bytes()
    with settings_override(STORAGES=_s3_storage(s3_endpoint), OCR_UPLOAD_URL_SECONDS=600):
        slot = _slot(api, len(data))
        assert slot["method"] == "POST" and slot["url"].startswith(s3_endpoint)
        policy = json.loads(base64.b64decode(slot["fields"]["policy"]))
        conditions = policy["conditions"]
        assert ["content-length-range", len(data), len(data)] in conditions
        assert {"Content-Type": "application/pdf"} in conditions
        assert {"key": f"uploads/{slot['id']}"} in conditions
        expires = policy["expiration"].replace("Z", "+00:00")
        assert 0 < (datetime.fromisoformat(expires) - timezone.now()).total_seconds() <= 600

        # A bigger object than declared (real S3 refuses it by the policy; moto stores it).
        big = _slot(api, len(data))
        assert _send(big, data + b"%trailing bytes").is_success
        resp = _job_from(api, big["id"])
        assert resp.status_code == 422 and _code(resp) == "upload:size-mismatch", resp.content

        _refusals_at_job_creation(api, other_api)

        # Over the limit: no slot at all. The platform's default, then the tenant's own override.
        with settings_override(OCR_MAX_DOCUMENT_BYTES=1000):
            resp = api.post("/api/v1/uploads", {"size": 1001, "content_type": "application/pdf"}, format="json")
            assert resp.status_code == 413 and _code(resp) == "input:too-large"
        Tenant.objects.update_or_create(slug=other_tenant, defaults={"max_upload_bytes": 500})
        resp = other_api.post("/api/v1/uploads", {"size": 501, "content_type": "application/pdf"}, format="json")
        assert resp.status_code == 413 and _code(resp) == "input:too-large"
        assert (
            api.post("/api/v1/uploads", {"size": 501, "content_type": "application/pdf"}, format="json").status_code
            == 201
        )


@pytest.mark.django_db
def test_azure_sas_upload_is_one_blob_write_only_and_expires(api, other_api, azurite):  # noqa: F811
    data = _pdf().read_bytes()
    with settings_override(STORAGES=_azure_storage(azurite), OCR_UPLOAD_URL_SECONDS=600):
        slot = _slot(api, len(data))
        assert slot["method"] == "PUT" and slot["headers"]["x-ms-blob-type"] == "BlockBlob"
        # Write-only: the SAS cannot read the blob back, nor write another blob name.
        assert _send(slot, data).status_code == 201
        assert httpx.get(slot["url"]).status_code == 403
        path, _, query = slot["url"].partition("?")
        other_blob = f"{path.rsplit('/', 1)[0]}/uploads/not-this-one?{query}"
        assert httpx.put(other_blob, content=data, headers=slot["headers"]).status_code == 403
        assert _job_from(api, slot["id"]).status_code == 202

        # A bigger blob than declared (a SAS cannot pin a size): refused at job creation.
        big = _slot(api, len(data))
        assert _send(big, data + b"%trailing bytes").status_code == 201
        resp = _job_from(api, big["id"])
        assert resp.status_code == 422 and _code(resp) == "upload:size-mismatch", resp.content

        Job.objects.all().delete()
        _refusals_at_job_creation(api, other_api)

    # Expired: Azurite itself refuses the write.
    with settings_override(STORAGES=_azure_storage(azurite), OCR_UPLOAD_URL_SECONDS=1):
        short = _slot(api, len(data))
        time.sleep(2.5)
        assert _send(short, data).status_code == 403
        assert _code(_job_from(api, short["id"])) == "upload:missing"


@pytest.mark.django_db
def test_local_signed_put_refuses_bigger_other_type_forged_and_expired(api, other_api):
    data = _pdf().read_bytes()
    slot = _slot(api, len(data))
    assert slot["method"] == "PUT" and "token=" in slot["url"]
    url = slot["url"]

    client = APIClient()  # no credentials: the signed token is the only one
    resp = client.put(url, data + b"x", content_type="application/pdf")
    assert resp.status_code == 413 and _code(resp) == "input:too-large"
    resp = client.put(url, data, content_type="image/png")
    assert resp.status_code == 415 and _code(resp) == "input:type-mismatch"
    resp = client.put(url.replace("token=", "token=x"), data, content_type="application/pdf")
    assert resp.status_code == 403 and _code(resp) == "upload:bad-token"
    # The token of one slot does not open another (another tenant's, another size).
    theirs = _slot(other_api, len(data) + 5)
    forged = theirs["url"].split("?")[0] + "?" + url.split("?")[1]
    resp = client.put(forged, data + b"12345", content_type="application/pdf")
    assert resp.status_code == 403 and _code(resp) == "upload:bad-token"

    assert client.put(url, data, content_type="application/pdf").status_code == 204
    assert client.put(url, data, content_type="application/pdf").status_code == 409, "one upload per slot"
    assert _job_from(api, slot["id"]).status_code == 202

    with settings_override(OCR_UPLOAD_URL_SECONDS=1):
        late = _slot(api, len(data))
        time.sleep(2.2)
        resp = client.put(late["url"], data, content_type="application/pdf")
        assert resp.status_code == 410 and _code(resp) == "upload:expired"


@pytest.mark.django_db(transaction=True)
def test_client_and_cli_switch_to_direct_upload_above_threshold(live_api, tmp_path):
    """The Python client and the ``ocr`` CLI go straight to storage above their threshold; the job
    runs through the real worker to a result."""
    from ocrclient import AsyncClient, Client

    source = dev_file("scanned_ocr_test.pdf")
    with Client(live_api.url, api_key=live_api.key, direct_upload_above=1024) as client:
        job = client.submit(source)
        done = client.wait(job.id, timeout=300)
        assert done.status == "done"
        assert DirectUpload.objects.get(job_id=job.id).size_bytes == source.stat().st_size
        assert client.markdown(job.id).strip()
    with Client(live_api.url, api_key=live_api.key) as client:
        small = client.submit(source)  # under the default threshold: multipart, no slot
        assert not DirectUpload.objects.filter(job_id=small.id).exists()

    async def from_bytes() -> str:  # the async client, as the remote MCP server's uri input uses it
        async with AsyncClient(live_api.url, api_key=live_api.key, direct_upload_above=1024) as client:
            return (await client.submit(_pdf().read_bytes(), filename="from-mcp.pdf")).id

    via_async = asyncio.run(from_bytes())
    assert DirectUpload.objects.get(job_id=via_async).filename == "from-mcp.pdf"

    out = tmp_path / "out"
    cli = subprocess.run(
        [sys.executable, "-m", "ocrclient.cli", "submit", str(_pdf()), "-o", str(out)],
        env={**live_api.env(), "OCR_DIRECT_UPLOAD_ABOVE": "1024"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    via_cli = Job.objects.filter(tenant=live_api.tenant, filename=_pdf().name).get()
    assert DirectUpload.objects.filter(job=via_cli).exists()
    assert list(Path(out).glob("*.md"))


def _sent(slot: dict, data: bytes) -> bool:
    """The bytes sent to the slot's URL: the store's own, or the app's signed PUT on local disk."""
    if "token=" in slot["url"]:
        resp = APIClient().put(slot["url"], data, content_type=slot["headers"]["Content-Type"])
        return resp.status_code == 204
    return _send(slot, data).is_success


def _sweep_deletes_refused_and_unused_objects(api: APIClient) -> None:
    """Shared by the three stores: what the upload sweep deletes, when, and what it never does."""
    data = _pdf().read_bytes()
    used = _slot(api, len(data))
    assert _sent(used, data)
    assert _job_from(api, used["id"]).status_code == 202
    refused = _slot(api, len(data))
    assert _sent(refused, PNG_HEAD + b"\0" * (len(data) - len(PNG_HEAD)))
    assert _code(_job_from(api, refused["id"])) == "input:type-mismatch"
    assert DirectUpload.objects.get(pk=refused["id"]).refused_code == "input:type-mismatch"
    unused = _slot(api, len(data))  # bytes in time, no job asked for (yet)
    assert _sent(unused, data)
    never = _slot(api, len(data))  # nothing ever sent
    keys = {name: f"uploads/{slot['id']}" for name, slot in (("used", used), ("refused", refused), ("unused", unused))}

    url_life = timedelta(seconds=settings.OCR_UPLOAD_URL_SECONDS) + direct_uploads.EXPIRY_SKEW
    keep = timedelta(seconds=settings.OCR_UPLOAD_KEEP_UNUSED_SECONDS)

    def sweep(later: timedelta) -> direct_uploads.Discarded:
        return direct_uploads.discard_unused(keep_unused=keep, batch=100, now=timezone.now() + later)

    # URLs still valid: nothing goes (the refused slot's client may still send the right bytes).
    assert sweep(timedelta(0)) == direct_uploads.Discarded(uploads=0, left=0)
    assert all(default_storage.exists(key) for key in keys.values())
    # URLs expired: the refused bytes go; the unused ones wait for a late job.
    assert sweep(url_life + timedelta(seconds=1)) == direct_uploads.Discarded(uploads=1, left=0)
    assert not default_storage.exists(keys["refused"])
    assert default_storage.exists(keys["unused"]) and default_storage.exists(keys["used"])
    slot = DirectUpload.objects.get(pk=refused["id"])
    assert slot.discarded_at is not None and slot.refused_code == "input:type-mismatch" and slot.job is None
    # Kept past the keep: the unused and the never-sent slots are recorded, their objects deleted
    # (none to delete for the never-sent one: no error either).
    assert sweep(url_life + keep + timedelta(seconds=1)) == direct_uploads.Discarded(uploads=2, left=0)
    assert not default_storage.exists(keys["unused"])
    assert DirectUpload.objects.filter(pk__in=[unused["id"], never["id"]], discarded_at__isnull=False).count() == 2
    late = _job_from(api, unused["id"])
    assert late.status_code == 410 and _code(late) == "upload:expired", late.content
    assert sweep(url_life + keep + timedelta(days=30)) == direct_uploads.Discarded(uploads=0, left=0), "once"

    # The job's object stays, whatever happens to the slot row: the job reads it.
    assert default_storage.exists(keys["used"])
    DirectUpload.objects.filter(pk=used["id"]).update(job=None)
    assert sweep(url_life + keep + timedelta(days=30)) == direct_uploads.Discarded(uploads=0, left=0)
    assert default_storage.exists(keys["used"])
    assert DirectUpload.objects.get(pk=used["id"]).discarded_at is None


@pytest.mark.django_db
def test_upload_sweep_on_local_disk(api):
    _sweep_deletes_refused_and_unused_objects(api)


@pytest.mark.django_db
def test_upload_sweep_on_s3(api, s3_endpoint):  # noqa: F811
    with settings_override(STORAGES=_s3_storage(s3_endpoint)):
        _sweep_deletes_refused_and_unused_objects(api)


@pytest.mark.django_db
def test_upload_sweep_on_azure(api, azurite):  # noqa: F811
    with settings_override(STORAGES=_azure_storage(azurite)):
        _sweep_deletes_refused_and_unused_objects(api)


@pytest.mark.django_db
def test_upload_sweep_takes_the_slot_or_the_job_does_never_both(api):
    """The sweep's claim and the job's are the same conditional UPDATE: once the sweep took a slot
    (its object about to go), a request for the job is refused, not given a job without bytes;
    a slot that made its job first is never taken."""
    data = _pdf().read_bytes()
    taken, made = _slot(api, len(data)), _slot(api, len(data))
    for slot in (taken, made):
        assert _sent(slot, data)
    assert _job_from(api, made["id"]).status_code == 202
    now = timezone.now()
    DirectUpload.objects.filter(pk__in=[taken["id"], made["id"]]).update(discarded_at=now)  # as the claim does
    resp = _job_from(api, taken["id"])
    assert resp.status_code == 410 and _code(resp) == "upload:expired"
    assert Job.objects.count() == 1
    assert _job_from(api, made["id"]).status_code == 200, "its job is still the answer"
    with settings_override(OCR_UPLOAD_KEEP_UNUSED_SECONDS=0):
        DirectUpload.objects.update(discarded_at=None, expires_at=now - timedelta(hours=1))
        assert discard_uploads.apply().get() == {"deleted": 1, "left": 0}  # the beat's task
    assert default_storage.exists(f"uploads/{made['id']}") and not default_storage.exists(f"uploads/{taken['id']}")


def test_beat_schedules_the_upload_sweep_on_the_cpu_queue():
    entry = settings.CELERY_BEAT_SCHEDULE["discard-uploads"]
    assert entry["task"] == TaskName.DISCARD_UPLOADS
    assert entry["schedule"] == settings.OCR_PURGE_EVERY
    assert settings.CELERY_TASK_ROUTES[TaskName.DISCARD_UPLOADS]["queue"] == "cpu"


@pytest.mark.django_db(transaction=True)
def test_concurrent_puts_to_one_slot_store_one_object(api, live_server):
    """The issue's race: six concurrent PUTs to one slot stored six objects (all 204), because
    each checked for the object before its body streamed in, and storage renamed the later ones.
    A 4 MB body keeps all six inside that window."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    data = b"%PDF-1.7\n" + b"0" * (4 << 20)
    slot = _slot(api, len(data))
    url = live_server.url + "/" + slot["url"].split("/", 3)[3]
    start = Barrier(6)

    def put(_):
        start.wait()
        return httpx.put(url, content=data, headers=slot["headers"], timeout=60)

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(put, range(6)))
    assert sorted(r.status_code for r in answers) == [204] + [409] * 5, [r.content[:200] for r in answers]
    assert {r.json()["error"]["code"] for r in answers if r.status_code == 409} == {"upload:already-sent"}
    folder = Path(default_storage.path(f"uploads/{slot['id']}")).parent
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(slot["id"])) == [slot["id"]]
    assert default_storage.size(f"uploads/{slot['id']}") == len(data)
