"""Operators' console: the Django admin shows what the pipeline is doing and repairs it.

Jobs are never edited field by field (that would bypass the compare-and-set services); every
repair is one of four actions, each a service call recorded on the job's timeline with the
operator's name, and each gated by a permission: the "Operators" group (migration 0003) may retry
and cancel; re-run and purge, like delete, are for superusers or whoever is given them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.core.files.storage import default_storage
from django.db.models import Count, DurationField, ExpressionWrapper, F
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from apps.jobs import batches, console, services
from apps.jobs.models import Batch, Job, Page, Region, StageEvent

admin.site.site_header = "OCR operators' console"
admin.site.site_title = "OCR console"
admin.site.index_title = "Pipeline"
admin.site.index_template = "admin/jobs/console_index.html"

BULK_LIMIT = 1000
TIMELINE_LIMIT = 500
THUMBNAIL_LIMIT = 60


class JobAction:
    """One repair: the service it calls and the permission that gates it. The job page's button,
    the changelist's bulk action (``<name>_jobs``) and ``JobAdmin.has_<name>_permission`` are all
    made from it."""

    def __init__(
        self,
        name: str,
        verb: str,
        service: Callable[..., bool],
        statuses: tuple[str, ...],
        bulk: str,
        danger=False,
    ):
        self.name, self.verb, self.service, self.statuses, self.danger = name, verb, service, statuses, danger
        self.bulk_description = bulk

    @property
    def perm(self) -> str:
        return f"jobs.{self.name}_job"

    def allowed(self, request: HttpRequest) -> bool:
        return request.user.has_perm(self.perm)

    def bulk_action(self) -> Callable:
        """The changelist's action over the selected jobs, gated by ``has_<name>_permission``."""

        def run(modeladmin, request, queryset):
            _run_bulk(modeladmin, request, queryset, self.name)

        run.__name__ = f"{self.name}_jobs"
        return admin.action(description=self.bulk_description, permissions=[self.name])(run)

    def permission_method(self) -> Callable:
        """``JobAdmin.has_<name>_permission``, which Django's admin asks before it offers the action."""

        def has_permission(modeladmin, request):
            return self.allowed(request)

        has_permission.__name__ = f"has_{self.name}_permission"
        return has_permission


ACTIONS = {
    a.name: a
    for a in (
        JobAction(
            "retry", "retry failed pages", services.retry, (Job.Status.FAILED,), "Retry failed pages of selected jobs"
        ),
        JobAction("cancel", "cancel", services.cancel, Job.ACTIVE, "Cancel selected jobs"),
        JobAction("rerun", "re-run from scratch", services.rerun, Job.TERMINAL, "Re-run selected jobs from scratch"),
        JobAction(
            "purge",
            "purge payload and results",
            services.purge,
            Job.TERMINAL,
            "Purge payload and results of selected jobs",
            danger=True,
        ),
    )
}


def _run_bulk(modeladmin: JobAdmin, request: HttpRequest, queryset, name: str) -> None:
    action = ACTIONS[name]
    ids = list(queryset.order_by().values_list("pk", flat=True)[: BULK_LIMIT + 1])
    if len(ids) > BULK_LIMIT:
        modeladmin.message_user(request, f"Select at most {BULK_LIMIT} jobs for one action.", messages.ERROR)
        return
    actor = request.user.get_username()
    done = sum(1 for pk in ids if action.service(pk, actor=actor))
    skipped = len(ids) - done
    level = messages.SUCCESS if done else messages.WARNING
    text = f"{action.verb.capitalize()}: {done} job(s)"
    if skipped:
        text += f"; {skipped} skipped (nothing to {action.verb} in their state)"
    modeladmin.message_user(request, text, level)


class HasErrorFilter(admin.SimpleListFilter):
    title = "error"
    parameter_name = "has_error"

    def lookups(self, request, model_admin):
        return (("yes", "Has an error"), ("no", "No error"))

    def queryset(self, request, queryset):
        # Served by the partial index job_has_error_created.
        if self.value() == "yes":
            return queryset.exclude(error_code="")
        if self.value() == "no":
            return queryset.filter(error_code="")
        return queryset


class FlaggedFilter(admin.SimpleListFilter):
    """Jobs a page of which gave something up to keep every word (``Job.flags``)."""

    title = "flags"
    parameter_name = "flagged"

    def lookups(self, request, model_admin):
        return (("yes", "Flagged"), ("no", "Not flagged"))

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.exclude(flags=[])
        if self.value() == "no":
            return queryset.filter(flags=[])
        return queryset


class JobChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        # Tell the template when the figure is the planner's estimate rather than a count.
        self.count_is_estimate = self.result_count > settings.OCR_CONSOLE_COUNT_CAP


# ``has_<name>_permission`` for every action, which Django's admin asks before it offers one.
ActionPermissions = type(
    "ActionPermissions", (), {f"has_{a.name}_permission": a.permission_method() for a in ACTIONS.values()}
)


@admin.register(Job)
class JobAdmin(ActionPermissions, admin.ModelAdmin):
    list_display = (
        "short_id",
        "filename",
        "owner_tenant",
        "status_badge",
        "progress",
        "engine",
        "duration",
        "error_code",
        "created_at",
    )
    list_display_links = ("short_id", "filename")
    # Facet counts are one COUNT per filter choice over the whole table: too dear at 100k+ jobs.
    show_facets = admin.ShowFacets.NEVER
    list_filter = (
        "status",
        ("owner", admin.RelatedFieldListFilter),
        "engine",
        "created_at",
        HasErrorFilter,
        FlaggedFilter,
    )
    search_fields = ("id", "filename", "sha256")
    search_help_text = "A job id or sha256 (exact), or part of a filename."
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    list_per_page = 50
    paginator = console.CappedCountPaginator
    show_full_result_count = False
    ordering = ("-created_at",)
    actions = tuple(a.bulk_action() for a in ACTIONS.values())
    change_form_template = "admin/jobs/job/change_form.html"
    change_list_template = "admin/jobs/job/change_list.html"
    fieldsets = (
        (None, {"fields": ("id", "filename", "status", "owner", "tenant", "engine", "attempt", "options")}),
        ("Input", {"fields": ("kind", "sha256", "size_bytes", "page_count", "source_file")}),
        (
            "Progress",
            {"fields": ("pages_done", "pages_failed", "created_at", "started_at", "finished_at", "updated_at")},
        ),
        ("Error", {"fields": ("error_code", "error_message")}),
        ("Flags", {"fields": ("flags",)}),
    )

    # --- list ----------------------------------------------------------------------------------

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(duration=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()))
        )

    def get_changelist(self, request, **kwargs):
        return JobChangeList

    def get_search_results(self, request, queryset, search_term):
        """An id or a sha256 is looked up exactly (indexed); anything else matches filenames.

        The stock search would run icontains over the UUID and sha256 columns too: a scan of
        every row for each keystroke of a filename.
        """
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(pk=uuid.UUID(term)), False
        except ValueError:
            pass
        if len(term) == 64 and all(c in "0123456789abcdefABCDEF" for c in term):
            return queryset.filter(sha256=term.lower()), False
        return queryset.filter(filename__icontains=term), False

    @admin.display(description="id", ordering="id")
    def short_id(self, job: Job) -> str:
        return str(job.pk)[:8]

    @admin.display(description="owner / tenant", ordering="owner__username")
    def owner_tenant(self, job: Job) -> str:
        owner = job.owner.get_username() if job.owner else "—"
        return f"{owner} / {job.tenant}" if job.tenant else owner

    @admin.display(description="source")
    def source_file(self, job: Job) -> str:
        # Through the permission-checked download view, never a raw MEDIA_URL (storage may be private).
        if not job.source:
            return "purged"
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:jobs_job_download", args=[job.pk, "source"]), job.source.name
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, job: Job) -> str:
        colour = console.STATUS_COLOURS.get(job.status, "#6c757d")
        return format_html('<span class="ocr-badge" style="background:{}">{}</span>', colour, job.status)

    @admin.display(description="pages")
    def progress(self, job: Job) -> str:
        total = job.page_count or 0
        done = job.pages_done + job.pages_failed
        pct = round(100 * done / total) if total else 0
        bad = round(100 * job.pages_failed / total) if total else 0
        return format_html(
            '<span class="ocr-progress" title="{} done, {} failed of {}">'
            '<span class="ok" style="width:{}%"></span><span class="bad" style="width:{}%"></span></span> {}/{}',
            job.pages_done,
            job.pages_failed,
            total,
            pct - bad,
            bad,
            job.pages_done,
            total,
        )

    @admin.display(description="duration", ordering="duration")
    def duration(self, job: Job) -> str:
        value = getattr(job, "duration", None)
        if value is None:
            return "—"
        seconds = value.total_seconds()
        if seconds < 60:
            return f"{seconds:.1f} s"
        minutes, seconds = divmod(int(seconds), 60)
        return f"{minutes} min {seconds:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"

    # --- permissions ---------------------------------------------------------------------------

    def has_add_permission(self, request):
        return False  # jobs arrive through the API

    def has_change_permission(self, request, obj=None):
        return False  # nobody edits a job's fields by hand: status moves only through services

    def get_readonly_fields(self, request, obj=None):
        return [f for fs in self.fieldsets for f in fs[1]["fields"]]

    def changelist_view(self, request, extra_context=None):
        extra = {"flower_url": settings.FLOWER_URL, "count_cap": settings.OCR_CONSOLE_COUNT_CAP}
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    # --- job page ------------------------------------------------------------------------------

    def change_view(self, request, object_id, form_url="", extra_context=None):
        job = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if job is not None:
            extra.update(self._job_context(request, job))
        return super().change_view(request, object_id, form_url, extra)

    def _job_context(self, request, job: Job) -> dict:
        events = list(job.events.select_related("page").order_by("started_at", "id")[: TIMELINE_LIMIT + 1])
        pages = list(job.pages.order_by("index").annotate(n_regions=Count("regions"))[: THUMBNAIL_LIMIT + 1])
        markdown = console.read_result(job, "markdown")
        json_doc = console.read_result(job, "json")
        return {
            "job": job,
            "events": events[:TIMELINE_LIMIT],
            "events_cut": len(events) > TIMELINE_LIMIT,
            "pages": pages[:THUMBNAIL_LIMIT],
            "pages_cut": len(pages) > THUMBNAIL_LIMIT,
            "markdown_html": console.render_markdown(markdown[0]) if markdown else None,
            "markdown_cut": bool(markdown and markdown[1]),
            "json_text": console.pretty_json(*json_doc) if json_doc else None,
            "json_cut": bool(json_doc and json_doc[1]),
            "job_actions": [
                {"name": a.name, "verb": a.verb, "danger": a.danger, "applies": job.status in a.statuses}
                for a in ACTIONS.values()
                if a.allowed(request)
            ],
            "status_colour": console.STATUS_COLOURS.get(job.status, "#6c757d"),
            "flower_url": settings.FLOWER_URL,
        }

    # --- console views -------------------------------------------------------------------------

    def get_urls(self):
        wrap = self.admin_site.admin_view
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("<uuid:job_id>/act/<str:action>/", wrap(self.action_view), name=f"{prefix}_act"),
            path("<uuid:job_id>/pages/<int:index>/", wrap(self.page_view), name=f"{prefix}_page"),
            path("page-image/<int:page_id>/", wrap(self.page_image_view), name=f"{prefix}_page_image"),
            path("<uuid:job_id>/download/<str:what>/", wrap(self.download_view), name=f"{prefix}_download"),
            *super().get_urls(),
        ]

    def _viewable(self, request: HttpRequest) -> None:
        if not self.has_view_permission(request):
            raise PermissionDenied

    def action_view(self, request: HttpRequest, job_id, action: str) -> HttpResponse:
        """POST only (the admin wrapper checks CSRF); the permission is the action's own."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        act = ACTIONS.get(action)
        if act is None:
            raise Http404("no such action")
        if not act.allowed(request):
            raise PermissionDenied
        job = get_object_or_404(Job, pk=job_id)
        if act.service(job.pk, actor=request.user.get_username()):
            self.message_user(request, f"{act.verb.capitalize()}: done.", messages.SUCCESS)
        else:
            self.message_user(request, f"Nothing to {act.verb}: the job is {job.status}.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:jobs_job_change", args=[job.pk]))

    def page_view(self, request: HttpRequest, job_id, index: int) -> HttpResponse:
        self._viewable(request)
        page = get_object_or_404(Page.objects.select_related("job"), job_id=job_id, index=index)
        regions = list(page.regions.order_by("order", "pk"))
        neighbours = dict(
            Page.objects.filter(job_id=job_id, index__in=(index - 1, index + 1)).values_list("index", "pk")
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Page {page.index + 1} of {page.job.filename or page.job_id}",
            "job": page.job,
            "page": page,
            "overlay": console.overlay(page, regions),
            "has_image": bool(page.image),
            "prev_index": index - 1 if (index - 1) in neighbours else None,
            "next_index": index + 1 if (index + 1) in neighbours else None,
        }
        return TemplateResponse(request, "admin/jobs/job/page.html", context)

    def page_image_view(self, request: HttpRequest, page_id: int) -> HttpResponse:
        """Images go through here, not MEDIA_URL: the permission is checked and storage may be
        a private S3 bucket."""
        self._viewable(request)
        page = get_object_or_404(Page.objects.select_related("job"), pk=page_id)
        width = min(int(request.GET.get("w", "0") or 0), 800) if request.GET.get("w", "").isdigit() else None
        try:
            body = console.page_image(page, width)
        except (console.NoImage, FileNotFoundError) as exc:
            raise Http404(str(exc)) from exc
        if body.stored_name:
            response = FileResponse(default_storage.open(body.stored_name, "rb"), content_type=body.content_type)
        else:
            response = HttpResponse(body.content, content_type=body.content_type)
        response["Cache-Control"] = "private, max-age=300"
        return response

    def download_view(self, request: HttpRequest, job_id, what: str) -> HttpResponse:
        self._viewable(request)
        job = get_object_or_404(Job, pk=job_id)
        field = {"markdown": job.result_markdown, "json": job.result_json, "source": job.source}.get(what)
        if not field:
            raise Http404("nothing stored")
        ext = {"markdown": "md", "json": "json"}.get(what, job.kind)
        stem = (job.filename.rsplit(".", 1)[0] if job.filename else str(job.pk)) or str(job.pk)
        name = job.filename if what == "source" and job.filename else f"{stem}.{ext}"
        try:
            fh = default_storage.open(field.name, "rb")
        except FileNotFoundError as exc:
            raise Http404("the stored file is gone") from exc
        return FileResponse(fh, as_attachment=True, filename=name)


class PipelineRecordAdmin(admin.ModelAdmin):
    """Rows the pipeline writes: viewable, never added or edited by hand (an edit would disagree
    with the stored results and the timeline), listed with a bounded count."""

    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = console.CappedCountPaginator

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Page)
class PageAdmin(PipelineRecordAdmin):
    list_display = (
        "job",
        "index",
        "status",
        "source",
        "rotation",
        "script",
        "flags",
        "layout_ms",
        "recognize_ms",
        "error_code",
    )
    list_filter = ("status", "source", "rotation", "script")
    list_select_related = ("job",)
    raw_id_fields = ("job",)


@admin.register(Region)
class RegionAdmin(PipelineRecordAdmin):
    list_display = ("page", "order", "label", "status", "engine", "confidence")
    list_filter = ("label", "status")
    list_select_related = ("page",)
    raw_id_fields = ("page",)


@admin.register(StageEvent)
class StageEventAdmin(PipelineRecordAdmin):
    list_display = ("job", "stage", "outcome", "worker", "actor", "attempt", "started_at", "duration_ms")
    list_filter = ("stage", "outcome")
    list_select_related = ("job",)
    raw_id_fields = ("job", "page")


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    """Batches: their source, where the expansion stands, and counts by status (read from the jobs)."""

    list_display = ("id", "tenant", "status", "source", "prefix", "items_expanded", "expanded", "created_at")
    list_filter = ("status", "source")
    search_fields = ("id", "tenant", "prefix")
    readonly_fields = [f.name for f in Batch._meta.fields] + ["progress"]
    actions = ["cancel_batches"]

    def has_add_permission(self, request) -> bool:
        return False  # batches come through the API, where the tenant's prefixes are checked

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="progress")
    def progress(self, batch: Batch) -> str:
        p = batches.progress(batch)
        jobs = ", ".join(f"{status} {n}" for status, n in p.jobs.items() if n)
        return (
            f"{p.items} items ({'all' if p.expanded else 'not all'} made into jobs): {jobs or 'none yet'}; "
            f"pages in {p.pages_in} = done {p.pages_done} + failed {p.pages_failed} + cancelled {p.pages_cancelled}"
        )

    @admin.action(description="Cancel the selected batches (and their unfinished jobs)")
    def cancel_batches(self, request, queryset) -> None:
        if not request.user.has_perm("jobs.cancel_batch"):
            raise PermissionDenied
        done = sum(batches.cancel_batch(b.pk, actor=request.user.get_username()) for b in queryset)
        self.message_user(request, f"{done} batch(es) cancelled", messages.SUCCESS)
