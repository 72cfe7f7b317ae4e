#!/usr/bin/env bash
# `make test-images`: build every image target and run the compose stack end to end, with podman,
# from a fresh Debian machine and without a container registry:
#   tools (apt) → base image (debootstrap + podman import) → app, layout-gpu (CPU paddle), vllm
#   (on a stand-in base), postgres, redis, s3 → layout image checks → compose up (docker-compose
#   against `podman system service`, host networking, ports on 127.0.0.1) → POST a real PDF
#   through the web container → done → Markdown → Flower login → /readyz → result object in the
#   object store → tear down (always).
# Cached between runs under OCR_IMAGES_WORK (the base tarball) and podman's storage (layers).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
say() { echo "images: [$((SECONDS - started))s] $*" >&2; }
die() { echo "images: FAILED: $*" >&2; exit 1; }

WORK=${OCR_IMAGES_WORK:-/var/tmp/ocr-images}
PREFIX=localhost/ocr
TAG=${OCR_IMAGES_TAG:-ci}
PROJECT=ocrci
BASE_IMAGE=localhost/ocr-base:bookworm
# Ports of the stack under test: not the host's own Redis (6379) and PostgreSQL (5432).
WEB_PORT=18000 FLOWER_PORT=15555 POSTGRES_PORT=15432 REDIS_PORT=16379 S3_PORT=19000
mkdir -p "$WORK"

# --- tools and the base image (Debian bookworm minbase + python3, from apt's own mirror) -------
source .ci/podman-base.sh
podman_tools "$WORK"
podman_base_image "$BASE_IMAGE" "$WORK"

# --- images ------------------------------------------------------------------------------------
# The machine's CA bundle goes in as a build secret (a TLS-inspecting proxy may sit on the way to
# PyPI); it is never committed and never a file of its own in a layer.
ca=${OCR_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
secret=()
[ -s "$ca" ] && secret=(--secret "id=extra_ca,src=$ca")
build() {  # target
  say "building $1"
  podman build --format docker --network host --layers -f compose/Dockerfile --target "$1" "${secret[@]}" \
    --build-arg BASE="$BASE_IMAGE" --build-arg PADDLE=paddlepaddle --build-arg VLLM_IMAGE="$BASE_IMAGE" \
    -t "$PREFIX-$1:$TAG" . >"$WORK/build-$1.log" 2>&1 || { tail -n 40 "$WORK/build-$1.log" >&2; die "build $1 (log: $WORK/build-$1.log)"; }
}
# The official vLLM image cannot be pulled without a registry: the vllm target is built on the base
# image standing in for it, which checks the thin layer (profiles render, user, entry point) but
# not vLLM itself.
for target in app layout-gpu vllm postgres redis s3; do build "$target"; done

say "app: Tesseract's models for the other scripts and the Latin-script languages are where the CPU engine looks"
podman run -i --rm --no-healthcheck --network host "$PREFIX-app:$TAG" python - <<'PY' || die "app image: other-script models"
from workers.engines.cpu.other_scripts import MODELS, OtherScriptReader
reader = OtherScriptReader.find()
assert reader is not None and set(reader.models) == set(MODELS), reader
languages = "fr de es it pt nl pl cs sk tr ro hu sv da no fi hr sl lt lv et ca".split()
missing = [code for code in languages if reader.language_model(code) is None]
assert not missing, missing
print(reader.name, reader.folder, len(languages), "language models")
PY

say "layout-gpu: paddleocr imports; an empty model directory fails naming the setting"
podman run -i --rm --no-healthcheck --network host "$PREFIX-layout-gpu:$TAG" python - <<'PY' || die "layout-gpu image checks"
import tempfile
import paddle  # paddleocr never imports paddle at import time: a broken Paddle would pass unseen
import paddleocr
from workers.engines.base import EngineError
from workers.engines.paddle import PaddleLayoutConfig, PaddleLayoutEngine
print("paddle", paddle.__version__, "paddleocr", paddleocr.__version__)
try:
    PaddleLayoutEngine(PaddleLayoutConfig(model_dir=tempfile.mkdtemp(), device="cpu"))
except EngineError as exc:
    assert exc.permanent and "OCR_PADDLE_MODEL_DIR" in exc.message, exc.message
    print("empty model dir:", exc.code, exc.message)
else:
    raise SystemExit("the paddle engine built without weights")
PY
# The vllm entry point renders the profile's `vllm serve` argv (a stub `vllm` echoes it here).
served=$(podman run --rm --no-healthcheck -e VLLM_PROFILE=glm-ocr -e VLLM_PORT=8001 -e VLLM_MODEL_PATH=/models/GLM-OCR \
  --entrypoint /bin/sh "$PREFIX-vllm:$TAG" -c 'mkdir -p /tmp/stub && printf "#!/bin/sh\necho \"\$@\"\n" >/tmp/stub/vllm \
  && chmod +x /tmp/stub/vllm && PATH=/tmp/stub:$PATH exec sh /opt/ocr/vllm-serve.sh') || die "vllm entry point"
case $served in
  "serve /models/GLM-OCR --host 127.0.0.1 --port 8001 --served-model-name zai-org/GLM-OCR "*"--speculative-config"*) ;;
  *) die "vllm entry point rendered: $served" ;;
esac

# --- the stack ---------------------------------------------------------------------------------
for port in $WEB_PORT $FLOWER_PORT $POSTGRES_PORT $REDIS_PORT $S3_PORT; do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && die "port $port is taken"
done
secret_value() { python3 -c "import secrets; print(secrets.token_urlsafe(24))"; }
flower_login="ci:$(secret_value)"
envfile="$WORK/stack.env"
cat >"$envfile" <<ENV
DJANGO_SECRET_KEY=$(secret_value)
POSTGRES_PASSWORD=$(secret_value)
REDIS_PASSWORD=$(secret_value)
AWS_ACCESS_KEY_ID=ci$(secret_value)
AWS_SECRET_ACCESS_KEY=$(secret_value)
FLOWER_BASIC_AUTH=$flower_login
DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost
WEB_PORT=$WEB_PORT
FLOWER_PORT=$FLOWER_PORT
POSTGRES_PORT=$POSTGRES_PORT
REDIS_PORT=$REDIS_PORT
S3_PORT=$S3_PORT
AWS_S3_ENDPOINT_URL=http://127.0.0.1:$S3_PORT
IMAGE_PREFIX=$PREFIX
IMAGE_TAG=$TAG
BASE=$BASE_IMAGE
CPU_CONCURRENCY=1
OCR_CONCURRENCY=1
WEB_WORKERS=2
ENV

sock="$WORK/podman.sock"
rm -f "$sock"
podman system service --time=0 "unix://$sock" >"$WORK/podman-service.log" 2>&1 &
service_pid=$!
export DOCKER_HOST="unix://$sock"
compose() { docker-compose -p "$PROJECT" -f compose/docker-compose.yml --env-file "$envfile" "$@"; }
driver_pid=
teardown() {
  status=$?
  set +e
  [ -n "$driver_pid" ] && kill "$driver_pid" 2>/dev/null
  if [ $status -ne 0 ]; then
    say "logs of the failed run:"
    compose logs --no-color --tail=40 >&2 2>/dev/null
  fi
  compose down -v --remove-orphans >"$WORK/down.log" 2>&1
  kill "$service_pid" 2>/dev/null; wait "$service_pid" 2>/dev/null
  say "torn down (exit $status)"
  exit $status
}
# A signal ends the run as a failure (128 + signal); teardown runs once, on EXIT.
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.2; done

# Health checks: podman runs them from systemd timers, and this machine kind has no systemd, so a
# loop runs each container's own check (the ones in the compose file) until it reports healthy,
# which is what `depends_on: condition: service_healthy` waits for.
(
  while sleep 3; do
    for c in $(podman ps -q --filter "label=com.docker.compose.project=$PROJECT"); do
      [ "$(podman inspect --format '{{.State.Health.Status}}' "$c" 2>/dev/null)" = healthy ] \
        || podman healthcheck run "$c" >/dev/null 2>&1 || true
    done
  done
) &
driver_pid=$!

say "compose up (waits on health and on migrate)"
timeout 900 docker-compose -p "$PROJECT" -f compose/docker-compose.yml --env-file "$envfile" up -d --no-build \
  >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "compose up"; }
base="http://127.0.0.1:$WEB_PORT"
for _ in $(seq 1 60); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 2; done
curl -fsS "$base/readyz" | tee "$WORK/readyz.json" | grep -q '"status": *"ok"' || die "/readyz is not healthy: $(cat "$WORK/readyz.json")"
say "/readyz: $(cat "$WORK/readyz.json")"

# An API key minted in the web container, a real PDF posted to it, polled until done.
web=$(compose ps -q web)
key=$(podman exec "$web" python manage.py create_api_key ci 2>/dev/null | tail -n1)
[ -n "$key" ] || die "no API key"
job=$(curl -fsS -H "X-API-Key: $key" -F "file=@tests/data/scanned_ocr_test.pdf" "$base/api/v1/jobs" \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])') || die "POST /api/v1/jobs"
say "job $job posted"
status=
for _ in $(seq 1 150); do
  status=$(curl -fsS -H "X-API-Key: $key" "$base/api/v1/jobs/$job" | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])')
  case $status in done|failed|cancelled) break;; esac
  sleep 2
done
[ "$status" = done ] || die "job ended $status"
curl -fsS -H "X-API-Key: $key" "$base/api/v1/jobs/$job/result?format=markdown" >"$WORK/result.md"
[ -s "$WORK/result.md" ] || die "empty Markdown"
say "job done; Markdown: $(wc -c <"$WORK/result.md") bytes: $(head -c 120 "$WORK/result.md" | tr '\n' ' ')"

# Flower: refuses without the login, answers with it.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$FLOWER_PORT/")
[ "$code" = 401 ] || die "Flower without a login answered $code, not 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -u "$flower_login" "http://127.0.0.1:$FLOWER_PORT/")
[ "$code" = 200 ] || die "Flower with the login answered $code, not 200"
say "Flower: 401 without the login, 200 with it"

# The result object is in the object store (S3 through django-storages), not on a local disk.
s3=$(compose ps -q s3)
podman exec -i -e JOB="$job" -e S3_PORT="$S3_PORT" "$s3" python - <<'PY' || die "result object not in the object store"
import os
import boto3
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{os.environ['S3_PORT']}", region_name="us-east-1")
bucket = os.environ.get("AWS_STORAGE_BUCKET_NAME", "ocr")
key = f"results/{os.environ['JOB']}.md"
body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
assert body.strip(), "empty result object"
print(f"s3://{bucket}/{key}: {len(body)} bytes")
PY
# The image's promises: a non-root user, /static served by the app server (WhiteNoise), the
# image's own health check present, and SIGTERM reaching Celery (a warm shutdown, not a kill).
[ "$(podman exec "$web" id -u)" = 10001 ] || die "web runs as uid $(podman exec "$web" id -u), not 10001"
curl -fsS -o /dev/null "$base/static/admin/css/base.css" || die "/static/admin/css/base.css is not served"
podman image inspect "$PREFIX-app:$TAG" | grep -q '"Healthcheck"' && podman image inspect "$PREFIX-app:$TAG" | grep -q '/healthz' \
  || die "the app image has no HEALTHCHECK on /healthz"
cpu=$(compose ps -q worker-cpu)
podman stop -t 50 "$cpu" >/dev/null
podman logs "$cpu" 2>&1 | grep -q "Warm shutdown" || die "worker-cpu did not shut down warm on SIGTERM"
say "uid 10001, /static served, HEALTHCHECK on /healthz, Celery warm shutdown on SIGTERM"
say "all checks passed"
