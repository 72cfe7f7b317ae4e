"""A batch's expansion [queue: bulk]: its next items become jobs, lazily, on the bulk lane.

The task sends itself again every OCR_BATCH_POLL_SECONDS while the batch runs: to make more jobs
as earlier ones end (at most OCR_BATCH_WINDOW unfinished), and to end the batch once every item
has ended. A lost message is re-sent by the sweep (the batch's ``updated_at`` goes stale).
"""

from __future__ import annotations

from django.conf import settings

from apps.jobs import batches
from ocrsite.celery import app
from ocrsite.vocabulary import TaskName
from workers.retry import PipelineTask


@app.task(base=PipelineTask, name=TaskName.EXPAND_BATCH.value)
def expand_batch(batch_id: str) -> None:
    """The batch's next chunk of items as jobs (each item once); the batch ended when all have."""
    if batches.expand(batch_id):
        batches.send_expansion(batch_id, countdown=settings.OCR_BATCH_POLL_SECONDS)
