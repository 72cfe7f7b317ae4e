"""Celery application: configuration only. Tasks live in ``workers.tasks``."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")

app = Celery("ocrsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
