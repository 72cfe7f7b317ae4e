"""Tracing is off unless the standard OTEL_* variables name an OTLP endpoint."""

from __future__ import annotations

from ocrsite import telemetry


def test_off_unless_an_endpoint_is_named():
    assert not telemetry.enabled({})
    assert telemetry.enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert telemetry.enabled({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert not telemetry.enabled({**on, "OTEL_SDK_DISABLED": "true"})
    assert not telemetry.enabled({**on, "OTEL_TRACES_EXPORTER": "none"})


def test_unconfigured_spans_are_no_ops_and_give_no_trace_context():
    with telemetry.job_span("ingest", job_id="j", tenant="t"):
        assert telemetry.current_traceparent() == ""
