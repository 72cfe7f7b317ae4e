#!/usr/bin/env bash
# Arize Phoenix in .venv-phoenix (requirements/phoenix.txt, locked): the real trace collector that
# tests/test_tracing.py sends one job's trace to (about a minute and 0.9 GB, once). The test runs
# this itself when the venv is missing; without PyPI it skips and says why.
# `.ci/phoenix.sh --relock` reinstalls without the lock and rewrites it.
set -euo pipefail
cd "$(dirname "$0")/.."
relock=0
[ "${1:-}" = "--relock" ] && relock=1
. .ci/venv.sh
venv .venv-phoenix phoenix
