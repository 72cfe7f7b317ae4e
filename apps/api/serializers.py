from __future__ import annotations

from django.db.models import Sum
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.jobs import batches
from apps.jobs.documents import CONTENT_TYPES
from apps.jobs.models import Batch, Job
from ocrsite import catalogue


class JobCreateSerializer(serializers.Serializer):
    file = serializers.FileField(
        allow_empty_file=True, required=False, help_text="PDF, PNG, JPEG, TIFF, WebP or BMP (or give upload)"
    )
    upload = serializers.UUIDField(
        required=False, help_text="Instead of file: the id of a direct upload (POST /api/v1/uploads) already sent"
    )
    engine = serializers.ChoiceField(choices=catalogue.job_engine_choices(), required=False)
    ocr = serializers.ChoiceField(
        choices=[("auto", "auto"), ("force", "force")],
        required=False,
        default="auto",
        help_text="auto: born-digital pages use their text layer; force: OCR every page",
    )
    callback_url = serializers.URLField(
        required=False,
        max_length=2000,
        help_text="POST a signed event (Standard Webhooks) here when the job is done, failed or cancelled",
    )
    pages = serializers.CharField(
        required=False, allow_blank=True, max_length=2000, help_text="only these pages, 1-based: 1-50,75 (default: all)"
    )

    def validate_callback_url(self, value: str) -> str:
        if not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("callback_url must be an http or https URL")
        return value

    def validate(self, attrs: dict) -> dict:
        if ("file" in attrs) == ("upload" in attrs):
            raise serializers.ValidationError("give exactly one of file or upload")
        return attrs


class BatchCreateSerializer(serializers.Serializer):
    """A batch: one source (a storage prefix, object keys, or direct-upload ids) and job options."""

    prefix = serializers.CharField(
        required=False, max_length=1024, help_text="every object under this key prefix (within the tenant's)"
    )
    keys = serializers.ListField(
        child=serializers.CharField(max_length=1024), required=False, help_text="these object keys"
    )
    uploads = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, help_text="these direct uploads' ids"
    )
    engine = serializers.ChoiceField(choices=catalogue.job_engine_choices(), required=False)
    ocr = serializers.ChoiceField(choices=[("auto", "auto"), ("force", "force")], required=False, default="auto")
    pages = serializers.CharField(required=False, allow_blank=False, max_length=2000)

    def validate(self, attrs: dict) -> dict:
        if sum(name in attrs for name in ("prefix", "keys", "uploads")) != 1:
            raise serializers.ValidationError("give exactly one of prefix, keys or uploads")
        return attrs


class BatchProgressSerializer(serializers.Serializer):
    items = serializers.IntegerField(help_text="items made into jobs so far")
    expanded = serializers.BooleanField(help_text="every item has its job")
    fraction = serializers.FloatField(help_text="items ended / items (0 until expanded)")
    jobs = serializers.DictField(child=serializers.IntegerField(), help_text="jobs by status")
    pages_in = serializers.IntegerField()
    pages_done = serializers.IntegerField()
    pages_failed = serializers.IntegerField()
    pages_cancelled = serializers.IntegerField()
    cpu_seconds = serializers.FloatField(help_text="worker CPU seconds spent on the batch's jobs so far")
    gpu_seconds = serializers.FloatField(help_text="estimated VLM GPU seconds of the batch's pages so far")


class BatchSerializer(serializers.ModelSerializer):
    progress = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()

    class Meta:
        model = Batch
        fields = [
            "id",
            "status",
            "source",
            "prefix",
            "engine",
            "options",
            "created_at",
            "finished_at",
            "progress",
            "links",
        ]

    @extend_schema_field(BatchProgressSerializer)
    def get_progress(self, batch: Batch) -> dict:
        p = batches.progress(batch)
        return {
            "items": p.items,
            "expanded": p.expanded,
            "fraction": p.fraction,
            "jobs": p.jobs,
            "pages_in": p.pages_in,
            "pages_done": p.pages_done,
            "pages_failed": p.pages_failed,
            "pages_cancelled": p.pages_cancelled,
            "cpu_seconds": p.cpu_seconds,
            "gpu_seconds": p.gpu_seconds,
        }

    def get_links(self, batch: Batch) -> dict[str, str]:
        request = self.context.get("request")

        def absolute(path: str) -> str:
            return request.build_absolute_uri(path) if request else path

        return {
            "self": absolute(reverse("batch-detail", args=[batch.pk])),
            "manifest": absolute(reverse("batch-manifest", args=[batch.pk])),
        }


class UploadCreateSerializer(serializers.Serializer):
    filename = serializers.CharField(required=False, default="", allow_blank=True, max_length=1000)
    size = serializers.IntegerField(min_value=1, help_text="the document's exact size in bytes")
    content_type = serializers.ChoiceField(choices=sorted(set(CONTENT_TYPES.values())))


class UploadSerializer(serializers.Serializer):
    """A slot for one document: send the bytes as ``method`` says, then POST /api/v1/jobs ``upload=id``."""

    id = serializers.UUIDField()
    method = serializers.ChoiceField(choices=["POST", "PUT"])
    url = serializers.URLField()
    fields = serializers.DictField(child=serializers.CharField(), help_text="POST: form fields before the file")
    headers = serializers.DictField(child=serializers.CharField(), help_text="PUT: headers to send")
    size = serializers.IntegerField()
    content_type = serializers.CharField()
    expires_at = serializers.DateTimeField()


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class ProgressSerializer(serializers.Serializer):
    pages_done = serializers.IntegerField()
    pages_failed = serializers.IntegerField()
    pages_total = serializers.IntegerField()


class CostSerializer(serializers.Serializer):
    cpu_seconds = serializers.FloatField(help_text="worker CPU seconds spent on the job: ingest, its pages, assembly")
    gpu_seconds = serializers.FloatField(
        help_text="estimated VLM GPU seconds of its pages: each request's time × its share of the server"
    )


class JobSerializer(serializers.ModelSerializer):
    progress = serializers.SerializerMethodField()
    cost = serializers.SerializerMethodField()
    cached_from = serializers.UUIDField(
        source="cached_from_id",
        read_only=True,
        allow_null=True,
        help_text="set when the result cache answered this job: the job whose result it shares (no page work)",
    )
    error = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id",
            "status",
            "filename",
            "kind",
            "engine",
            "sha256",
            "size_bytes",
            "attempt",
            "cached_from",
            "progress",
            "cost",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "purged_at",
            "links",
        ]

    @extend_schema_field(CostSerializer)
    def get_cost(self, job: Job) -> dict:
        pages_ms = getattr(job, "pages_cpu_ms", None)
        gpu_ms = getattr(job, "pages_gpu_ms", None)
        if pages_ms is None or gpu_ms is None:
            sums = job.pages.aggregate(cpu=Sum("cpu_ms"), gpu=Sum("gpu_ms"))
            pages_ms, gpu_ms = sums["cpu"], sums["gpu"]
        return {
            "cpu_seconds": round((job.cpu_ms + (pages_ms or 0)) / 1000, 3),
            "gpu_seconds": round((gpu_ms or 0) / 1000, 3),
        }

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, job: Job) -> dict:
        return {"pages_done": job.pages_done, "pages_failed": job.pages_failed, "pages_total": job.page_count}

    @extend_schema_field(ErrorSerializer(allow_null=True))
    def get_error(self, job: Job) -> dict | None:
        if not job.error_code:
            return None
        return {"code": job.error_code, "message": job.error_message}

    def get_links(self, job: Job) -> dict[str, str]:
        request = self.context.get("request")
        url = reverse("job-detail", args=[job.pk])
        result = reverse("job-result", args=[job.pk])

        def absolute(path: str) -> str:
            return request.build_absolute_uri(path) if request else path

        return {
            "self": absolute(url),
            "markdown": absolute(f"{result}?format=markdown"),
            "json": absolute(f"{result}?format=json"),
        }
