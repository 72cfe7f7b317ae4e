"""Client, CLI and MCP servers for the OCR platform. Nothing here imports Django."""

from ocrclient.client import AsyncClient, Client, RetryPolicy
from ocrclient.errors import (
    ApiError,
    AuthError,
    Busy,
    InputRejected,
    JobFailed,
    JobNotCancellable,
    JobNotFound,
    JobNotReady,
    OcrError,
    RateLimited,
    RequestInvalid,
    ResultPurged,
    ServerError,
    WaitTimeout,
)
from ocrclient.models import Document, Job, JobError, Page, Progress, Region
from ocrclient.webhooks import WebhookVerificationError, verify_webhook

__all__ = [
    "ApiError",
    "AsyncClient",
    "AuthError",
    "Busy",
    "Client",
    "Document",
    "InputRejected",
    "Job",
    "JobError",
    "JobFailed",
    "JobNotCancellable",
    "JobNotFound",
    "JobNotReady",
    "OcrError",
    "Page",
    "Progress",
    "RateLimited",
    "Region",
    "RequestInvalid",
    "ResultPurged",
    "RetryPolicy",
    "ServerError",
    "WaitTimeout",
    "WebhookVerificationError",
    "verify_webhook",
]
