"""An operator repairs a failed job in a real browser (headless Debian Chromium via Playwright),
against a live Django server and real Celery worker processes.

The failure is real configuration: the first worker runs with OCR_FAIL_PAGES=2, so page 2 fails
in recognition; it is then stopped and a normal worker (cause removed) does the retry.
Screenshots land in tests/artifacts/console-*.png.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from django.db import connections

from apps.jobs.models import Job, Region
from tests.support.console import make_operator, submit_bytes, tiff_pages, wait_status, workers_of_our_own
from tests.support.documents import ARTIFACTS

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("OCR_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PASSWORD = "operator-pass-9"


@pytest.fixture
def browser():
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium); "
            ".ci/services.sh does when apt can reach its mirror"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield instance
        finally:
            instance.close()


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.mark.django_db(transaction=True)
def test_operator_finds_inspects_and_retries_a_failed_job(monkeypatch, live_server, browser, start_worker):
    # Playwright's sync API keeps an event loop in this thread; the ORM calls below are plain
    # synchronous test code, not code running inside that loop.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    try:
        operator = make_operator(PASSWORD)

        with workers_of_our_own():
            failing = start_worker(env={"OCR_FAIL_PAGES": "2"}, name="browser-failing")
            job = submit_bytes(tiff_pages(2), "two-pages.tif", owner=operator)
            job = wait_status(job.pk, {"failed", "done"}, worker=failing)
            failing.stop()
            assert job.status == "failed", failing.tail()
            healthy = start_worker(name="browser-healthy")

            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            base = live_server.url

            # Log in as an operator (staff, in the Operators group, not a superuser).
            page.goto(f"{base}/admin/login/?next=/admin/")
            page.fill("#id_username", operator.username)
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_selector("#ocr-dashboard")
            assert "engine:injected-fault" in page.inner_text("#ocr-failures")
            shot(page, "dashboard")

            # The job list, filtered to failed jobs.
            page.goto(f"{base}/admin/jobs/job/")
            page.click("#changelist-filter a[href*='status__exact=failed']")
            page.wait_for_url("**status__exact=failed**")
            rows = page.locator("#result_list tbody tr")
            assert rows.count() == 1
            assert "two-pages.tif" in rows.first.inner_text()
            assert rows.first.locator(".ocr-badge").inner_text().strip().lower() == "failed"
            shot(page, "failed-jobs")

            # Its page: the operator may retry and cancel, never delete or purge.
            rows.first.locator("a", has_text="two-pages.tif").click()
            page.wait_for_selector("#ocr-actions")
            assert page.locator("#ocr-act-retry").is_enabled()
            assert page.locator("#ocr-act-purge").count() == 0
            assert page.locator(".deletelink").count() == 0
            assert page.locator(".ocr-event[data-stage='recognize']").count() == 2

            # Page 1 with its regions drawn over the image; then the failed page 2.
            for index in (0, 1):
                page.goto(f"{base}/admin/jobs/job/{job.pk}/pages/{index}/")
                page.wait_for_function(
                    "() => { const i = document.getElementById('ocr-page-image'); return i && i.complete && i.naturalWidth > 0; }"
                )
                expected = Region.objects.filter(page__job=job, page__index=index).count()
                assert expected > 0
                assert page.locator("#ocr-overlay .ocr-box").count() == expected
                assert page.locator("#ocr-region-list .ocr-region").count() == expected
                image_box = page.locator("#ocr-page-image").bounding_box()
                overlay_box = page.locator("#ocr-overlay").bounding_box()
                assert (
                    abs(image_box["width"] - overlay_box["width"]) < 2
                    and abs(image_box["height"] - overlay_box["height"]) < 2
                )
                if index == 0:
                    assert "quick brown dog" in page.inner_text("#ocr-region-list").lower()
                    shot(page, "page-overlay")

            # A direct POST to the delete view, with a valid CSRF token, is still refused.
            token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
            refused = page.request.post(
                f"{base}/admin/jobs/job/{job.pk}/delete/",
                form={"post": "yes"},
                headers={"X-CSRFToken": token, "Referer": f"{base}/admin/"},
            )
            assert refused.status == 403 and "CSRF" not in refused.text()
            assert Job.objects.filter(pk=job.pk).exists()

            # Retry, and watch the job reach done through the healthy worker.
            page.goto(f"{base}/admin/jobs/job/{job.pk}/change/")
            page.click("#ocr-act-retry")
            page.wait_for_selector(".messagelist .success")
            deadline = time.monotonic() + 180
            while page.text_content("#ocr-status").strip() != "done":
                assert time.monotonic() < deadline, healthy.tail()
                time.sleep(1)
                page.reload()
            assert "retry" in page.inner_text("#ocr-timeline")
            assert operator.username in page.inner_text("#ocr-timeline")
            assert page.locator("#ocr-markdown").count() == 1
            shot(page, "job-done")
            healthy.stop()

        job.refresh_from_db()
        assert (job.status, job.pages_done, job.pages_failed) == ("done", 2, 0)
    finally:
        # Django keeps connections per context; Playwright gives this test body its own, which
        # teardown cannot see. Close ours here, or the test database stays open at teardown.
        connections.close_all()
