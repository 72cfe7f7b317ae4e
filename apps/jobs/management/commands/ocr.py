"""``manage.py ocr FILE``: the embedded pipeline on one machine, no broker, no GPU.

The same services and tasks as the cluster run in-process (Celery eager mode), against the
configured database (SQLite by default) and storage (local files by default).
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from apps.jobs import embedded, services
from apps.jobs.documents import InputError
from apps.jobs.models import Job
from ocrsite import catalogue
from ocrsite.memory import return_large_buffers


class Command(BaseCommand):
    help = "OCR a PDF or image with the embedded pipeline and print Markdown (or JSON)."
    # Django's system checks load the URL conf, the admin and the API schema (~0.3 CPU-s a run);
    # this command serves no URL, and the web process and CI (`manage.py check`) run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--json", action="store_true", help="print the JSON result instead of Markdown")
        parser.add_argument("--out", type=Path, help="write the result to this file instead of stdout")
        parser.add_argument("--engine", choices=catalogue.job_engine_choices(), help="engine profile for this job")
        parser.add_argument("--force-ocr", action="store_true", help="OCR pages even when they have a text layer")
        parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")

    def handle(self, *args, **opts) -> None:
        path: Path = opts["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        # Before any engine loads: the embedded path runs on laptops, where peak memory matters
        # (this also builds the engines memory-first: workers.engine_setup.deployment).
        return_large_buffers(settings.OCR_CLI_MMAP_THRESHOLD)
        embedded.start()

        bar: tqdm | None = None

        def on_page(sender, job_id, **kwargs) -> None:
            # The bar appears with the first finished page, once the page count is known: a
            # one-page document gets none. It is shown even when stderr is not a terminal (a CI
            # log, a pipe): stdout carries the result, so stderr is free for progress.
            nonlocal bar
            if bar is None:
                total = Job.objects.values_list("page_count", flat=True).get(pk=job_id)
                if total < 2 or opts["quiet"]:
                    return
                bar = tqdm(total=total, desc=path.name, unit="page", file=sys.stderr, disable=False, mininterval=0.2)
            bar.update(1)

        services.page_finished.connect(on_page, weak=False)
        try:
            with path.open("rb") as fh:
                job = embedded.submit(
                    fh, path.name, path.stat().st_size, engine=opts["engine"], force_ocr=opts["force_ocr"]
                )
        except InputError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        finally:
            services.page_finished.disconnect(on_page)
            if bar is not None:
                bar.close()

        if job.status != Job.Status.DONE:
            raise CommandError(f"job {job.pk} {job.status}: {job.error_code} {job.error_message}")
        field = job.result_json if opts["json"] else job.result_markdown
        with default_storage.open(field.name, "rb") as fh:
            text = fh.read().decode()
        if opts["out"]:
            opts["out"].write_text(text)
            self.stderr.write(f"wrote {opts['out']} ({job.page_count} pages, job {job.pk})")
        else:
            self.stdout.write(text, ending="")
