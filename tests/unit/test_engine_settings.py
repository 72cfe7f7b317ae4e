"""The engine recipe's settings step: each engine builds its own config from the deployment's
settings (a ``from_settings`` next to the engine), so adding one touches neither ``EngineSettings``
nor ``workers.engine_setup``; and what it reads must be a declared setting (the setting recipe:
``ocrsite/settings.py`` and its ``HELP`` line, tests/unit/test_configuration.py)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest
from django.conf import settings

import workers.engines
from workers import engine_setup
from workers.engines import registry
from workers.engines.cpu.settings import layout_from_settings, recognizer_from_settings
from workers.engines.paddle import PaddleLayoutConfig
from workers.engines.settings import DeploymentSettings
from workers.engines.vllm import VllmConfig


def _builders():
    """Every ``from_settings`` / ``*_from_settings`` in workers.engines: module functions and the
    classmethods of the classes each module defines."""
    for info in pkgutil.walk_packages(workers.engines.__path__, "workers.engines."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) and name.endswith("from_settings"):
                yield f"{module.__name__}.{name}", obj
            elif inspect.isclass(obj):
                for attr in dir(obj):
                    if attr.endswith("from_settings") and attr in vars(obj):
                        yield f"{module.__name__}.{name}.{attr}", getattr(obj, attr)


@pytest.fixture
def deployment() -> DeploymentSettings:
    return DeploymentSettings.of(settings, threads=2)


def test_every_engine_config_reads_only_declared_settings(deployment):
    built = {}
    for name, build in _builders():
        built[name] = build(deployment)  # a KeyError names a setting nobody declared
    assert len(built) >= 6, sorted(built)  # cpu layout + recogniser, paddle, vllm region + page, mixed


def test_a_setting_never_declared_is_refused_by_name(deployment):
    with pytest.raises(KeyError, match="OCR_TOY_MODEL"):
        deployment.pick(model="OCR_TOY_MODEL")
    assert DeploymentSettings().pick(model="OCR_TOY_MODEL") == {}, "no deployment: the config's defaults"


def test_engine_configs_carry_the_deployments_settings(deployment):
    vllm = VllmConfig.from_settings(deployment)
    assert (vllm.base_url, vllm.profile, vllm.retries) == (
        settings.VLLM_BASE_URL,
        settings.VLLM_PROFILE,
        settings.VLLM_RETRIES,
    )
    page = VllmConfig.page_from_settings(deployment)
    assert (page.profile, page.base_url) == (
        settings.VLLM_PAGE_PROFILE,
        settings.VLLM_PAGE_BASE_URL or settings.VLLM_BASE_URL,
    )
    assert PaddleLayoutConfig.from_settings(deployment).batch_size == settings.OCR_PADDLE_BATCH
    assert layout_from_settings(deployment).threads == 2
    cpu = recognizer_from_settings(deployment)
    assert (cpu.threads, cpu.det_max_side, cpu.det_memory_patterns) == (2, settings.OCR_DET_MAX_SIDE, True)
    assert cpu.model_cache_dir == str(settings.OCR_MODEL_CACHE_DIR)


def test_the_deployment_names_no_engine():
    """EngineSettings is the parts and the settings: a new engine adds no field to it."""
    assert [f.name for f in dataclasses.fields(registry.EngineSettings)] == ["layout", "recognizer", "settings"]
    engine_setup.deployment.cache_clear()
    try:
        frozen = engine_setup.deployment()
        assert frozen.settings.get("OCR_CPU_PROFILE") == settings.OCR_CPU_PROFILE
        hash(frozen)  # it keys the per-process engine caches
    finally:
        engine_setup.deployment.cache_clear()
