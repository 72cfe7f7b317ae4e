"""The result cache's key: what changes a result changes the key, and nothing else does."""

from __future__ import annotations

from apps.jobs.services import result_cache

DOC = "ab" * 32


def key(**kw) -> str:
    args = {"sha256": DOC, "page_count": 3, "engine": "cpu", "options": {"ocr": "auto"}} | kw
    return result_cache.key_for(**args)


def test_page_selection_keys_by_the_pages_it_names():
    assert key(options={"pages": "1-3"}) == key(options={"pages": "1,2,3"}) == key(options={})
    assert key(options={"pages": "1-2"}) != key()


def test_output_options_change_the_key_and_delivery_options_do_not():
    assert key(options={"ocr": "force"}) != key()
    assert key(options={"ocr": "auto", "callback_url": "https://example.com/hook"}) == key()


def test_engine_settings_model_versions_and_the_label_change_the_key(settings, monkeypatch):
    base = key()
    assert key(sha256="cd" * 32) != base
    assert key(engine="gpu") != base
    settings.OCR_CPU_REC_MODEL = "small" if settings.OCR_CPU_REC_MODEL != "small" else "tiny"
    assert key() != base
    settings.OCR_CPU_REC_MODEL = result_cache.engine_fingerprint("cpu")["settings"]["OCR_CPU_REC_MODEL"]
    changed = key()
    monkeypatch.setattr(result_cache, "package_version", lambda name: "99.0" if name == "rapidocr" else "")
    assert key() != changed  # a new wheel: new model files
    monkeypatch.undo()
    settings.OCR_RESULT_CACHE_VERSION = "swapped-vlm"
    assert key() != changed
    # Speed settings are not in the key.
    settings.OCR_RESULT_CACHE_VERSION = ""
    settings.OCR_ENGINE_THREADS = 7
    assert key() == changed


def test_the_deployment_engine_resolves_through_the_catalogue(settings):
    settings.OCR_RECOGNIZER = "vllm"
    settings.OCR_LAYOUT_ENGINE = "paddle"
    assert result_cache.engine_parts("cpu") == ["layout:paddle", "recognizer:vllm"]
    assert result_cache.engine_parts("vlm-page") == ["recognizer:vlm-page"]
    assert "VLLM_MODEL" in result_cache.engine_fingerprint("cpu")["settings"]
