# Two commands for a newcomer: `make demo` (OCR a real document, print Markdown) and `make test`;
# `make test-fast` answers in seconds with the tests that need no database, broker or worker.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_FILE ?= tests/data/scanned_ocr_test.pdf

.PHONY: venv demo test test-fast test-vllm test-images test-gpu-topology test-chaos up services script-models bench bench-report bench-readme eval eval-ci eval-baseline docs lint migrate clean locks k8s

# The images' lock constrains the runtime's transitive dependencies, so tests run what ships and a
# new upstream release does not change a fresh machine's venv.
$(BIN)/.installed: requirements/base.txt requirements/dev.txt requirements/lock/app.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements/dev.txt -c requirements/lock/app.txt
	touch $@

venv: $(BIN)/.installed

migrate: venv
	$(BIN)/python manage.py migrate --verbosity 0

demo: migrate
	$(BIN)/python manage.py ocr $(DEMO_FILE)

services:
	bash .ci/services.sh

# Tesseract's models for the scripts the PP-OCR wheels lack (apt as root; otherwise it says what to
# install, and those pages stay flagged): .ci/script-models.sh.
script-models:
	bash .ci/script-models.sh

# Tests share PostgreSQL, Redis (db 15) and a media folder with real worker processes.
TEST_ENV := DATABASE_URL=$${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/ocr} \
	CELERY_BROKER_URL=$${TEST_BROKER_URL:-redis://127.0.0.1:6379/15} \
	OCR_MEDIA_ROOT=$${TEST_MEDIA_ROOT:-$(CURDIR)/var/test-media}

# Test runs keep compiled bytecode (and pytest's assertion-rewritten modules) between runs even
# where the machine sets PYTHONDONTWRITEBYTECODE (this one does): otherwise every run, and every
# xdist worker, rewrites and compiles ~370 modules again, ~3.5 CPU-s each (docs/benchmarks.md).
KEEP_PYC := env -u PYTHONDONTWRITEBYTECODE

test: venv services script-models
	$(KEEP_PYC) $(TEST_ENV) $(BIN)/python -m pytest $(PYTEST_ARGS)

# Every test marked `fast` (tests/conftest.py: no database, broker or worker fixture, no django_db,
# not slow/gpu/vllm/browser), wherever it lives, with no server behind it: SQLite in memory, a
# broker address nothing answers, so a test that reaches for the stack fails here instead of
# passing on a developer's services.
FAST_WORKERS ?= 2
test-fast: venv
	$(KEEP_PYC) DATABASE_URL=sqlite://:memory: CELERY_BROKER_URL=redis://127.0.0.1:1/0 \
		OCR_MEDIA_ROOT=$(CURDIR)/var/test-fast-media $(BIN)/python -m pytest tests -m fast \
		-n $(FAST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-vllm: venv services
	bash .ci/vllm.sh

# Build every image target with podman and run the compose stack end to end (.ci/images.sh).
test-images:
	bash .ci/images.sh

# The compose gpu profile with CPU stand-ins (vLLM's CPU build serving a tiny random Qwen2-VL, the
# CPU layout engine): a real page through region OCR over HTTP into the vLLM container and its
# /metrics (.ci/gpu-topology.sh). Not in .ci/run: tens of minutes on 2 cores.
test-gpu-topology:
	bash .ci/gpu-topology.sh

# The whole stack under faults (tests/chaos): its own Redis, its own PostgreSQL cluster, gunicorn,
# one worker per queue and beat; load, SIGKILLs, a Redis restart and a PostgreSQL crash + restart.
# CHAOS_SIZE=full for the big run; CHAOS_ARGS="--seed N" repeats a run. Then a rolling upgrade of
# every tier under load with a migration in between (tests/chaos/rolling.py, ~2.5 min at 40 jobs).
CHAOS_SIZE ?= ci
# The batch fault test (tests/chaos/batch.py): documents in one batch from a moto S3 prefix.
CHAOS_BATCH_DOCS ?= 2000
ROLLING_JOBS ?= 40
test-chaos: venv services
	$(BIN)/python -m tests.chaos --size $(CHAOS_SIZE) $(CHAOS_ARGS)
	$(BIN)/python -m tests.chaos.rolling --jobs $(ROLLING_JOBS)
	$(BIN)/python -m tests.chaos.batch --docs $(CHAOS_BATCH_DOCS)

# The local stack needs only Redis (SQLite is the default database; set DATABASE_URL for PostgreSQL).
up: migrate
	OCR_NEED_POSTGRES=$$(case "$$DATABASE_URL" in postgres*) echo 1;; *) echo 0;; esac) bash .ci/services.sh
	$(BIN)/honcho start -f compose/Procfile -d .

# All benchmarks (or BENCH_ARGS="ingest --rounds 5"); writes bench/results/report-YYYY-MM-DD.md.
bench: venv services
	bash .ci/bench-tools.sh
	$(BIN)/python -m bench $(BENCH_ARGS)

# Rebuild today's report from its recorded runs; copy the newest report's table into README.md.
bench-report: venv
	$(BIN)/python -m bench report

bench-readme: venv
	$(BIN)/python -m bench readme

# The public evaluation corpus (bench/corpus/, docs/evaluation.md): every page through the embedded
# pipeline `manage.py ocr` runs, Tesseract beside it; writes bench/results/eval-YYYY-MM-DD.md and
# its run JSON. EVAL_ARGS="--only receipt" narrows it.
eval: venv
	bash .ci/eval-tools.sh
	$(BIN)/python -m bench.evaluation $(EVAL_ARGS)

# The CI slice with its gates (no upright page turned, no page done under 0.5 F1 without a flag,
# no class under bench/corpus/baseline-ci.json): fails the run when one fails. No Tesseract.
eval-ci: venv
	$(BIN)/python -m bench.evaluation --ci --no-tesseract --gate $(EVAL_ARGS)

# Record the CI slice's per-class F1 as the new baseline (after a change that is meant to move it).
eval-baseline: venv
	$(BIN)/python -m bench.evaluation --ci --no-tesseract --record-baseline

# Pages generated from the code: docs/configuration.md from ocrsite/settings.py (a test fails when stale).
docs: venv
	$(BIN)/python -m ocrsite.configuration > docs/configuration.md

# ruff (rules in pyproject.toml), the import layering (import-linter contracts in pyproject.toml),
# and the models against their migrations (no database needed: SQLite in memory).
lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/lint-imports
	DATABASE_URL=sqlite://:memory: $(BIN)/python manage.py makemigrations --check --dry-run

# Per-image dependency locks (requirements/lock/), resolved by uv for the images' platform.
locks: venv
	bash .ci/locks.sh

# Render + validate the Kubernetes manifests, their invariant tests, checkov (own venvs: .ci/k8s.sh).
k8s:
	bash .ci/k8s.sh

# Keeps the committed dated reports (bench/results/report-*.md), the README block's source.
clean:
	rm -rf var .pytest_cache
	[ ! -d bench/results ] || find bench/results -mindepth 1 -maxdepth 1 ! -name 'report-*.md' -exec rm -rf {} +
