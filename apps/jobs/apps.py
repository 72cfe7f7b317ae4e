from __future__ import annotations

from celery.signals import task_postrun, task_prerun
from django.apps import AppConfig
from django.db import close_old_connections

from ocrsite import logcontext


class JobsConfig(AppConfig):
    name = "apps.jobs"
    label = "jobs"
    verbose_name = "OCR jobs"

    def ready(self) -> None:
        from prometheus_client import REGISTRY

        # The configured Celery app becomes the current one in every Django process (web, admin,
        # tests), so enqueueing by task name goes to our broker with our routes.
        import ocrsite.celery  # noqa: F401
        from apps.jobs.monitoring import collector  # models are importable only once apps are ready

        # ready() can run twice in one process (test runners); a second register would raise.
        if collector not in REGISTRY._collector_to_names:
            REGISTRY.register(collector)
        # Workers: job_id / page_id on every log line written while a task runs.
        task_prerun.connect(_bind_task_logs, weak=False, dispatch_uid="ocr-log-bind")
        task_postrun.connect(_unbind_task_logs, weak=False, dispatch_uid="ocr-log-unbind")
        # Database connections outlive a task (settings.CELERY_DB_REUSE_MAX): each task starts and
        # ends as a request does, closing a connection past DATABASE_CONN_MAX_AGE or left broken,
        # and checking a kept one at its first query (DATABASE_CONN_HEALTH_CHECKS).
        task_prerun.connect(_check_db_connections, weak=False, dispatch_uid="ocr-db-prerun")
        task_postrun.connect(_check_db_connections, weak=False, dispatch_uid="ocr-db-postrun")


def _bind_task_logs(sender=None, task_id=None, task=None, args=None, **_) -> None:
    logcontext.bind_task(task_id or "", getattr(task, "name", ""), args)


def _check_db_connections(sender=None, task=None, **_) -> None:
    # An eager task runs inside its caller's transaction (manage.py ocr, tests): never close that.
    if task is not None and not getattr(task.request, "is_eager", False):
        close_old_connections()


def _unbind_task_logs(sender=None, task_id=None, **_) -> None:
    logcontext.unbind_task(task_id or "")
