"""The layout model's task for each box (Region.task) survives the database between the layout
and recognition stages."""

from __future__ import annotations

import pytest

from tests.support.paddle_results import V3_RESULT
from workers.engines import paddle


@pytest.mark.django_db
def test_layout_task_survives_the_trip_through_region_rows():
    """Layout and recognition are separate stages with the database between them: the task the
    layout model gave a box must come back when recognition rebuilds boxes from rows, and stay
    after text is applied (a page recognized again must still not send its images)."""
    from apps.jobs.models import Job, Page
    from workers.engines.base import RegionText
    from workers.regions import apply_text, box_of, write_regions

    job = Job.objects.create(status="running", filename="p.pdf", kind="pdf", sha256="2" * 64, page_count=1)
    page = Page.objects.create(job=job, index=0, status="running", width=1100, height=1600, dpi=150)
    boxes = paddle.boxes_from_result(V3_RESULT)
    write_regions(page, [(b, None) for b in boxes], source="ocr", engine="")
    rows = list(page.regions.order_by("order"))
    assert [box_of(r).task for r in rows] == ["text", "text", "table", "text", "formula", "chart", "abandon"]
    apply_text(rows[6], RegionText("", flags=("not-sent",)), "vllm:glm-ocr")
    rows[6].refresh_from_db()
    assert box_of(rows[6]).task == "abandon" and "not-sent" in rows[6].flags
