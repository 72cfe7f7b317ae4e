"""Benchmarks: ``make bench`` runs them all; ``make bench BENCH_ARGS="p2"`` runs one.

P1 pipeline overhead, P2 CPU engine vs Tesseract (and ``p2tune``, the knob sweep), P3 text-layer
fast path vs OCR path, P4 ingest under 64 concurrent uploads. Tables go to stdout and JSON to
bench/results/ (git-ignored).
"""
