"""job_id and page_id on every pipeline log line, and the two log formats.

A Celery ``task_prerun`` handler binds the IDs a task was sent with (``ingest(job_id)``,
``recognize(page_id)``, ``detect_layout(page_ids)``); pipeline functions add what they learn
(the job of a page). A filter on the handler copies the bound values onto each record, so every
line written while a task runs carries them, whichever module logged it, without each call site
passing ``extra=``. Context variables keep concurrent threads and nested eager tasks apart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextvars import ContextVar, Token

from ocrsite.vocabulary import TaskName

job_id_var: ContextVar[str] = ContextVar("job_id", default="")
page_id_var: ContextVar[str] = ContextVar("page_id", default="")

# Which argument of each task names what; other tasks (sweep) bind nothing.
_TASK_BINDINGS = {
    TaskName.INGEST.value: job_id_var,
    TaskName.ASSEMBLE.value: job_id_var,
    TaskName.RECOGNIZE.value: page_id_var,
    TaskName.DETECT_LAYOUT.value: page_id_var,
}
_tokens: dict[str, list[tuple[ContextVar[str], Token]]] = {}


def _ids(value: object) -> str:
    """ "7" or "7,8,9" from an ID or a list of IDs; anything else (a batch of request objects,
    as celery-batches passes) binds nothing, and the pipeline binds what it claims."""
    if isinstance(value, list | tuple | set):
        return ",".join(str(v) for v in value if isinstance(v, int | str))
    return str(value) if isinstance(value, int | str) else ""


def bind(*, job_id: object = None, page_id: object = None) -> None:
    """Add what a pipeline function learnt (the job of a page) to the current task's context."""
    if job_id is not None:
        job_id_var.set(_ids(job_id))
    if page_id is not None:
        page_id_var.set(_ids(page_id))


def bind_task(task_id: str, task_name: str, args: Iterable[object] | None) -> None:
    """Celery ``task_prerun``: bind the IDs in the message; ``unbind_task`` restores what was."""
    var = _TASK_BINDINGS.get(task_name)
    args = list(args or [])
    tokens = [(job_id_var, job_id_var.set("")), (page_id_var, page_id_var.set(""))]
    if var is not None and args:
        var.set(_ids(args[0]))
    _tokens[task_id] = tokens


def unbind_task(task_id: str) -> None:
    for var, token in reversed(_tokens.pop(task_id, [])):
        try:
            var.reset(token)
        except ValueError:  # set in another context (a thread pool): clearing is enough
            var.set("")


class PipelineContextFilter(logging.Filter):
    """Puts ``job_id`` and ``page_id`` on every record; an explicit ``extra=`` wins."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "job_id", ""):
            record.job_id = job_id_var.get() or "-"
        if not getattr(record, "page_id", ""):
            record.page_id = page_id_var.get() or "-"
        return True


def logging_config(fmt: str, level: str) -> dict:
    """Django's LOGGING: readable lines locally, one JSON object per line when ``fmt == "json"``."""
    formatters = {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [job=%(job_id)s page=%(page_id)s] %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(job_id)s %(page_id)s %(process)d",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"pipeline_context": {"()": "ocrsite.logcontext.PipelineContextFilter"}},
        "formatters": formatters,
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json" if fmt == "json" else "plain",
                "filters": ["pipeline_context"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        # axes announces itself at every start-up; only its warnings (lockouts) matter.
        "loggers": {
            "RapidOCR": {"level": "WARNING"},
            "rapid_layout": {"level": "WARNING"},
            "axes": {"level": "WARNING"},
        },
    }
