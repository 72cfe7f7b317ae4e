"""API keys are created and revoked here. The full key is shown once, in the message after saving."""

from __future__ import annotations

from django.contrib import admin
from django.db import models
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from apps.api.models import TenantAPIKey

# The package's own key model is not accepted by our authentication; hiding it avoids an operator
# minting a key that can never be used.
if admin.site.is_registered(APIKey):
    admin.site.unregister(APIKey)


@admin.register(TenantAPIKey)
class TenantAPIKeyAdmin(APIKeyModelAdmin):
    list_display = [*APIKeyModelAdmin.list_display, "tenant"]
    list_filter = ("tenant", "revoked", "created")
    search_fields = ("name", "prefix", "tenant")
    # A webhook URL typed without a scheme is taken as https (Django 6's default; no plaintext guess).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
