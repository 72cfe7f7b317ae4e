"""What a running job has so far: every page's status, and the text of the pages already done.

Read from the database (pages and regions), not from the result files, which only exist once
the job is assembled; so the shape is a plain one (``"partial": true``), not the final result's.
The reading order within a page is final once the page is done.
"""

from __future__ import annotations

from apps.jobs.models import Job, Region
from apps.jobs.states import PageStatus


def partial_pages(job: Job) -> dict:
    # Pages first, then the regions of the pages seen done: a page finishing between the two
    # queries shows as not done yet, never as done without its text.
    rows = list(job.pages.order_by("index").values("pk", "index", "status", "source"))
    done = [p["pk"] for p in rows if p["status"] == PageStatus.DONE]
    regions: dict[int, list[dict]] = {}
    for r in Region.objects.filter(page_id__in=done).order_by("page_id", "order", "pk"):
        regions.setdefault(r.page_id, []).append({"order": r.order, "label": r.label, "bbox": r.bbox, "text": r.text})
    pages = [
        {"index": p["index"], "status": p["status"], "source": p["source"], "regions": regions.get(p["pk"], [])}
        for p in rows
    ]
    return {
        "id": str(job.pk),
        "status": job.status,
        "partial": True,
        "pages_total": job.page_count,
        "pages_stored": len(pages),
        "pages_done": sum(p["status"] == PageStatus.DONE for p in pages),
        "pages": pages,
    }


def partial_markdown(job: Job) -> str:
    """The done pages' text in page and reading order, each page under a marker naming it."""
    body = partial_pages(job)
    parts = []
    for page in body["pages"]:
        if page["status"] == PageStatus.DONE:
            texts = [r["text"] for r in page["regions"] if r["text"]]
            parts.append(f"<!-- page {page['index'] + 1} -->\n\n" + "\n\n".join(texts))
    return "\n\n".join(parts) + "\n"
