"""Fuzzing the door: schemathesis against /api/schema/ for the job endpoints (no 5xx, whatever
arrives), and hypothesis properties of the type sniffer and the probe (only InputError, bounded
time) on random bytes and on mutated real files.
"""

from __future__ import annotations

import io
import time
import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.transport.serialization import Binary

from apps.api.errors import status_of
from apps.jobs.documents import KINDS, InputError, probe, sniff
from ocrsite.wsgi import application
from tests.hostile.corpus import text_jpeg, text_pdf, text_png
from tests.support.perimeter import new_key, queues_held

# --- schemathesis: the REST API in-process through its WSGI application ---------------------------


# Generated cases per operation. A count, not a time budget: every operation is exercised the
# same number of times on every machine (derandomized, so the same cases), however loaded.
EXAMPLES_PER_OPERATION = 25


@pytest.fixture
def django_settings(settings):
    """pytest-django's ``settings``, renamed: hypothesis' ``settings`` decorator is used here too."""
    return settings


@pytest.mark.django_db(transaction=True)
def test_job_endpoints_never_answer_5xx(django_settings, redis_client):
    """Every job operation in /api/schema/, called in-process through the WSGI application with a
    valid key, on schemathesis-generated paths, queries and multipart bodies: never a 5xx.

    (Driven operation by operation with hypothesis rather than schemathesis' pytest plugin, whose
    lazy-fixture support does not run under this pytest version.)
    """
    django_settings.OCR_RATE_SUBMISSIONS = ""  # unthrottled, so generated bodies reach the probe
    _, raw = new_key(f"fuzz-{uuid.uuid4().hex[:8]}")
    headers = {"X-API-Key": raw}
    loaded = schemathesis.openapi.from_wsgi("/api/schema/", application, headers=headers)
    schema = loaded.include(path_regex=r"^/(api/v1/jobs|process|status)")
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {f"{op.method.upper()} {op.path.rstrip('/')}" for op in operations}
    assert {
        "POST /api/v1/jobs",
        "GET /api/v1/jobs/{id}",
        "DELETE /api/v1/jobs/{id}",
        "GET /api/v1/jobs/{id}/result",
        "POST /process",
        "GET /status/{task_id}",
    } <= labels, labels
    calls: dict[int, int] = {}
    per_operation: dict[str, int] = {}

    with queues_held(redis_client):  # accepted uploads wait in Redis; no worker runs them now
        for operation in operations:
            label = f"{operation.method.upper()} {operation.path}"
            per_operation[label] = _fuzz_operation(operation, headers, calls)
    # Every operation really was called, several times: none can be skipped silently.
    assert min(per_operation.values()) >= EXAMPLES_PER_OPERATION // 2, per_operation
    assert calls.get(415, 0) + calls.get(422, 0) > 0, f"no generated upload reached the probe: {calls}"
    assert not any(code >= 500 for code in calls), calls


def _fuzz_operation(operation, headers: dict[str, str], calls: dict[int, int]) -> int:
    """EXAMPLES_PER_OPERATION generated cases of one operation, each called with the valid key;
    no 5xx. Returns how many calls were made."""
    made = 0

    # Only the "too slow" health check is off: generating multipart bodies on a shared 2-core box
    # is slow, and that is not a fault of the API. The others (filtering too much, data too
    # large, ...) would mean the strategy is broken, and fail the test.
    @given(case=operation.as_strategy(), payload=st.one_of(st.binary(max_size=2048), mutated()))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    def fuzz(case, payload: bytes) -> None:
        nonlocal made
        made += 1
        if isinstance(case.body, dict) and operation.method.upper() == "POST" and len(payload) % 2:
            # Half the time, instead of schemathesis' own body, hostile bytes (random, or a real
            # document damaged) as the file, so the probe behind the API is fuzzed too. The body
            # then names no direct upload nor page selection: `file` is optional since a job may
            # come from an upload id, and generated bodies mostly broke the one-of rule or the
            # page syntax (400) before any bytes reached the probe.
            case.body["file"] = Binary(payload)
            case.body.pop("upload", None)
            case.body.pop("pages", None)
        response = case.call(headers=headers)
        calls[response.status_code] = calls.get(response.status_code, 0) + 1
        case.validate_response(response, checks=[not_a_server_error])

    fuzz()
    return made


# --- hypothesis: sniff and probe --------------------------------------------------------------------

SEEDS: list[bytes] = []


def _seeds() -> list[bytes]:
    if not SEEDS:
        from PIL import Image

        def save(fmt: str, **kw) -> bytes:
            buf = io.BytesIO()
            Image.open(io.BytesIO(text_png("FUZZ", (64, 32)))).convert("RGB").save(buf, fmt, **kw)
            return buf.getvalue()

        SEEDS.extend(
            [
                text_pdf("fuzz", pages=2),
                text_png("FUZZ", (64, 32)),
                text_jpeg(),
                save("TIFF"),
                save("BMP"),
                save("WEBP"),
            ]
        )
    return SEEDS


@st.composite
def mutated(draw) -> bytes:
    """A real file of each kind with bytes flipped, cut, or spliced in: the shapes that reach
    parsers deepest (a valid header in front of damage)."""
    data = bytearray(draw(st.sampled_from(_seeds())))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "cut", "splice", "dup"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[at:]
        elif op == "splice":
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
        else:
            end = min(len(data), at + draw(st.integers(1, 512)))
            data[at:at] = data[at:end]
    return bytes(data)


@given(st.binary(max_size=2048))
@settings(max_examples=300, deadline=None, database=None)
def test_sniff_is_total(head):
    assert sniff(head) in (*KINDS, None)


@given(st.one_of(st.binary(max_size=2048), mutated()))
@settings(max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_probe_raises_only_input_errors_and_returns_quickly(data):
    # CPU time of this process, not wall-clock: other work on a shared machine does not inflate
    # it, while a parser spinning on a hostile file does.
    started = time.process_time()
    try:
        found = probe(io.BytesIO(data), max_pages=5, max_pixels=4_000_000)
    except InputError as exc:
        assert exc.code.startswith("input:") and 400 <= status_of(exc.code) < 500
    else:
        assert found.kind in KINDS and 1 <= found.page_count <= 5
    # "Never hangs": every input is decided within a bounded amount of work.
    assert time.process_time() - started < 5
