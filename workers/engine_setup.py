"""The deployment's engine configuration, read from Django settings once per worker process.

Engines never read Django's settings themselves (they import no Django): this module freezes
them into ``EngineSettings`` (``DeploymentSettings``, which each engine's ``from_settings`` reads)
and resolves each job's ``engine`` choice to the engines it runs.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from celery import concurrency
from celery.concurrency import prefork
from celery.signals import worker_init
from django.conf import settings

from ocrsite.memory import memory_first
from workers import drain
from workers.engines import registry, textlayer
from workers.engines.base import LayoutEngine, Recognizer
from workers.engines.cpu import cpu_budget, resolve_threads
from workers.engines.cpu.orientation import OrientationReader
from workers.engines.settings import DeploymentSettings

log = logging.getLogger(__name__)

# How many engine processes share this process's CPU budget: a prefork pool's size, noted when
# the worker starts (worker_init fires in the parent before it forks the pool, so the children
# inherit it). Thread and solo pools share one engine per process: 1. The CLI: 1.
_pool = {"processes": 1}


@worker_init.connect
def _note_pool_size(sender, **_kwargs) -> None:
    forks = concurrency.get_implementation(sender.pool_cls) is prefork.TaskPool
    _pool["processes"] = max(1, int(sender.concurrency or 1)) if forks else 1


def engine_threads() -> int:
    """Intra-op threads per engine in this process: OCR_ENGINE_THREADS, or (0) the CPU budget
    (cores, affinity, container quota) divided among the prefork pool's processes, so a 2-CPU
    pod running two pool processes gives each one thread however many cores its node has."""
    threads = resolve_threads(settings.OCR_ENGINE_THREADS, _pool["processes"])
    if settings.OCR_ENGINE_THREADS <= 0:
        log.info(
            "engine threads: %d per process (CPU budget %d shared by %d pool process(es); OCR_ENGINE_THREADS=0)",
            threads,
            cpu_budget(),  # cached: the figure resolve_threads used
            _pool["processes"],
        )
    return threads


@lru_cache(maxsize=1)
def deployment() -> registry.EngineSettings:
    """The deployment's engine parts and its settings, frozen for this process: each engine reads
    its own options from them (its config's ``from_settings``), so no engine is named here."""
    return registry.EngineSettings(
        layout=settings.OCR_LAYOUT_ENGINE,
        recognizer=settings.OCR_RECOGNIZER,
        settings=DeploymentSettings.of(
            settings, threads=engine_threads(), memory_first=memory_first(), stopping=drain.requested
        ),
    )


@lru_cache(maxsize=8)
def for_job(engine: str) -> registry.EngineSettings:
    """What a job's ``engine`` (``ocrsite.catalogue.JOB_ENGINES``) runs; raises EngineError for an
    unknown one."""
    return deployment().for_job(engine)


def layout_engine(engine: str) -> LayoutEngine:
    return registry.layout_engine(for_job(engine))


def recognizer(engine: str) -> Recognizer:
    return registry.recognizer(for_job(engine))


@lru_cache(maxsize=1)
def orientation_reader() -> OrientationReader:
    """What ingest reads scanned pages with to find which way is up: built once per process, in
    the worker before ingest forks its PDF reader (which then uses the same models)."""
    return OrientationReader(
        model_cache_dir=str(settings.OCR_MODEL_CACHE_DIR),
        other_scripts=settings.OCR_OTHER_SCRIPTS,
        tessdata_dir=settings.OCR_TESSDATA_DIR,
    )


def text_layer() -> textlayer.TextLayerConfig:
    return textlayer.TextLayerConfig(min_chars=settings.OCR_TEXT_LAYER_MIN_CHARS)
