from __future__ import annotations

from celery.signals import task_postrun, task_prerun
from django.apps import AppConfig

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


def _bind_task_logs(sender=None, task_id=None, task=None, args=None, **_) -> None:
    logcontext.bind_task(task_id or "", getattr(task, "name", ""), args)


def _unbind_task_logs(sender=None, task_id=None, **_) -> None:
    logcontext.unbind_task(task_id or "")
