from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.jobs.documents import CONTENT_TYPES
from apps.jobs.models import Job
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


class JobSerializer(serializers.ModelSerializer):
    progress = serializers.SerializerMethodField()
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
            "progress",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "purged_at",
            "links",
        ]

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
