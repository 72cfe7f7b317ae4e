"""Stage 4, assembly [queue: cpu]: Markdown and JSON of a job whose pages are all done.

The page update that completes a job moves it to ASSEMBLING and sends assembly here after its
commit (``services.finish_page``). Results go to storage, then the job moves ASSEMBLING → DONE
once.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.jobs import services
from apps.jobs.models import Job, Region
from ocrsite.celery import app
from ocrsite.vocabulary import TaskName
from workers import costs
from workers.content import confidence, formats
from workers.retry import PipelineTask


@app.task(base=PipelineTask, name=TaskName.ASSEMBLE.value)
def assemble(job_id: str) -> None:
    """Markdown + JSON for a job whose pages are all done; a second delivery finds it done."""
    assemble_result(job_id)


def assemble_result(job_id: str) -> None:
    job = Job.objects.filter(pk=job_id, status=Job.Status.ASSEMBLING).first()
    if job is None:
        return
    if not services.claim_attempt(job_id, "assembly"):
        return  # every earlier delivery died or hung here: the job failed job:stalled
    started = timezone.now()
    with costs.job_step("assemble", job):
        pages = page_dicts(job)
        markdown = formats.to_markdown(pages)
        payload = formats.to_json(job_summary(job), pages)
    # A rerun writes new names: the first attempt's files may still be named by jobs answered
    # from the result cache (services.result_cache), and must not change under them.
    stem = f"results/{job.pk}" if job.attempt <= 1 else f"results/{job.pk}-a{job.attempt}"
    md_name = services.save_bytes(f"{stem}.md", markdown.encode())
    json_name = services.save_bytes(f"{stem}.json", payload.encode())
    # The result is offered to the cache in the same commit that makes the job done: a client
    # that sees it done and sends the same document again is answered from it.
    with transaction.atomic():
        if services.finish_job(job.pk, md_name, json_name):
            services.register_result(job.pk)
            services.record(job.pk, "assemble", started=started, detail={"pages": len(pages)})


def job_summary(job: Job) -> dict:
    return {
        "id": str(job.pk),
        "filename": job.filename,
        "kind": job.kind,
        "sha256": job.sha256,
        "engine": job.engine,
        "page_count": job.page_count,
        "flags": job.flags,
    }


def page_dicts(job: Job) -> list[dict]:
    """The job's pages with their regions in reading order, in the shape ``formats`` takes."""
    regions_by_page: dict[int, list[dict]] = {}
    for r in Region.objects.filter(page__job=job).order_by("page_id", "order", "pk"):
        regions_by_page.setdefault(r.page_id, []).append(
            {
                "order": r.order,
                "label": r.label,
                "bbox": r.bbox,
                "polygon": r.polygon,
                "text": r.text,
                "confidence": r.confidence,
                "score": r.score,
                "task": r.task,
                "source": r.source,
                "engine": r.engine,
                "flags": r.flags,
                "table": r.table,
            }
        )
    return [
        {
            "index": p.index,
            "width": p.width,
            "height": p.height,
            "dpi": p.dpi,
            "width_pt": p.width_pt,
            "height_pt": p.height_pt,
            "source": p.source,
            "rotation": p.rotation,
            "flags": p.flags,
            "script": p.script,
            "confidence": confidence.page_confidence(
                (r["text"], r["confidence"]) for r in regions_by_page.get(p.pk, [])
            ),
            "regions": regions_by_page.get(p.pk, []),
        }
        for p in job.pages.order_by("index")
    ]
