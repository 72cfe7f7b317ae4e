"""Job, Page, Region and StageEvent: the system of record.

Statuses and their moves are declared in ``apps.jobs.states``; status only moves through
``apps.jobs.services`` and each move is a conditional UPDATE (compare-and-set), so two workers
handed the same message cannot both advance a row.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from apps.jobs.states import JOB_ACTIVE, JOB_TERMINAL, JobStatus, PageStatus
from ocrsite import catalogue


class Batch(models.Model):
    """Many documents under one set of options, run on the bulk lane (``apps.jobs.batches``).

    The source is a storage prefix, a list of object keys, or a list of direct-upload ids. Items
    become jobs lazily, OCR_BATCH_EXPAND_CHUNK at a time while fewer than OCR_BATCH_WINDOW of the
    batch's jobs are unfinished, so a million-document batch never writes a million rows at once.
    ``cursor`` is where the expansion goes on from (the last key listed, or the next list index):
    an expansion that dies redoes at most one chunk, and ``(batch, batch_item)`` is unique, so
    a redone chunk makes no second job.
    """

    class Status(models.TextChoices):
        RUNNING = "running"  # items still becoming jobs, or jobs still running
        DONE = "done"  # every item ended (done or failed, each with its code)
        CANCELLED = "cancelled"

    class Source(models.TextChoices):
        PREFIX = "prefix"
        KEYS = "keys"
        UPLOADS = "uploads"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    tenant = models.CharField(max_length=100, blank=True, default="", db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    source = models.CharField(max_length=16, choices=Source.choices)
    prefix = models.CharField(max_length=1024, blank=True, default="")
    items = models.JSONField(default=list, blank=True, help_text="object keys or upload ids, for those sources")
    engine = models.CharField(max_length=16, default=catalogue.DEFAULT_JOB_ENGINE)
    options = models.JSONField(default=dict, blank=True)
    cursor = models.CharField(max_length=1024, blank=True, default="")
    expanded = models.BooleanField(default=False, help_text="every item has its job")
    items_expanded = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "batches"
        permissions = [("cancel_batch", "Can cancel a batch")]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.status})"


class Job(models.Model):
    Status = JobStatus
    ACTIVE = JOB_ACTIVE
    TERMINAL = JOB_TERMINAL

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    tenant = models.CharField(max_length=100, blank=True, default="", db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # One of the catalogue's job engines (ocrsite.catalogue.JOB_ENGINES), checked where a job is
    # asked for (the API's serializer, OCR_ENGINE's choices). No database choices: a new engine is a
    # catalogue line, not a migration.
    engine = models.CharField(max_length=16, default=catalogue.DEFAULT_JOB_ENGINE)
    options = models.JSONField(default=dict, blank=True)
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    attempt = models.PositiveIntegerField(default=1)

    filename = models.CharField(max_length=255, blank=True, default="")
    source = models.FileField(upload_to="sources/", max_length=255)
    kind = models.CharField(max_length=8, help_text="type sniffed from magic bytes: pdf, png, jpeg, tiff, webp, bmp")
    sha256 = models.CharField(max_length=64, db_index=True)
    size_bytes = models.BigIntegerField(default=0)

    page_count = models.PositiveIntegerField(default=0)
    pages_done = models.PositiveIntegerField(default=0)
    pages_failed = models.PositiveIntegerField(default=0)
    # What any page of the job had to give up (``Page.flags``), gathered so the console and
    # /metrics find such jobs without reading pages.
    flags = models.JSONField(default=list, blank=True)
    # Deliveries of the job-wide stages, claimed by compare-and-set as pages count theirs: a document
    # that kills its worker every time fails job:stalled at OCR_MAX_ATTEMPTS (workers/budget.py).
    ingest_attempts = models.PositiveSmallIntegerField(default=0)
    assembly_attempts = models.PositiveSmallIntegerField(default=0)

    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.TextField(blank=True, default="")

    result_markdown = models.FileField(upload_to="results/", max_length=255, blank=True)
    result_json = models.FileField(upload_to="results/", max_length=255, blank=True)
    # The result cache's key for this job (services.result_cache): sha256 of the document, page
    # selection, output options and engine/model versions. A job answered from the cache keeps
    # the producer's result files (names, not copies) and names the producer in ``cached_from``.
    result_key = models.CharField(max_length=64, blank=True, default="")
    cached_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reused_by")
    # The batch this job is an item of (its stages run on the bulk lane) and the item: the object
    # key (the source is then the tenant's own object, never deleted by a purge) or upload id.
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    batch_item = models.CharField(max_length=1024, blank=True, default="")
    # The job's own trace context (W3C traceparent), taken where it was created: every stage's span
    # is its child, so a job is one trace whatever queues and merged passes its pages went through.
    traceparent = models.CharField(max_length=55, blank=True, default="")
    # CPU seconds (ms) the job-wide stages (ingest, assembly) spent; its pages' own are on each page.
    cpu_ms = models.PositiveBigIntegerField(default=0)
    # Set when the payload and results were deleted (retention or an operator); the row stays.
    purged_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="job_tenant_created"),
            models.Index(fields=["status", "created_at"], name="job_status_created"),
            models.Index(fields=["tenant", "idempotency_key"], name="job_tenant_idem"),
            models.Index(fields=["error_code"], name="job_error_code"),
            # The operators' console filters by these and sorts newest first (apps/jobs/admin.py).
            models.Index(fields=["owner", "-created_at"], name="job_owner_created"),
            models.Index(fields=["engine", "-created_at"], name="job_engine_created"),
            models.Index(fields=["-created_at"], condition=~models.Q(error_code=""), name="job_has_error_created"),
            # The retention purge looks for old finished jobs not yet purged.
            models.Index(
                fields=["created_at"], condition=models.Q(purged_at__isnull=True), name="job_unpurged_created"
            ),
        ]
        constraints = [
            # An expansion redone after a crash makes no second job for an item.
            models.UniqueConstraint(
                fields=["batch", "batch_item"], condition=models.Q(batch__isnull=False), name="job_batch_item_unique"
            ),
            # Two requests racing with the same Idempotency-Key: the second insert fails and
            # services.submit returns the first job.
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="job_tenant_idem_unique",
            ),
        ]
        permissions = [
            ("retry_job", "Can retry the failed pages of a job"),
            ("cancel_job", "Can cancel a job"),
            ("rerun_job", "Can re-run a job from scratch"),
            ("purge_job", "Can purge a job's payload and results"),
        ]

    # Not a column: services.submit sets it on a job returned for a repeated Idempotency-Key.
    replayed = False

    def __str__(self) -> str:
        return f"{self.filename or self.pk} ({self.status})"

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class Page(models.Model):
    Status = PageStatus

    class Source(models.TextChoices):
        TEXT_LAYER = "text-layer"
        OCR = "ocr"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="pages")
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.OCR)
    width = models.PositiveIntegerField(default=0, help_text="image width in pixels")
    height = models.PositiveIntegerField(default=0, help_text="image height in pixels")
    width_pt = models.FloatField(default=0.0)
    height_pt = models.FloatField(default=0.0)
    dpi = models.PositiveIntegerField(default=0)
    image = models.FileField(upload_to="pages/", max_length=255, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    layout_ms = models.PositiveIntegerField(null=True, blank=True)
    recognize_ms = models.PositiveIntegerField(null=True, blank=True)
    cpu_ms = models.PositiveIntegerField(
        default=0, help_text="worker CPU ms spent on this page in layout and recognition (its share of a batched pass)"
    )
    gpu_ms = models.PositiveIntegerField(
        default=0, help_text="estimated VLM GPU ms: each request's time × its share of the server (an upper bound)"
    )
    rotation = models.PositiveSmallIntegerField(
        default=0,
        help_text="clockwise degrees the page's text stood turned as submitted: a scan is stored turned "
        "upright; a text-layer page's boxes stay on the page as displayed",
    )
    flags = models.JSONField(
        default=list, blank=True, help_text="what the page gave up to keep every word (conservation:...)"
    )
    script = models.CharField(
        max_length=16,
        blank=True,
        default="",
        help_text="the script OCR judged the page to be written in (latin, cjk, cyrillic, hangul, arabic, hebrew, "
        "devanagari, unsupported); empty: not judged",
    )
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["job", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="page_job_index")]
        indexes = [
            models.Index(fields=["status", "claimed_at"], name="page_status_claimed"),
            # Dashboard and /metrics: oldest waiting page, pages finished per minute.
            models.Index(fields=["status", "updated_at"], name="page_status_updated"),
        ]

    def __str__(self) -> str:
        return f"page {self.index + 1} of {self.job_id}"


class Region(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="regions")
    order = models.PositiveIntegerField(help_text="reading order within the page")
    label = models.CharField(max_length=32)
    x0 = models.FloatField()
    y0 = models.FloatField()
    x1 = models.FloatField()
    y1 = models.FloatField()
    polygon = models.JSONField(null=True, blank=True)
    score = models.FloatField(default=0.0, help_text="layout detector confidence")
    task = models.CharField(
        max_length=16,
        blank=True,
        default="",
        help_text="what the layout model said to do with the box (text, table, formula, chart, skip, abandon); "
        "empty: the recognizer decides from the label",
    )
    text = models.TextField(blank=True, default="")
    confidence = models.FloatField(null=True, blank=True, help_text="recognizer confidence")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    source = models.CharField(max_length=16, default=Page.Source.OCR)
    engine = models.CharField(max_length=64, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    flags = models.JSONField(default=list, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    table = models.JSONField(null=True, blank=True, help_text="a table region's grid: cells with text, box, spans")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["page", "order"]
        # Not unique: re-ordering after recognition renumbers rows one by one.
        indexes = [models.Index(fields=["page", "order"], name="region_page_order")]

    def __str__(self) -> str:
        return f"{self.label} #{self.order}"

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return (self.x0, self.y0, self.x1, self.y1)


class StageEvent(models.Model):
    """One row per pipeline stage run or operator action: the job's timeline."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    page = models.ForeignKey(Page, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    stage = models.CharField(max_length=32)
    outcome = models.CharField(max_length=16, default="ok")
    attempt = models.PositiveIntegerField(default=1)
    worker = models.CharField(max_length=255, blank=True, default="")
    actor = models.CharField(max_length=150, blank=True, default="", help_text="operator, for actions")
    error_code = models.CharField(max_length=64, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["job", "started_at", "id"]
        indexes = [
            models.Index(fields=["job", "started_at"], name="event_job_started"),
            models.Index(fields=["stage", "started_at"], name="event_stage_started"),
        ]

    def __str__(self) -> str:
        return f"{self.stage} {self.outcome}"


class CachedResult(models.Model):
    """A done job's result, offered to later jobs with the same key (``services.result_cache``).

    ``scope`` is the tenant whose jobs may reuse it, or "" when OCR_RESULT_CACHE_SHARED lets every
    tenant's. The files belong to ``job``, the producer; a purge deletes them only when no
    unpurged job still names them, and deletes this row first, so no new job can point at bytes
    on their way out.
    """

    scope = models.CharField(max_length=100, blank=True, default="")
    key = models.CharField(max_length=64)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="cached_results")
    result_markdown = models.CharField(max_length=255)
    result_json = models.CharField(max_length=255)
    page_count = models.PositiveIntegerField(default=0)
    hits = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key"], name="cached_result_scope_key")]
        indexes = [models.Index(fields=["result_json"], name="cached_result_json")]

    def __str__(self) -> str:
        return f"{self.key[:12]} ({self.scope or 'shared'})"


class DirectUpload(models.Model):
    """A presigned slot in object storage for one document that the client sends there itself.

    Bound at creation to a tenant, an exact size and a content type, and valid until
    ``expires_at``. The bytes never pass through the web tier; ``services.submit_uploaded`` turns
    the slot into a job once, after checking the stored object against what was declared.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    tenant = models.CharField(max_length=100, blank=True, default="", db_index=True)
    filename = models.CharField(max_length=255, blank=True, default="")
    content_type = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    key = models.CharField(max_length=255, unique=True, help_text="the object's name in default storage")
    expires_at = models.DateTimeField()
    # Set once, by the conditional UPDATE that consumes the slot; a second job from it is refused.
    job = models.OneToOneField(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="direct_upload")
    created_at = models.DateTimeField(auto_now_add=True)
    # The stable code of the last refusal of its bytes at job creation (size, type, expiry, probe).
    refused_code = models.CharField(max_length=64, blank=True, default="")
    # Set once, by the conditional UPDATE with which the upload sweep takes a slot no job took, just
    # before it deletes the object; the slot makes no job after that (``upload:expired``).
    discarded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The upload sweep looks for expired slots that made no job and still have their object.
            models.Index(
                fields=["expires_at"],
                condition=models.Q(job__isnull=True, discarded_at__isnull=True),
                name="upload_unused_expires",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.filename or self.pk} ({self.size_bytes} bytes)"
