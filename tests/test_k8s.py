"""The manifests parse, every tier has its scaler, and vLLM runs the profile's own argv."""

from __future__ import annotations

from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parent.parent / "k8s"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / "base" / name).read_text()) if d]


def test_kustomization_lists_every_manifest():
    listed = set(yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())["resources"])
    present = {p.name for p in (K8S / "base").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


def test_vllm_deployment_uses_the_rendered_profile_argv():
    profiles = yaml.safe_load((K8S / "vllm" / "profiles.yaml").read_text())
    deploy = next(d for d in _docs("vllm.yaml") if d["kind"] == "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    # Same serving options; only argv[0] differs (weights from the shared volume, not a hub id).
    assert args[1:] == profiles["glm-ocr"]["gpu80"][1:]
    assert args[0].startswith("/models/")


def test_gpu_tiers_scale_to_zero_on_their_own_signal():
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d["spec"] for d in _docs("keda.yaml")}
    assert {"worker-layout", "worker-ocr", "vllm"} <= set(scaled)
    for spec in scaled.values():
        assert spec["minReplicaCount"] == 0
    layout = {t["type"]: t["metadata"] for t in scaled["worker-layout"]["triggers"]}
    assert layout["redis"]["listName"] == "layout"
    vllm = {t["type"]: t["metadata"] for t in scaled["vllm"]["triggers"]}
    assert "vllm:num_requests_waiting" in vllm["prometheus"]["query"]
    assert "cron" in vllm
