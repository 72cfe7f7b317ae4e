"""Names are spelled once (``ocrsite.vocabulary``) and everything that runs the platform agrees.

The Procfile, the Kubernetes manifests, the Celery app and the README are read as they are and
checked against the vocabulary, so a queue, task or error code renamed in one place and not the
others fails here instead of silently stranding messages.
"""

from __future__ import annotations

import ast
import re
import shlex

import yaml
from django.conf import settings

from ocrsite.celery import app
from ocrsite.vocabulary import ROUTES, TASK_MODULES, ErrorCode, Queue, TaskName
from tests.support.documents import ROOT


def _queues_of(argv: list[str]) -> set[str]:
    if "worker" not in argv or "-Q" not in argv:
        return set()
    return set(argv[argv.index("-Q") + 1].split(","))


def test_every_queue_has_a_worker_in_the_procfile_and_no_other():
    consumed: set[str] = set()
    for line in (ROOT / "compose" / "Procfile").read_text().splitlines():
        if ":" in line and not line.startswith("#"):
            consumed |= _queues_of(shlex.split(line.split(":", 1)[1].split("||")[0]))
    assert consumed == {q.value for q in Queue}


def _k8s_docs() -> list[dict]:
    docs = []
    for path in sorted((ROOT / "k8s").rglob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return docs


def test_kubernetes_workers_and_scalers_name_only_known_queues():
    consumed: set[str] = set()
    queues_of: dict[str, set[str]] = {}  # Deployment -> the queues its containers consume
    scaled: set[str] = set()  # Deployments a ScaledObject scales
    for doc in _k8s_docs():
        spec = doc.get("spec") or {}
        pod = ((spec.get("template") or {}).get("spec")) or {}
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            found = _queues_of([str(a) for a in container.get("command", []) + container.get("args", [])])
            consumed |= found
            if doc.get("kind") == "Deployment":
                queues_of.setdefault(doc["metadata"]["name"], set()).update(found)
        if doc.get("kind") == "ScaledObject":
            scaled.add(spec["scaleTargetRef"]["name"])
    known = {q.value for q in Queue}
    assert consumed == known, "every queue needs exactly-named workers in k8s"
    # Every queue's workers are scaled by KEDA (on the pages or jobs waiting for them, k8s/base/keda.yaml).
    assert set().union(*(queues_of.get(name, set()) for name in scaled)) == known


def test_celery_registers_exactly_the_named_tasks_on_their_routes():
    app.loader.import_default_modules()
    ours = {name for name in app.tasks if not name.startswith("celery.")}
    assert ours == {t.value for t in TaskName}
    assert {t.value: {"queue": q.value} for t, q in ROUTES.items()} == settings.CELERY_TASK_ROUTES
    assert set(ROUTES) == set(TaskName)
    # A queue no task is routed to would be a worker tier that never has work: the queue recipe's
    # routes step. (The bulk lane also carries the pipeline's stages, sent there per job.)
    assert set(ROUTES.values()) == set(Queue), "queues with no task routed to them"
    # Each task lives in one of the stage modules the app imports.
    assert {app.tasks[t.value].__module__ for t in TaskName} <= set(TASK_MODULES)


def test_the_readme_documents_only_real_error_codes():
    # The README and its docs/ pages (the error table is in docs/integrators.md).
    readme = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    documented = set(
        re.findall(
            r"`((?:input|job|page|engine|layout|vllm|request|auth|rate|quota|busy|idempotency):[a-z0-9-]+)`", readme
        )
    )
    assert documented, "the README's error table is gone"
    assert documented <= {c.value for c in ErrorCode}, documented - {c.value for c in ErrorCode}


def test_product_code_spells_no_error_code_or_task_name_outside_the_vocabulary():
    """A name written as a string literal is a second spelling that can drift from the first."""
    codes = {c.value for c in ErrorCode} | {t.value for t in TaskName}
    strays = []
    for package in ("apps", "workers", "ocrsite"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "vocabulary.py" or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in codes:
                    strays.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert not strays, strays
