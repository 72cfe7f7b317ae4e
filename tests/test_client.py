"""The Python client and the ``ocr`` CLI against the real stack: live HTTP server, worker, Redis,
PostgreSQL. Nothing is mocked; the one simulated fault (a response lost on the wire) is raised
in the client's own transport hook, because a real network drop cannot be ordered on cue here."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from celery import current_app
from ocrclient import AsyncClient, Client, JobNotFound, RateLimited, RetryPolicy
from ocrclient.cli import EXIT_INTERRUPTED, EXIT_OK, MANIFEST

from apps.api.throttles import _add, _tenant_key
from apps.jobs.models import Job
from tests.support.documents import dev_file
from tests.support.queues import Broker


def test_submit_wait_with_progress_and_read_results(live_api):
    seen = []
    with Client(live_api.url, api_key=live_api.key) as client:
        job = client.submit(dev_file("phototest.tif"))
        assert job.status == "queued" and not job.replayed
        done = client.wait(job.id, timeout=180, on_progress=seen.append)
        assert done.status == "done" and done.progress.pages_done == done.progress.pages_total == 1
        assert seen[-1].status == "done" and len({(j.status, j.progress) for j in seen}) == len(seen)
        assert "lazy fox" in client.markdown(job.id).lower()
        doc = client.document(job.id)
        assert len(doc.pages) == 1 and doc.pages[0].regions
        assert all(len(r.bbox) == 4 for r in doc.pages[0].regions)
        assert [j.id for j in client.list(status="done")] == [job.id]
        with pytest.raises(JobNotFound) as exc:
            client.get("00000000-0000-0000-0000-000000000000")
        assert exc.value.code == "job:not-found" and exc.value.status == 404


def test_async_client_submits_and_waits(live_api):
    async def run() -> tuple[str, str]:
        async with AsyncClient(live_api.url, api_key=live_api.key) as client:
            job = await client.submit(dev_file("multi_page.pdf"))
            done = await client.wait(job.id, timeout=120)
            return done.status, await client.markdown(job.id)

    status, markdown = asyncio.run(run())
    assert status == "done" and markdown.strip()


def test_429_retry_after_is_honoured(live_api, settings):
    settings.OCR_RATE_SUBMISSIONS = "2/s"
    # The tenant's current and next one-second windows are already spent, as if its other
    # processes had submitted: the refusal does not depend on how fast this machine is.
    now = int(time.time())
    for window in (now, now + 1):
        _add(f"rate:submissions:{_tenant_key(live_api.tenant)}:1:{window}", 2, 3)
    answers: list[tuple[float, int, str]] = []

    def record(response: httpx.Response) -> None:
        if response.request.method == "POST":
            answers.append((time.monotonic(), response.status_code, response.headers.get("Retry-After", "")))

    hooks = {"event_hooks": {"response": [record]}}
    with Client(live_api.url, api_key=live_api.key, httpx_options=hooks) as client:
        job = client.submit(dev_file("multi_page.pdf"))
    assert answers[0][1] == 429 and answers[-1][1] == 202, answers
    for refused, after in zip(answers, answers[1:], strict=False):
        assert refused[1] == 429 and refused[2], "every refusal names Retry-After"
        assert after[0] - refused[0] >= float(refused[2]) - 0.05, "the client slept what the server asked"
    assert list(Job.objects.filter(tenant=live_api.tenant).values_list("pk", flat=True)) == [uuid.UUID(job.id)]


def test_a_refusal_past_max_retry_after_is_raised_not_slept(live_api, settings):
    settings.OCR_RATE_SUBMISSIONS = "1/hour"
    with Client(live_api.url, api_key=live_api.key, retry=RetryPolicy(max_retry_after=5)) as client:
        client.submit(dev_file("multi_page.pdf"))
        started = time.monotonic()
        with pytest.raises(RateLimited) as exc:
            client.submit(dev_file("phototest.tif"))
    assert exc.value.code == "rate:submissions" and exc.value.retry_after > 5
    assert time.monotonic() - started < 5


def test_retried_post_with_the_same_key_makes_one_job(live_api):
    lost = []

    def lose_first_answer(response: httpx.Response) -> None:
        # The server has created the job; the client never hears back, as when a connection drops.
        if response.request.method == "POST" and not lost:
            lost.append(response.status_code)
            raise httpx.ReadError("connection reset while reading the response", request=response.request)

    hooks = {"event_hooks": {"response": [lose_first_answer]}}
    with Client(live_api.url, api_key=live_api.key, httpx_options=hooks) as client:
        job = client.submit(dev_file("multi_page.pdf"))
    assert lost == [202]
    assert job.replayed, "the retry was answered with the job the lost attempt created"
    assert list(Job.objects.filter(tenant=live_api.tenant).values_list("pk", flat=True)) == [uuid.UUID(job.id)]


def _cli(live_api, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ocrclient.cli", *args],
        env=live_api.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_cli_batch_is_interrupted_and_resumes_without_resubmitting(live_api, redis_client, tmp_path):
    docs = tmp_path / "in"
    (docs / "sub").mkdir(parents=True)
    names = ["multi_page.pdf", "code_and_formula.pdf", "sub/table_page_2305.03393v1-pg9.pdf", "phototest.tif"]
    for name in names:
        (docs / name).write_bytes(dev_file(name.rsplit("/", 1)[-1]).read_bytes())
    out = tmp_path / "out"
    broker = Broker(current_app, redis_client)
    # Born-digital PDFs finish in ingest; the scan needs layout, held back so the run is surely
    # mid-batch when it is interrupted.
    with broker.paused("layout"):
        first = _cli(live_api, "submit", str(docs), "-o", str(out), "--format", "md", "--poll", "0.2")
        broker.wait_for(lambda: len(list(out.rglob("*.md"))) >= 3, timeout=120, what="three results")
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=30)
        assert first.returncode == EXIT_INTERRUPTED, stderr
        assert "re-run" in stderr
    assert not (out / "phototest.tif.md").exists()
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest) == set(names)
    submitted = set(Job.objects.filter(tenant=live_api.tenant).values_list("pk", flat=True))
    assert len(submitted) == 4

    second = _cli(live_api, "submit", str(docs), "-o", str(out), "--format", "md", "--poll", "0.2")
    stdout, stderr = second.communicate(timeout=240)
    assert second.returncode == EXIT_OK, stderr
    assert "3 file(s) already have a result" in stderr
    assert set(Job.objects.filter(tenant=live_api.tenant).values_list("pk", flat=True)) == submitted
    assert "lazy fox" in (out / "phototest.tif.md").read_text().lower()
    assert (out / "sub" / "table_page_2305.03393v1-pg9.pdf.md").read_text().strip()

    # A third run has nothing to do and submits nothing.
    third = _cli(live_api, "submit", str(docs), "-o", str(out))
    _, stderr = third.communicate(timeout=60)
    assert third.returncode == EXIT_OK and "4 file(s) already have a result" in stderr
    assert Job.objects.filter(tenant=live_api.tenant).count() == 4


def test_cli_status_result_cancel_ls_and_exit_codes(live_api, tmp_path):
    with Client(live_api.url, api_key=live_api.key) as client:
        job = client.submit(dev_file("multi_page.pdf"))
        client.wait(job.id, timeout=120)
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "ocrclient.cli", *a], env=live_api.env(), capture_output=True, text=True, timeout=60
    )
    status = run("status", job.id)
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "done"
    result = run("result", job.id, "--format", "json")
    assert result.returncode == 0 and len(json.loads(result.stdout)["pages"]) == 5
    listed = run("ls", "--status", "done")
    assert listed.returncode == 0 and listed.stdout.startswith(job.id)
    cancel = run("cancel", job.id)
    assert cancel.returncode == 3 and "job:not-cancellable" in cancel.stderr
    missing = run("submit", str(tmp_path / "nope"))
    assert missing.returncode == 2
    bad_key = subprocess.run(
        [sys.executable, "-m", "ocrclient.cli", "--api-key", "abc.def", "ls"],
        env=live_api.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad_key.returncode == 3 and "auth:invalid-credentials" in bad_key.stderr
