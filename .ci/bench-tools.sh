#!/usr/bin/env bash
# The command-line tools `make bench` needs beyond the venv: wrk (the ingest benchmark's load generator, C, so the
# load costs the shared cores little) and tesseract (the cpu-engine benchmark's reference). On Debian/Ubuntu as
# root they are installed through apt when missing; elsewhere this says what to install.
set -euo pipefail

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v tesseract >/dev/null || missing+=(tesseract-ocr tesseract-ocr-eng)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "bench-tools: installing ${missing[*]} (apt)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") \
    >/tmp/ocr-bench-tools-apt.log 2>&1 \
    || { echo "bench-tools: apt-get install ${missing[*]} failed (see /tmp/ocr-bench-tools-apt.log)" >&2; exit 1; }
else
  echo "bench-tools: ${missing[*]} missing and not root on an apt system: install them (apt-get install ${missing[*]})" >&2
  exit 1
fi
