"""The spine end to end: REST upload → real Redis → real worker → Markdown."""

from __future__ import annotations

import pytest

from tests.conftest import dev_file, upload, wait_for_job


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
