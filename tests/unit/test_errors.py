"""One status table: every code the door can refuse with has its status in ``apps/api/errors.py``,
the handler answers a domain refusal (``InputError``) with it, and nothing else in the platform
writes an HTTP status number."""

from __future__ import annotations

import ast
from pathlib import Path

from apps.api import errors, handlers
from apps.jobs.documents import InputError
from ocrsite.vocabulary import ErrorCode

ROOT = Path(__file__).resolve().parents[2]
SERVER_CODE = [p for d in ("apps", "ocrsite") for p in (ROOT / d).rglob("*.py") if "migrations" not in p.parts]
TABLE = ROOT / "apps" / "api" / "errors.py"


def _calls(name: str):
    for path in SERVER_CODE:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
                yield path, node


def test_every_code_raised_as_a_refusal_has_its_status():
    raised = set()
    for name in ("ApiError", "InputError", "IdempotencyConflict"):
        for _path, call in _calls(name):
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Attribute) and getattr(first.value, "id", "") == "ErrorCode":
                raised.add(ErrorCode[first.attr])
    assert ErrorCode.INPUT_ENCRYPTED in raised and ErrorCode.JOB_NOT_READY in raised  # the scan sees both kinds
    missing = sorted(code for code in raised if code not in errors.STATUS)
    assert not missing, f"codes raised with no status in apps/api/errors.py STATUS: {missing}"


def test_an_input_error_is_answered_with_its_codes_status_in_the_one_shape():
    for code, status in ((ErrorCode.INPUT_ENCRYPTED, 422), (ErrorCode.UPLOAD_EXPIRED, 410)):
        response = handlers.exception_handler(InputError(code, "why"), {})
        assert response.status_code == status == errors.STATUS[code]
        assert response.data == {"error": {"code": str(code), "message": "why"}}


def test_no_http_status_number_outside_the_table():
    """``status=404``, ``ApiError(409, …)``, ``HttpResponse(status=200)``: a view or service that
    picks a number bypasses the table. Named success statuses (``status.HTTP_202_ACCEPTED``) are
    what a view may say about its own answer."""
    found = []
    for path in SERVER_CODE:
        if path == TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            values = [kw.value for kw in node.keywords if kw.arg in ("status", "status_code")]
            values += node.args[:1] if getattr(node.func, "id", "") == "ApiError" else []
            numbers = [v for v in values if isinstance(v, ast.Constant) and isinstance(v.value, int)]
            found += [f"{path.relative_to(ROOT)}:{v.lineno}" for v in numbers]
    assert not found, found


def test_drf_refusals_have_the_status_the_table_gives_their_code():
    for cls, code in errors.DRF_CODES.items():
        assert cls.status_code == errors.STATUS[code], (cls.__name__, code)
