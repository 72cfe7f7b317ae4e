#!/usr/bin/env bash
# Per-image locks: requirements/lock/app.txt (web, cpu and ocr workers, beat, flower) from
# requirements/base.txt, and requirements/lock/layout-gpu.txt from requirements/gpu.txt with the
# overrides in requirements/gpu-overrides.txt. Resolved by uv for the images' platform (Linux x86_64,
# glibc 2.36 = Debian bookworm, CPython 3.11), whatever machine runs this.
#   .ci/locks.sh          rewrite the locks (`make locks`): pins kept while they still satisfy the inputs
#   .ci/locks.sh --upgrade  rewrite them with every newest version that resolves
#   .ci/locks.sh --check  resolve again and fail if a set no longer resolves or a lock is stale (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-.venv/bin/uv}
[ -x "$UV" ] || { echo "locks: $UV not found (make venv installs uv from requirements/dev.txt)" >&2; exit 1; }
out=requirements/lock
upgrade=()
[ "${1:-}" = "--upgrade" ] && upgrade=(--upgrade)
if [ "${1:-}" = "--check" ]; then
  # Start from the committed locks: uv keeps a pinned version while it still satisfies the inputs,
  # so the check fails on an input change the locks do not follow, not on a new upstream release.
  out=$(mktemp -d)
  cp requirements/lock/app.txt requirements/lock/layout-gpu.txt "$out/"
fi
compile() {  # input output [uv args...]
  local input=$1 output=$2; shift 2
  "$UV" pip compile --quiet "$input" "$@" --python-version 3.11 --python-platform x86_64-manylinux_2_36 \
    --annotation-style line --custom-compile-command "make locks" "${upgrade[@]}" -o "$output"
}
compile requirements/base.txt "$out/app.txt"
compile requirements/gpu.txt "$out/layout-gpu.txt" --override requirements/gpu-overrides.txt
if [ "$out" != requirements/lock ]; then
  for f in app.txt layout-gpu.txt; do
    diff -u "requirements/lock/$f" "$out/$f" || { echo "locks: requirements/lock/$f is stale: run make locks" >&2; exit 1; }
  done
  # A resolver cannot see this one: two opencv distributions writing the same cv2 folder.
  if grep -q '^opencv-python' "$out/layout-gpu.txt"; then
    echo "locks: the layout-gpu set has opencv-python(-headless) next to paddlex's opencv-contrib-python" >&2; exit 1
  fi
  echo "locks: both image sets resolve and the locks are current" >&2
  rm -rf "$out"
fi
