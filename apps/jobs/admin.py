"""Operators' console. The console issue grows this into the full dashboard."""

from __future__ import annotations

from django.contrib import admin

from apps.jobs.models import Job, Page, Region, StageEvent


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "filename", "tenant", "status", "pages_done", "page_count", "engine", "created_at", "error_code")
    list_filter = ("status", "engine")
    search_fields = ("id", "filename", "sha256")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ("job", "index", "status", "source", "layout_ms", "recognize_ms", "error_code")
    list_filter = ("status", "source")
    raw_id_fields = ("job",)


@admin.register(Region)
class RegionAdmin(admin.ModelAdmin):
    list_display = ("page", "order", "label", "status", "engine", "confidence")
    list_filter = ("label", "status")
    raw_id_fields = ("page",)


@admin.register(StageEvent)
class StageEventAdmin(admin.ModelAdmin):
    list_display = ("job", "stage", "outcome", "worker", "actor", "started_at", "duration_ms")
    list_filter = ("stage", "outcome")
    raw_id_fields = ("job", "page")
