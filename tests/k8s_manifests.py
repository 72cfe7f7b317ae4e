"""Render the k8s targets and read the node pools each cloud's infrastructure code declares.

Used by tests/test_k8s.py and k8s/validate.py. Rendering needs ``kubectl`` (``.venv-infra`` has
it from requirements/infra.txt: ``make k8s``); reading Terraform needs python-hcl2 (same venv).
Nothing here imports Django, so the infra venv runs it without the app's dependencies.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "k8s"
CLOUDS = ("aks", "eks", "gke")
TARGETS = ("base", *CLOUDS, "local")

# The Kubernetes version manifests are validated against (EKS/AKS/GKE all offer it).
KUBERNETES_VERSION = "1.31.0"

# GPU card of each machine / accelerator the infrastructure code names. Cards not listed are CPU.
CARD_OF_MACHINE = {
    "Standard_NC24ads_A100_v4": "a100-80gb",
    "Standard_NC4as_T4_v3": "t4-16gb",
    "g6e": "l40s-48gb",
    "g4dn": "t4-16gb",
    "nvidia-a100-80gb": "a100-80gb",
    "nvidia-tesla-a100": "a100-40gb",
    "nvidia-tesla-t4": "t4-16gb",
}

# The annotation that makes a Service of type LoadBalancer internal, per cloud.
INTERNAL_LB = {
    "aks": ("service.beta.kubernetes.io/azure-load-balancer-internal", "true"),
    "eks": ("service.beta.kubernetes.io/aws-load-balancer-scheme", "internal"),
    "gke": ("networking.gke.io/load-balancer-type", "Internal"),
}


def kubectl() -> str | None:
    """``kubectl`` from .venv-infra, else one on PATH; None when neither exists."""
    local = ROOT / ".venv-infra" / "bin" / "kubectl"
    if local.exists():
        return str(local)
    return shutil.which("kubectl")


def target_dir(target: str) -> Path:
    return K8S / "base" if target == "base" else K8S / "overlays" / target


@cache
def _render(target: str) -> tuple[dict, ...]:
    binary = kubectl()
    if binary is None:
        raise RuntimeError("kubectl not found: run `make k8s` (it installs requirements/infra.txt into .venv-infra)")
    out = subprocess.run(
        [binary, "kustomize", str(target_dir(target))], capture_output=True, text=True, check=False, timeout=120
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {target} failed:\n{out.stderr}")
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def render(target: str) -> list[dict]:
    return list(_render(target))


def existing_targets() -> list[str]:
    return [t for t in TARGETS if (target_dir(t) / "kustomization.yaml").exists()]


def find(docs: list[dict], kind: str, name: str) -> dict:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def pod_specs(docs: list[dict]) -> Iterator[tuple[str, dict]]:
    """(kind/name, pod spec) of every workload."""
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]


def containers(spec: dict) -> list[dict]:
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def gpus(spec: dict) -> int:
    return sum(int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)) for c in spec["containers"])


def config(docs: list[dict]) -> dict[str, str]:
    return find(docs, "ConfigMap", "ocr-config")["data"]


# --- node pools -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass
class Pool:
    name: str
    machine: str
    max_nodes: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)

    @property
    def card(self) -> str | None:
        for prefix, card in CARD_OF_MACHINE.items():
            if self.machine == prefix or self.machine.startswith(prefix + "."):
                return card
        return None


def tolerates(tolerations: list[dict], taint: Taint) -> bool:
    """Kubernetes' toleration matching: key (empty key + Exists matches all), operator Equal
    (default) compares the value, Exists ignores it; an empty effect matches every effect."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.effect:
            continue
        op = t.get("operator", "Equal")
        if op == "Exists" and (not t.get("key") or t["key"] == taint.key):
            return True
        if op == "Equal" and t.get("key") == taint.key and t.get("value", "") == taint.value:
            return True
    return False


def selects(selector: dict[str, str], pool: Pool) -> bool:
    return bool(selector) and all(pool.labels.get(k) == v for k, v in selector.items())


def _unquote(value: Any) -> Any:
    # python-hcl2 keeps string literals' quotes ("\"t4\"") and writes expressions as "${...}".
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    if isinstance(value, dict):
        return {_unquote(k): _unquote(v) for k, v in value.items()}
    return value


def hcl(path: Path) -> dict:
    import hcl2  # the infra venv only

    with path.open() as fh:
        return _unquote(hcl2.load(fh))


def tf_resource(doc: dict, rtype: str, name: str) -> dict:
    for block in doc.get("resource", []):
        if rtype in block and name in block[rtype]:
            return block[rtype][name]
    raise KeyError(f"{rtype}.{name}")


def _locals(doc: dict, name: str) -> dict:
    for block in doc.get("locals", []):
        if name in block:
            return block[name]
    raise KeyError(f"local.{name}")


def aks_pools() -> dict[str, Pool]:
    doc = hcl(K8S / "terraform" / "azure" / "main.tf")
    resource = tf_resource(doc, "azurerm_kubernetes_cluster_node_pool", "tier")
    assert resource["for_each"] == "${local.pools}" and resource["node_taints"] == "${each.value.taints}"
    pools = {}
    for name, p in _locals(doc, "pools").items():
        taints = []
        for t in p["taints"]:
            kv, effect = t.split(":")
            key, value = kv.split("=")
            taints.append(Taint(key, value, effect))
        labels = {"kubernetes.azure.com/agentpool": name, "agentpool": name, "ocr/pool": name}
        pools[name] = Pool(name, p["vm_size"], int(p["max"]), labels, taints)
    return pools


_EKS_EFFECT = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def eks_pools() -> dict[str, Pool]:
    doc = hcl(K8S / "terraform" / "aws" / "eks.tf")
    resource = tf_resource(doc, "aws_eks_node_group", "tier")
    assert resource["for_each"] == "${local.node_groups}" and resource["node_group_name"] == "${each.key}"
    assert resource["scaling_config"][0]["max_size"] == "${each.value.max}"
    (content,) = resource["dynamic"][0]["taint"]["content"]
    assert content["value"] == "${taint.value}"
    pools = {}
    for name, g in _locals(doc, "node_groups").items():
        (machine,) = g["instance_types"]
        taints = [] if g["taint"] is None else [Taint(content["key"], g["taint"], _EKS_EFFECT[content["effect"]])]
        labels = {"eks.amazonaws.com/nodegroup": name, "ocr/pool": name}
        pools[name] = Pool(name, machine, int(g["max"]), labels, taints)
    return pools


def gke_pools() -> dict[str, Pool]:
    """Pools from k8s/overlays/gke/cluster.sh. GKE itself labels accelerator nodes
    cloud.google.com/gke-accelerator=<type> and taints them nvidia.com/gpu=present:NoSchedule."""
    script = (K8S / "overlays" / "gke" / "cluster.sh").read_text().replace("\\\n", " ")
    pools = {}
    for line in script.splitlines():
        m = re.search(r"gcloud container node-pools create (\S+)", line)
        if not m:
            continue
        name = m.group(1)
        accel = re.search(r"--accelerator type=([\w-]+)", line)
        machine = accel.group(1) if accel else re.search(r"--machine-type (\S+)", line).group(1)
        labels = {"cloud.google.com/gke-nodepool": name}
        taints = []
        if accel:
            labels["cloud.google.com/gke-accelerator"] = accel.group(1)
            taints.append(Taint("nvidia.com/gpu", "present", "NoSchedule"))
        pools[name] = Pool(name, machine, int(re.search(r"--max-nodes (\d+)", line).group(1)), labels, taints)
    return pools


def pools(cloud: str) -> dict[str, Pool]:
    return {"aks": aks_pools, "eks": eks_pools, "gke": gke_pools}[cloud]()


def pool_of(cloud: str, spec: dict) -> Pool:
    matched = [p for p in pools(cloud).values() if selects(spec.get("nodeSelector", {}), p)]
    assert len(matched) == 1, f"nodeSelector {spec.get('nodeSelector')} matches {[p.name for p in matched]}"
    return matched[0]


# --- KEDA -------------------------------------------------------------------------------------

# The activation parameter of each scaler and KEDA's rule: active when the metric is strictly
# greater (kedacore/keda v2.20 pkg/scalers: redis `listLen > ActivationListLength`, postgresql
# `num > ActivationTargetQueryValue`, prometheus `val > ActivationThreshold`; default 0).
ACTIVATION_PARAM = {
    "redis": "activationListLength",
    "postgresql": "activationTargetQueryValue",
    "prometheus": "activationThreshold",
}


def trigger_active(trigger: dict, value: float) -> bool:
    activation = float(trigger["metadata"].get(ACTIVATION_PARAM[trigger["type"]], "0"))
    return value > activation
