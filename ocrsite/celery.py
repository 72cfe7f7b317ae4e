"""Celery application: configuration only. Tasks live in the stage modules under ``workers``."""

from __future__ import annotations

import os

from celery import Celery

from ocrsite.vocabulary import TASK_MODULES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")

app = Celery("ocrsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The stage modules themselves (related_name=None), not a ``tasks`` module inside each.
app.autodiscover_tasks(list(TASK_MODULES), related_name=None)
