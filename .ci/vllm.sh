#!/usr/bin/env bash
# Opt-in (`make test-vllm`): the vllm recognizer against a REAL vLLM OpenAI server, the CPU build
# serving a tiny random Qwen2-VL (../shared/vllm-cpu/README.md). Text is random: the tests assert
# protocol, completion through the ocr queue, concurrency and vLLM's own /metrics.
# Heavy: setup ~2 min and ~3.5 GB once (kept in $VLLM_CPU_DIR), serving ~3 GB RAM.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${VLLM_CPU_SHARED:-$(cd .. && pwd)/shared/vllm-cpu}
DIR=${VLLM_CPU_DIR:-$PWD/var/vllm-cpu}
PORT=${VLLM_PORT:-8765}
LOG=${VLLM_LOG:-$PWD/var/vllm-serve.log}
mkdir -p "$(dirname "$LOG")"

if [ ! -x "$DIR/venv/bin/python" ] || [ ! -f "$DIR/tiny-vlm/config.json" ]; then
  [ -f "$SHARED/setup.sh" ] || { echo "vllm: $SHARED/setup.sh not found (set VLLM_CPU_SHARED)" >&2; exit 1; }
  echo "vllm: building the CPU vLLM and tiny model in $DIR (once, ~2 min)" >&2
  bash "$SHARED/setup.sh" "$DIR"
fi

# --max-num-seqs 2 so a burst of a dozen requests queues inside vLLM (num_requests_waiting > 0).
# Its own session, so stopping it stops the engine process it forks too.
setsid bash "$SHARED/serve.sh" "$DIR" "$PORT" --enforce-eager --max-num-seqs 2 >"$LOG" 2>&1 &
SERVER=$!
trap 'kill -TERM -- -$SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT

echo "vllm: waiting for http://127.0.0.1:$PORT/health (log: $LOG)" >&2
for _ in $(seq 1 300); do
  if curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
  kill -0 $SERVER 2>/dev/null || { echo "vllm: server exited:" >&2; tail -40 "$LOG" >&2; exit 1; }
  sleep 1
done
curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null || { echo "vllm: no /health after 300 s" >&2; tail -40 "$LOG" >&2; exit 1; }

export DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/ocr}
export CELERY_BROKER_URL=${TEST_BROKER_URL:-redis://127.0.0.1:6379/15}
export OCR_MEDIA_ROOT=${TEST_MEDIA_ROOT:-$PWD/var/test-media}
export VLLM_REAL_URL="http://127.0.0.1:$PORT/v1"
.venv/bin/python -m pytest -m vllm -v tests/test_vllm_real.py ${PYTEST_ARGS:-}
