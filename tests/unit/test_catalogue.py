"""The engine catalogue (``ocrsite.catalogue``) is the one place an engine is added.

Pure tests: no database, broker or worker. The toy engine below is registered through the
catalogue's tables only, and the registry must then resolve and build it for a job that asks for
it, exactly as it builds the real ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from django.conf import settings

from apps.jobs.models import Job
from ocrsite import catalogue
from workers.engines import profiles, registry
from workers.engines.base import EngineError, LayoutBox, Recognition, RegionText

# --- a toy engine: its adapter module is this one ----------------------------------------------


class ToyLayout:
    """One region over the whole page."""

    name = "toy-layout"

    def detect(self, images: Sequence[np.ndarray]) -> list[list[LayoutBox]]:
        return [[LayoutBox("text", (0.0, 0.0, float(im.shape[1]), float(im.shape[0])))] for im in images]


class ToyRecognizer:
    """Reads every region as the size of the page it lies on."""

    name = "toy-recognizer"

    def recognize(self, image, regions, *, cancelled=None) -> Recognition:
        return Recognition([RegionText(f"{image.shape[1]}x{image.shape[0]}") for _ in regions])


def build_toy_layout(config: registry.EngineSettings) -> ToyLayout:
    return ToyLayout()


def build_toy_recognizer(config: registry.EngineSettings) -> ToyRecognizer:
    return ToyRecognizer()


@pytest.fixture
def toy_in_catalogue(monkeypatch):
    monkeypatch.setitem(catalogue.LAYOUTS, "toy", catalogue.Part(f"{__name__}:build_toy_layout", "a toy"))
    monkeypatch.setitem(catalogue.RECOGNIZERS, "toy", catalogue.Part(f"{__name__}:build_toy_recognizer", "a toy"))
    monkeypatch.setitem(catalogue.JOB_ENGINES, "toy", catalogue.JobEngine("toy", "toy", "Toy"))


def test_an_engine_added_to_the_catalogue_alone_is_resolved_and_built_for_its_jobs(toy_in_catalogue):
    deployment = registry.EngineSettings()  # the built-in defaults: cpu layout + cpu recogniser
    config = deployment.for_job("toy")
    assert (config.layout, config.recognizer, config.needs_layout) == ("toy", "toy", True)
    layout = registry.layout_engine(config)
    recognizer = registry.recognizer(config)
    assert isinstance(layout, ToyLayout) and isinstance(recognizer, ToyRecognizer)
    assert registry.layout_engine(config) is layout, "built once per process and config"
    page = np.zeros((30, 20, 3), dtype=np.uint8)
    [boxes] = layout.detect([page])
    assert recognizer.recognize(page, boxes).texts[0].text == "20x30"
    assert "toy" in catalogue.job_engine_choices() and "toy" in catalogue.layout_choices()
    assert "toy" in catalogue.recognizer_choices()


def test_a_deployment_may_make_a_catalogue_engine_its_default(toy_in_catalogue):
    deployment = registry.EngineSettings(layout="toy", recognizer="toy")
    assert deployment.for_job(catalogue.DEFAULT_JOB_ENGINE) == deployment
    assert isinstance(registry.layout_engine(deployment.for_job("cpu")), ToyLayout)


def test_job_engines_resolve_as_the_catalogue_says():
    deployment = registry.EngineSettings(layout="cpu", recognizer="vllm")
    assert deployment.for_job("cpu") == deployment, "cpu is the deployment's default, whatever it runs"
    gpu = deployment.for_job("gpu")
    assert (gpu.layout, gpu.recognizer) == ("paddle", "vllm")
    page = deployment.for_job("vlm-page")
    assert (page.layout, page.recognizer, page.needs_layout) == (None, "vlm-page", False)
    with pytest.raises(EngineError) as info:
        deployment.for_job("tpu")
    assert info.value.code == "engine:unknown" and info.value.permanent
    assert ", ".join(catalogue.JOB_ENGINES) in info.value.message


def test_a_part_missing_from_the_catalogue_is_a_permanent_configuration_error():
    with pytest.raises(EngineError) as info:
        registry.layout_engine(registry.EngineSettings(layout="nope"))
    assert info.value.code == "engine:unavailable" and info.value.permanent
    assert "OCR_LAYOUT_ENGINE" in info.value.message and ", ".join(catalogue.LAYOUTS) in info.value.message
    with pytest.raises(EngineError) as info:
        registry.recognizer(registry.EngineSettings(recognizer="nope"))
    assert "OCR_RECOGNIZER" in info.value.message and ", ".join(catalogue.recognizer_choices()) in info.value.message


def test_settings_and_the_job_model_take_their_choices_from_the_catalogue():
    # Read from the catalogue, not pinned here: the engine recipe adds a line there and nothing else.
    assert list(catalogue.job_engine_choices()) == list(catalogue.JOB_ENGINES)
    assert {"cpu", "gpu", "vlm-page"} <= set(catalogue.JOB_ENGINES)
    assert not Job._meta.get_field("engine").choices, "a new job engine must not need a migration"
    assert Job._meta.get_field("engine").default == catalogue.DEFAULT_JOB_ENGINE == settings.OCR_ENGINE
    # A page recogniser runs without layout, so a deployment cannot pair it with one.
    assert {"cpu", "vllm"} <= set(catalogue.recognizer_choices()) and "vlm-page" not in catalogue.recognizer_choices()
    assert catalogue.layout_choices() == tuple(catalogue.LAYOUTS) and {"cpu", "paddle"} <= set(catalogue.LAYOUTS)
    assert settings.VLLM_PROFILE in catalogue.vlm_profiles("vllm")
    assert "deepseek-ocr" in catalogue.vlm_profiles("vlm-page")


def test_every_vlm_profile_is_in_the_catalogue_with_the_mode_its_recogniser_drives():
    assert set(profiles.PROFILES) == set(catalogue.VLM_PROFILES)
    for name, served_by in catalogue.VLM_PROFILES.items():
        assert served_by in catalogue.RECOGNIZERS
        assert profiles.get(name)["mode"] == ("page" if served_by == "vlm-page" else "region"), name


def test_every_job_engine_runs_parts_the_catalogue_has_and_every_adapter_is_a_function():
    """A JOB_ENGINES line naming a part nobody added (or an adapter path that does not import)
    would fail only when a job asked for it, in a worker."""
    for name, choice in catalogue.JOB_ENGINES.items():
        assert choice.layout in (None, catalogue.DEPLOYMENT, *catalogue.LAYOUTS), name
        assert choice.recognizer in (catalogue.DEPLOYMENT, *catalogue.RECOGNIZERS), name
    for part in (*catalogue.LAYOUTS.values(), *catalogue.RECOGNIZERS.values()):
        assert callable(registry._adapter(part.adapter)), part.adapter
