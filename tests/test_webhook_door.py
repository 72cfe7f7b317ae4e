"""A callback_url the deployment's egress cannot reach is refused at the door with a stable code,
instead of being accepted, retried for hours and failed. The cluster lets pods out on 443 only
(k8s/base/networkpolicy.yaml, app-egress; tests/test_k8s.py checks the ConfigMap's
OCR_WEBHOOK_SCHEMES / OCR_WEBHOOK_PORTS against it); compose delivers anywhere, so by default
nothing is refused."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.support.documents import ROOT
from tests.support.jobs_api import upload

DOC = ROOT / "tests" / "data" / "phototest.tif"
CLUSTER = {"OCR_WEBHOOK_SCHEMES": ["https"], "OCR_WEBHOOK_PORTS": [443]}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url, why",
    [("http://hooks.example.com/ocr", "uses http"), ("https://hooks.example.com:8443/ocr", "port 8443")],
)
def test_the_cluster_refuses_a_callback_it_cannot_deliver(api, url, why):
    with override_settings(**CLUSTER):
        resp = upload(api, DOC, callback_url=url)
    assert resp.status_code == 400, resp.content
    error = resp.json()["error"]
    assert error["code"] == "webhook:undeliverable" and why in error["message"]


@pytest.mark.django_db
def test_the_cluster_accepts_https_on_443_and_compose_accepts_http(api):
    with override_settings(**CLUSTER):
        assert upload(api, DOC, callback_url="https://hooks.example.com/ocr").status_code == 202
    assert upload(api, DOC, callback_url="http://hooks.example.com:8080/ocr").status_code == 202
