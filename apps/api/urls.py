from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.api import uploads, views

router = SimpleRouter()
router.trailing_slash = "/?"  # /api/v1/jobs and /api/v1/jobs/ both answer, as integrators type both
router.register("api/v1/jobs", views.JobViewSet, basename="job")
router.register("api/v1/batches", views.BatchViewSet, basename="batch")

urlpatterns = [
    path("api/v1/uploads", views.create_upload, name="upload-create"),
    path("api/v1/uploads/<uuid:upload_id>/content", uploads.receive_content, name="upload-content"),
    path("process", views.gateway_process, name="gateway-process"),
    path("status/<uuid:task_id>", views.gateway_status, name="gateway-status"),
    path("health", views.health, name="gateway-health"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    *router.urls,
]
