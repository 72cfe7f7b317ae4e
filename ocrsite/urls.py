from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

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
