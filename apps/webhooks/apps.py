from __future__ import annotations

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "apps.webhooks"
    label = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from apps.jobs.services import job_finished
        from apps.webhooks.services import on_job_finished

        job_finished.connect(on_job_finished, dispatch_uid="webhooks-job-finished")
