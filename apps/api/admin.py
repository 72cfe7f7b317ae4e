"""Tenants, their API users and API keys, and the guard on who may grant a tenant's reach.

A key or a user link acts for a tenant: whoever makes one can read that tenant's documents
through the API. So making or changing either needs the permission to view jobs as well as the
permission on the object itself; an account that manages users and keys but may not see jobs
(a helpdesk) cannot mint itself a tenant's reach. For the same reason only superusers edit
users' permissions, groups and staff/superuser flags (a helpdesk that may change users could
otherwise give itself job permissions), and DRF's token admin is not registered: it lists
every token's key in plain text. API keys are shown once, in the message after saving.

Nobody manages an account that may do more than they may (``may_manage``): a user-manager who
could set a superuser's or an operator's password would log in as them. Staff and superuser
accounts are changed by superusers only (their own account aside), and any other account only by
someone who holds every permission it holds; the same rule guards the password form, deletion,
and the API-user links of such an account. Groups are edited by superusers only: a group's
permissions reach every member.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
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


def may_manage(actor, target) -> bool:
    """Whether ``actor`` may change ``target``'s account (credentials, flags, links, deletion).

    Superusers may change any account, and anyone their own (the user admin keeps privileges
    read-only for non-superusers). Otherwise the target must be neither staff nor superuser and
    hold no permission the actor lacks: managing an account must never be a way to act as one
    that may do more.
    """
    if not actor.is_active:
        return False
    if actor.is_superuser or target.pk == actor.pk:
        return True
    if target.is_superuser or target.is_staff:
        return False
    return target.get_all_permissions() <= actor.get_all_permissions()


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

    # A link gives its user a tenant's reach through the API: only for accounts the editor may manage.
    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and (obj is None or may_manage(request.user, obj.user))

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and (obj is None or may_manage(request.user, obj.user))

    def save_model(self, request, obj, form, change) -> None:
        if not may_manage(request.user, obj.user):
            raise PermissionDenied("that account may do more than you may")
        super().save_model(request, obj, form, change)


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

    # Django's password form (``user_change_password``) and the change form both ask this with
    # the account: an account beyond the editor's own is refused (403), not shown as editable.
    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and (obj is None or may_manage(request.user, obj))

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and (obj is None or may_manage(request.user, obj))

    def delete_queryset(self, request, queryset) -> None:
        # The changelist's bulk delete asks has_delete_permission without an account: check each.
        if not all(may_manage(request.user, user) for user in queryset):
            raise PermissionDenied("an account in the selection may do more than you may")
        super().delete_queryset(request, queryset)


if admin.site.is_registered(Group):
    admin.site.unregister(Group)


@admin.register(Group)
class SuperuserGroupAdmin(GroupAdmin):
    """A group's permissions reach every member, the editor included: superusers only."""

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser
