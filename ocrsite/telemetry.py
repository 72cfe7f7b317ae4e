"""Tracing: one trace per job, exported over OTLP when the standard OTEL_* variables ask for it.

Off unless an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and neither OTEL_SDK_DISABLED=true nor
OTEL_TRACES_EXPORTER=none says otherwise: then no provider is installed, the API's no-op tracer
answers every span below, and nothing is sent anywhere. Everything else (service name, headers,
protocol details, sampling) is the SDK's own reading of OTEL_*.

When on, the official instrumentations trace Django requests, Celery publish/run (context rides
the message headers), httpx (the vLLM client's requests), psycopg and Redis. A job's stages run
in many processes, after queues and the layout collector's merged passes, where a message's
context is not one job's; so the job keeps its own trace context (``Job.traceparent``, set at
creation) and every stage span (ingest, each page's layout and recognition, assembly) is started
as a child of it: one trace per job, whatever path its messages took.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

_PROPAGATOR = TraceContextTextMapPropagator()
_TRACER = "ocr-platform"
_configured: dict[str, bool] = {}


def enabled(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() in ("none", ""):
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure(role: str) -> bool:
    """Install the tracer provider and the instrumentations once per process, if ``enabled()``.
    ``role`` names the process in service.name unless OTEL_SERVICE_NAME does."""
    if _configured.get("done") or not enabled():
        return False
    # Imported only when tracing is on: a deployment without it loads none of the SDK.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or f"ocr-{role}"
    resource = Resource.create({"service.name": name}).merge(OTELResourceDetector().detect())
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    DjangoInstrumentor().instrument()
    CeleryInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()
    PsycopgInstrumentor().instrument(enable_commenter=False)
    RedisInstrumentor().instrument()
    _configured["done"] = True
    log.info("tracing on: spans exported over OTLP as %s", name)
    return True


def shutdown() -> None:
    """Flush what is buffered (a worker child's last spans before it exits)."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "shutdown"):
        provider.shutdown()


def current_traceparent() -> str:
    """The W3C traceparent of the span in progress ("" when none is recording)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent", "")


@contextmanager
def job_span(name: str, *, job_id=None, tenant: str = "", traceparent: str = "", **attributes) -> Iterator[None]:
    """A span for one step of a job, a child of the job's own trace context when it has one."""
    parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
    token = context.attach(parent) if parent is not None else None
    try:
        attrs = {"ocr.job_id": str(job_id) if job_id else "", "ocr.tenant": tenant}
        attrs.update({f"ocr.{k}": v for k, v in attributes.items() if v is not None})
        with trace.get_tracer(_TRACER).start_as_current_span(name, attributes=attrs):
            yield
    finally:
        if token is not None:
            context.detach(token)


@contextmanager
def new_trace(name: str, **attributes) -> Iterator[None]:
    """A root span: a batch's item starts its own job trace, not a branch of the expansion's."""
    with trace.get_tracer(_TRACER).start_as_current_span(
        name, context=context.Context(), attributes={f"ocr.{k}": v for k, v in attributes.items()}
    ):
        yield
