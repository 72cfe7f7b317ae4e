#!/bin/sh
# Entry point of the vllm image: `vllm serve` with the arguments of VLLM_PROFILE (profiles.py) for
# a VLLM_GPU_GB card; VLLM_MODEL_PATH serves local weights (the shared model volume) under the
# profile's model name. Extra arguments are appended. exec: vLLM gets SIGTERM directly.
set -eu
args=$(python3 /opt/ocr/profiles.py serve-args "${VLLM_PROFILE:?set VLLM_PROFILE}" --gpu-gb "${VLLM_GPU_GB:-80}")
old_ifs=$IFS
IFS='
'
# shellcheck disable=SC2086  # one argument per line, none contains a newline
set -- $args "$@"
IFS=$old_ifs
model=$1
shift
# VLLM_HOST: 0.0.0.0 in a pod (its own network namespace; NetworkPolicy guards it), 127.0.0.1 on a
# host network (compose). The API key comes from VLLM_API_KEY, which vLLM reads itself.
exec vllm serve "${VLLM_MODEL_PATH:-$model}" --host "${VLLM_HOST:-127.0.0.1}" --port "${VLLM_PORT:-8000}" "$@"
