"""The embedded pipeline: the cluster's services and tasks run in this process (Celery eager mode),
against the configured database and storage. ``manage.py ocr`` and the evaluation corpus
(``make eval``) both go through here, so what the corpus scores is what the CLI runs.
"""

from __future__ import annotations

import logging
import os
from typing import BinaryIO

from django.core.management import call_command

from apps.jobs import services
from apps.jobs.models import Job
from ocrsite.celery import app as celery_app


def start() -> None:
    """Make this process run the pipeline itself: the schema migrated, tasks registered and run
    eagerly. Call once, before the first ``submit``; the engines are built by the first page and
    kept for the process's life."""
    call_command("migrate", verbosity=0, interactive=False)
    # The terminal shows the document; the pipeline's INFO lines are for worker logs.
    for name in ("celery", "apps", "workers"):
        logging.getLogger(name).setLevel(logging.WARNING)
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    # Celery's Django fixup runs Django's system checks when the task modules are imported (~0.4
    # CPU-s: they load the URL conf, the admin and the API schema); this process serves no URL,
    # and `manage.py ocr` skips them for the same reason. Workers still run them at start.
    os.environ.setdefault("CELERY_SKIP_CHECKS", "1")
    # Register the tasks in this process so enqueueing by name runs them here (eager mode);
    # the web process never imports them and sends by name to the broker instead.
    celery_app.loader.import_default_modules()


def submit(
    stream: BinaryIO,
    filename: str,
    size: int,
    *,
    engine: str | None = None,
    force_ocr: bool = False,
    pages: str = "",
) -> Job:
    """Submit one document (``pages``: the API's page selection, e.g. ``"2"``; empty for all) and
    return its job once the pipeline has run to its end, done or failed. Raises ``InputError``
    for a document the door refuses."""
    upload = services.Upload(stream=stream, filename=filename, size=size)
    options = {"ocr": "force" if force_ocr else "auto", **({"pages": pages} if pages else {})}
    job = services.submit(upload, tenant="cli", engine=engine, options=options)
    job.refresh_from_db()
    return job
