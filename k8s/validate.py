"""Render every k8s target and validate every object against its schema, strictly.

    .venv-infra/bin/python k8s/validate.py [--out DIR]

Built-in kinds: kubernetes-validate's schemas for KUBERNETES_VERSION, strict (unknown fields
are errors). Custom resources (KEDA, prometheus-operator): the CRDs' own openAPIV3Schema,
vendored in k8s/schemas/, made strict the same way (no unknown properties except where the CRD
says x-kubernetes-preserve-unknown-fields). An object with neither schema is an error, so a new
CRD kind cannot slip through unvalidated. --out writes each rendered target for checkov.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import k8s_manifests as m

SCHEMAS = m.K8S / "schemas"


def strict(schema: dict) -> dict:
    """A copy that rejects properties the schema does not declare."""
    schema = copy.deepcopy(schema)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def crd_schema(obj: dict) -> dict | None:
    group, _, version = obj["apiVersion"].rpartition("/")
    path = SCHEMAS / f"{obj['kind'].lower()}-{group.split('.')[0]}-{version}.json"
    return strict(json.loads(path.read_text())) if path.exists() else None


def validate(obj: dict) -> str | None:
    """None when valid, else the reason."""
    name = f"{obj['kind']}/{obj['metadata']['name']}"
    schema = crd_schema(obj)
    if schema is not None:
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.path))
        return f"{name}: {errors[0].message} at {'/'.join(map(str, errors[0].path))}" if errors else None
    try:
        kubernetes_validate.validate(obj, m.KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return f"{name}: no schema for {obj['apiVersion']} (vendor its CRD schema in k8s/schemas/)"
    except kubernetes_validate.ValidationError as exc:
        return f"{name}: {exc.message} at {'/'.join(map(str, exc.path))}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, help="write each rendered target to DIR/<target>.yaml")
    ns = parser.parse_args(argv)
    failures = 0
    for target in m.existing_targets():
        docs = m.render(target)
        problems = [p for p in map(validate, docs) if p]
        for problem in problems:
            print(f"{target}: {problem}")
        failures += len(problems)
        print(f"{target}: {len(docs)} objects, {len(problems)} invalid (Kubernetes {m.KUBERNETES_VERSION}, strict)")
        if ns.out:
            ns.out.mkdir(parents=True, exist_ok=True)
            (ns.out / f"{target}.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
