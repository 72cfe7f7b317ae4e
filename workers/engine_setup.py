"""The deployment's engine configuration, read from Django settings once per worker process.

Engines never read settings themselves (they import no Django): this module freezes the
settings into ``EngineSettings`` and resolves each job's ``engine`` choice to the engines it runs.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from celery import concurrency
from celery.concurrency import prefork
from celery.signals import worker_init
from django.conf import settings

from ocrsite.memory import memory_first
from ocrsite.vocabulary import CpuModel, CpuRuntime
from workers import drain
from workers.engines import registry, textlayer
from workers.engines.base import LayoutEngine, Recognizer
from workers.engines.cpu import CpuLayoutConfig, cpu_budget, profile_config, resolve_threads
from workers.engines.paddle import PaddleLayoutConfig
from workers.engines.vllm import VllmConfig

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
    threads = engine_threads()
    return registry.EngineSettings(
        layout=settings.OCR_LAYOUT_ENGINE,
        recognizer=settings.OCR_RECOGNIZER,
        cpu_layout=CpuLayoutConfig(threads=threads, model_cache_dir=str(settings.OCR_MODEL_CACHE_DIR)),
        cpu_recognizer=profile_config(
            settings.OCR_CPU_PROFILE,
            threads=threads,
            det_max_side=settings.OCR_DET_MAX_SIDE,
            **({"rec_batch": settings.OCR_REC_BATCH} if settings.OCR_REC_BATCH > 0 else {}),
            **({"runtime": CpuRuntime(settings.OCR_CPU_RUNTIME)} if settings.OCR_CPU_RUNTIME else {}),
            **({"det_probe_model": CpuModel(settings.OCR_CPU_PROBE_MODEL)} if settings.OCR_CPU_PROBE_MODEL else {}),
            **({"rec_model": CpuModel(settings.OCR_CPU_REC_MODEL)} if settings.OCR_CPU_REC_MODEL else {}),
            **({"reread_below": settings.OCR_CPU_REREAD_BELOW} if settings.OCR_CPU_REREAD_BELOW >= 0 else {}),
            det_limit_side=settings.OCR_DET_LIMIT_SIDE,
            det_limit_type=settings.OCR_DET_LIMIT_TYPE,
            det_memory_patterns=not memory_first(),
            model_cache_dir=str(settings.OCR_MODEL_CACHE_DIR),
        ),
        paddle=PaddleLayoutConfig(
            model_dir=settings.OCR_PADDLE_MODEL_DIR,
            model=settings.OCR_PADDLE_MODEL,
            device=settings.OCR_PADDLE_DEVICE,
            batch_size=settings.OCR_PADDLE_BATCH,
            threshold=settings.OCR_PADDLE_THRESHOLD,
        ),
        vllm=VllmConfig(
            base_url=settings.VLLM_BASE_URL,
            profile=settings.VLLM_PROFILE,
            model=settings.VLLM_MODEL,
            api_key=settings.VLLM_API_KEY,
            max_in_flight=settings.VLLM_MAX_IN_FLIGHT,
            timeout_s=settings.VLLM_TIMEOUT_S,
            retries=settings.VLLM_RETRIES,
            backoff_s=settings.VLLM_BACKOFF_S,
            max_tokens=settings.VLLM_MAX_TOKENS,
            cancel_poll_s=settings.VLLM_CANCEL_POLL_S,
            overload_deadline_s=settings.VLLM_OVERLOAD_DEADLINE_S,
            global_max_in_flight=settings.VLLM_GLOBAL_MAX_IN_FLIGHT,
            slots_url=settings.CELERY_BROKER_URL,
            stopping=drain.requested,
        ),
        vllm_page_profile=settings.VLLM_PAGE_PROFILE,
        vllm_page_base_url=settings.VLLM_PAGE_BASE_URL,
        vllm_page_model=settings.VLLM_PAGE_MODEL,
        vllm_labels=tuple(settings.OCR_VLLM_LABELS),
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


def text_layer() -> textlayer.TextLayerConfig:
    return textlayer.TextLayerConfig(min_chars=settings.OCR_TEXT_LAYER_MIN_CHARS)
