"""Benchmarks: ``make bench`` runs them all; ``make bench BENCH_ARGS="cpu-engine"`` runs one.

``pipeline`` (overhead of REST + Celery + Redis), ``cpu-engine`` (the CPU engine vs Tesseract; and
``cpu-knobs``, the knob sweep), ``memory`` (peak and growth of the embedded CLI and a worker),
``text-layer`` (fast path vs OCR path), ``ingest`` (64 concurrent uploads). Tables go to stdout and JSON to
bench/results/ (git-ignored).
"""
