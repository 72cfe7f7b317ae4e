"""Operators see every delivery with its attempts (status code, latency, error) and can re-send."""

from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpRequest

from apps.webhooks import services
from apps.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookSecret


class AttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    fields = ("number", "started_at", "status_code", "latency_ms", "error_code", "error", "response_excerpt")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "event", "tenant", "url", "status", "attempts", "last_status_code", "last_error_code")
    list_filter = ("status", "event", "last_error_code")
    search_fields = ("=id", "=job__id", "tenant", "url")
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]
    inlines = [AttemptInline]
    actions = ["resend"]
    list_select_related = ("job",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # read-only log; the one repair is the re-send action

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("webhooks.resend_webhookdelivery")

    @admin.action(description="Re-send the selected events now", permissions=["resend"])
    def resend(self, request: HttpRequest, queryset) -> None:
        actor = request.user.get_username()
        sent = sum(1 for pk in queryset.values_list("pk", flat=True)[:1000] if services.resend(pk, actor=actor))
        self.message_user(request, f"{sent} event(s) queued to be sent again.", messages.SUCCESS)


@admin.register(WebhookSecret)
class WebhookSecretAdmin(admin.ModelAdmin):
    list_display = ("tenant", "created_at", "expires_at")
    list_filter = ("tenant",)
    search_fields = ("tenant",)
    readonly_fields = ("tenant", "secret", "created_at", "expires_at")
    actions = ["rotate"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(
        description="Rotate: a new secret for these tenants; old ones sign on for the overlap", permissions=["change"]
    )
    def rotate(self, request: HttpRequest, queryset) -> None:
        tenants = sorted(set(queryset.values_list("tenant", flat=True)))
        for tenant in tenants:
            services.rotate_secret(tenant)
        self.message_user(request, f"Rotated the secret of {len(tenants)} tenant(s).", messages.SUCCESS)
