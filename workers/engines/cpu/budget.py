"""What this process may spend on the CPU: the CPU's vector extensions and its share of cores."""

from __future__ import annotations

import functools
from pathlib import Path

from ocrsite.vocabulary import CpuRuntime


@functools.cache
def this_cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none), read once."""
    try:
        with Path("/proc/cpuinfo").open(encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def auto_runtime(cpu_flags: frozenset[str] | None = None) -> CpuRuntime:
    """OpenVINO where the CPU has AVX-512, onnxruntime elsewhere.

    OpenVINO runs the recognition model markedly cheaper than onnxruntime where it can use AVX-512
    and about the same on AVX2 only, and it holds more memory, so it is chosen only where it pays
    (the bench report has the figures per CPU). Most of that saving is precision: on a CPU with
    bfloat16 (avx512_bf16, AMX) OpenVINO infers in bf16 by default, which moves the readings a
    little; at f32 it cost what onnxruntime does (docs/benchmarks.md, "accurate with the Latin
    head"). Neither profile asks for it: ``auto`` is an explicit choice.

    Flags come from /proc/cpuinfo; elsewhere (macOS, Windows, ARM) onnxruntime, the smaller
    footprint.
    """
    flags = cpu_flags if cpu_flags is not None else this_cpu_flags()
    return CpuRuntime.OPENVINO if "avx512f" in flags else CpuRuntime.ONNXRUNTIME


@functools.cache
def cpu_budget() -> int:
    """CPUs this process may keep busy: its physical cores, capped by its affinity mask and by its
    cgroup's CPU quota (a container's CPU limit), at least 1; joblib (loky) reads all three. Read
    once per process (forked pool children share their parent's cgroup).

    onnxruntime's own default reads the node's cores only, so a 2-CPU pod on an 8-core node would
    run 4 threads per process (times the pool size) against its quota (bench report: more CPU per
    page, not less).
    """
    import joblib

    return max(1, joblib.cpu_count(only_physical_cores=True))


def resolve_threads(threads: int, processes: int = 1) -> int:
    """Intra-op threads for one engine: ``threads`` when set (> 0), else this process's share of
    the CPU budget among the ``processes`` that share it (a prefork pool's size), at least 1."""
    return threads if threads > 0 else max(1, cpu_budget() // max(1, processes))


def ort_engine_cfg(threads: int) -> dict:
    """rapid-layout's onnxruntime settings for ``threads`` (0: this process's budget)."""
    return {"intra_op_num_threads": resolve_threads(threads), "inter_op_num_threads": 1}
