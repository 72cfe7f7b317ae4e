from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

# Registers the OpenAPI security schemes before any schema is generated: here with the schema's
# views rather than in the api app's ready(), so processes that serve no URL (the embedded CLI,
# workers) skip drf-spectacular's import (~0.3 CPU-s).
from apps.api import schema  # noqa: F401
from apps.api.metrics import metrics

# An exception no view handled: a lost database answers 503 busy:database, anything else 500.
handler500 = "apps.api.handlers.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its settings as a script file, not inline: the CSP allows no inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
    path("", include("apps.api.urls")),
]
