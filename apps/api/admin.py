"""Tenants, their API users and API keys, and the guard on who may grant a tenant's reach.

A key or a user link acts for a tenant: whoever makes one can read that tenant's documents
through the API. So making or changing either needs the permission to view jobs as well as the
permission on the object itself; an account that manages users and keys but may not see jobs
(a helpdesk) cannot mint itself a tenant's reach. For the same reason only superusers edit
users' permissions, groups and staff/superuser flags (a helpdesk that may change users could
otherwise give itself job permissions), and DRF's token admin is not registered: it lists
every token's key in plain text. API keys are shown once, in the message after saving.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db import models
from django.http import HttpRequest
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from apps.api.models import Tenant, TenantAPIKey, TenantUser

# The package's own key model is not accepted by our authentication; hiding it avoids an operator
# minting a key that can never be used.
if admin.site.is_registered(APIKey):
    admin.site.unregister(APIKey)
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)
del TokenAdmin  # imported only so that its registration has run before the line above undoes it

# What reading a tenant's documents takes in the console; granting that reach takes it too.
READ_JOBS = "jobs.view_job"


def may_grant_tenant_reach(request: HttpRequest) -> bool:
    return request.user.has_perm(READ_JOBS)


class GrantsTenantReach:
    """Adding or changing rows that let someone act for a tenant needs READ_JOBS as well."""

    def has_add_permission(self, request, *args) -> bool:
        return super().has_add_permission(request, *args) and may_grant_tenant_reach(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and may_grant_tenant_reach(request)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "created", "max_upload_bytes", "max_pages", "backlog_share")
    search_fields = ("slug", "name")
    readonly_fields = ("created",)

    def get_readonly_fields(self, request, obj=None):
        # The slug is what jobs and keys carry: renaming it would orphan them.
        return (*self.readonly_fields, "slug") if obj is not None else self.readonly_fields


@admin.register(TenantUser)
class TenantUserAdmin(GrantsTenantReach, admin.ModelAdmin):
    list_display = ("user", "tenant")
    list_filter = ("tenant",)
    search_fields = ("user__username", "tenant__slug")
    autocomplete_fields = ("user", "tenant")


@admin.register(TenantAPIKey)
class TenantAPIKeyAdmin(GrantsTenantReach, APIKeyModelAdmin):
    list_display = [*APIKeyModelAdmin.list_display, "tenant"]
    list_filter = ("tenant", "revoked", "created")
    search_fields = ("name", "prefix", "tenant")
    # A webhook URL typed without a scheme is taken as https (Django 6's default; no plaintext guess).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class GuardedUserAdmin(UserAdmin):
    """Django's user admin, except that only superusers change what a user may do."""

    PRIVILEGES = ("is_staff", "is_superuser", "groups", "user_permissions")

    def get_readonly_fields(self, request, obj=None):
        fields = super().get_readonly_fields(request, obj)
        return fields if request.user.is_superuser else (*fields, *self.PRIVILEGES)
