"""The spine end to end: REST upload → real Redis → real worker → Markdown."""

from __future__ import annotations

import pytest

from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job
from workers.engines.cpu import cpu_budget


@pytest.mark.django_db(transaction=True)
def test_scan_goes_through_every_queue(api, worker):
    resp = upload(api, dev_file("phototest.tif"))
    assert resp.status_code == 202, resp.content
    body = resp.json()
    assert body["status"] == "queued"
    assert resp["Location"].endswith(f"/api/v1/jobs/{body['id']}")
    done = wait_for_job(api, body["id"])
    assert done["status"] == "done", (done, worker.tail())
    assert done["progress"] == {"pages_done": 1, "pages_failed": 0, "pages_total": 1}
    md = api.get(f"/api/v1/jobs/{body['id']}/result?format=markdown")
    assert md["Content-Type"].startswith("text/markdown")
    text = md.content.decode().lower()
    assert "quick brown dog" in text and "lazy fox" in text
    # The shared worker is a prefork pool of 2: each process's engines get half the CPU budget,
    # not onnxruntime's default of every core (which a container's CPU quota would throttle).
    per_process = max(1, cpu_budget() // 2)
    log = worker.log.read_text()
    assert f"engine threads: {per_process} per process (CPU budget {cpu_budget()} shared by 2 pool process(es)" in log
    assert f"detection probe 960 px then full, {per_process} thread(s)" in log, worker.tail()
