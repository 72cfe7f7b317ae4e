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

# --- what each machine is ------------------------------------------------------------------------
# The machines the infrastructure code names, as their clouds publish them. Pod requests are
# checked against what a node of the machine can *allocate* (below), the GPU count against
# `gpus`, and an ephemeral OS disk against `temp_disk_gib` (None: the size has no temp/cache disk).
# Sources: Azure VM size pages (Dsv5/Ddsv5/Esv5/Edsv5: "Temp storage: none" for the s_v5 sizes,
# "Ephemeral OS Disks: Not Supported"; NCasT4_v3; NC_A100_v4), EC2 instance types (g4dn, g6e,
# c6i, r6i, m6i; max_pods = ENIs × (IPv4 per ENI − 1) + 2, the VPC CNI rule nodeadm uses, from
# awslabs/amazon-eks-ami nodeadm/internal/kubelet/eni_max_pods.go), GCE machine types (c3, n2,
# e2, n1, a2-ultragpu).


@dataclass(frozen=True)
class Machine:
    vcpu: int
    memory_gib: float
    gpus: int = 0
    card: str | None = None
    temp_disk_gib: int | None = None  # Azure: the temp (resource) disk an ephemeral OS disk can live on
    max_pods: int = 110  # pods per node (EKS: the VPC CNI's ENI limit; AKS pools set their own)


MACHINES = {
    # Azure
    "Standard_D4s_v5": Machine(4, 16),
    "Standard_D8s_v5": Machine(8, 32),
    "Standard_E4s_v5": Machine(4, 32),
    "Standard_D4ds_v5": Machine(4, 16, temp_disk_gib=150),
    "Standard_D8ds_v5": Machine(8, 32, temp_disk_gib=300),
    "Standard_E4ds_v5": Machine(4, 32, temp_disk_gib=150),
    "Standard_NC4as_T4_v3": Machine(4, 28, 1, "t4-16gb", temp_disk_gib=180),
    "Standard_NC24ads_A100_v4": Machine(24, 220, 1, "a100-80gb", temp_disk_gib=64),
    # AWS
    "m6i.large": Machine(2, 8, max_pods=29),
    "c6i.2xlarge": Machine(8, 16, max_pods=58),
    "r6i.large": Machine(2, 16, max_pods=29),
    "g4dn.xlarge": Machine(4, 16, 1, "t4-16gb", max_pods=29),
    "g6e.xlarge": Machine(4, 32, 1, "l40s-48gb", max_pods=58),
    "g6e.2xlarge": Machine(8, 64, 1, "l40s-48gb", max_pods=58),
    # Google Cloud (GPU pools are named by their accelerator; the machine type carries the CPU/RAM)
    "e2-standard-4": Machine(4, 16),
    "c3-standard-8": Machine(8, 32),
    "n2-highmem-4": Machine(4, 32),
    "n1-standard-8": Machine(8, 30),
    "a2-ultragpu-1g": Machine(12, 170, 1, "a100-80gb"),
}

# GPU card of each accelerator a GKE pool names.
CARD_OF_ACCELERATOR = {
    "nvidia-a100-80gb": "a100-80gb",
    "nvidia-tesla-a100": "a100-40gb",
    "nvidia-tesla-t4": "t4-16gb",
}

# What the kubelet keeps for itself and the system on each cloud's node image, so pods get
# allocatable = capacity − kube-reserved − system-reserved − eviction threshold. The scheduler
# places requests against allocatable; the cluster autoscaler's template node for a scale-from-
# zero group counts the full capacity (kubernetes/autoscaler cloudprovider/aws/aws_manager.go
# buildNodeFromTemplate), so a pod that fits the capacity but not the allocatable makes it add
# nodes the pod can never use.
# - EKS (AL2023, nodeadm: awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go):
#   CPU 6 % of the first core, 1 % of the second, 0.5 % of the next two, 0.25 % above four;
#   memory 11 MiB × max_pods + 255 MiB; eviction memory.available < 100 Mi.
# - AKS ≥ 1.29 (learn.microsoft.com/azure/aks/node-resource-reservations): CPU 60/100/140/180/
#   260/420/740 m for 1/2/4/8/16/32/64 cores; memory min(20 MB × max_pods + 50 MB, 25 %);
#   eviction 100 Mi.
# - GKE (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes): CPU as EKS; memory
#   25 % of the first 4 GiB, 20 % of the next 4, 10 % of the next 8, 6 % of the next 112, 2 %
#   above 128 GiB; eviction 100 Mi.
# On top of that, every node runs DaemonSets (CNI, kube-proxy, CSI node plugins, the NVIDIA device
# plugin and DCGM exporter on GPU nodes, log/metrics agents): DAEMONSET_ALLOWANCE per node is
# this project's assumption for them, not a cloud figure.
DAEMONSET_ALLOWANCE = (0.5, 1.0)  # (CPU cores, GiB)
_EVICTION_GIB = 100 / 1024


def _tiered(total: float, tiers: list[tuple[float, float]]) -> float:
    """Sum of rate × the part of `total` inside each (width, rate) tier, the last tier unbounded."""
    left, reserved = total, 0.0
    for width, rate in tiers:
        part = min(left, width)
        reserved += part * rate
        left -= part
        if left <= 0:
            break
    return reserved


_CPU_TIERS = [(1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025)]
_AKS_CPU_MILLI = {1: 60, 2: 100, 4: 140, 8: 180, 16: 260, 32: 420, 64: 740}


def allocatable(cloud: str, machine: Machine, max_pods: int) -> tuple[float, float]:
    """(CPU cores, memory GiB) a node of `machine` offers pods on `cloud`, DaemonSets deducted."""
    if cloud == "aks":
        cpu_reserved = _AKS_CPU_MILLI[max(c for c in _AKS_CPU_MILLI if c <= machine.vcpu)] / 1000
        mem_reserved = min((20 * max_pods + 50) / 1024, 0.25 * machine.memory_gib)
    elif cloud == "eks":
        cpu_reserved = _tiered(machine.vcpu, _CPU_TIERS)
        mem_reserved = (11 * max_pods + 255) / 1024
    elif cloud == "gke":
        cpu_reserved = _tiered(machine.vcpu, _CPU_TIERS)
        mem_reserved = _tiered(machine.memory_gib, [(4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02)])
    else:
        raise ValueError(cloud)
    cpu = machine.vcpu - cpu_reserved - DAEMONSET_ALLOWANCE[0]
    memory = machine.memory_gib - mem_reserved - _EVICTION_GIB - DAEMONSET_ALLOWANCE[1]
    return cpu, memory


# Unpacked size of each image (GiB). A node keeps the compressed layers and the unpacked snapshot
# (containerd), so pulling needs about twice this on the root disk. vllm/vllm-openai v0.24.0: the
# ~28 GB unpacked that issue 22 reports (CUDA, PyTorch, FlashInfer; not re-measured here: no
# registry on this machine); layout-gpu: Paddle's
# GPU wheel with its CUDA/cuDNN wheels on top of the app; app: Python + OpenCV + ONNX Runtime +
# OpenVINO. Revisit when an image's base or pin changes (README: images).
IMAGE_GIB = {
    "ocr-vllm": 28,
    "ocr-layout-gpu": 12,
    "ocr-app": 3,
    "rclone": 0.1,
    "redis": 0.2,
    "opentelemetry-collector-contrib": 0.4,
}
# The OS, kubelet/containerd state and logs, besides images and emptyDirs.
SYSTEM_DISK_GIB = 20


def image_key(image: str) -> str:
    """IMAGE_GIB's key for a rendered image reference."""
    return image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]


def root_disk_needed(spec: dict) -> float:
    """GiB of node root disk one pod needs: each image twice (compressed + unpacked), its
    disk-backed emptyDirs at their size limits, and the system's share."""
    images = {image_key(c["image"]) for c in containers(spec)}
    empty_dirs = sum(
        quantity_gib(v["emptyDir"].get("sizeLimit", "0"))
        for v in spec.get("volumes", [])
        if "emptyDir" in v and v["emptyDir"].get("medium") != "Memory"
    )
    return 2 * sum(IMAGE_GIB[i] for i in images) + empty_dirs + SYSTEM_DISK_GIB


_UNITS = {"Ki": 2**-20, "Mi": 2**-10, "Gi": 1, "Ti": 2**10, "k": 1e3 / 2**30, "M": 1e6 / 2**30, "G": 1e9 / 2**30}


def quantity_gib(q: str | int) -> float:
    """A Kubernetes memory/storage quantity in GiB."""
    q = str(q)
    for unit, factor in _UNITS.items():
        if q.endswith(unit):
            return float(q[: -len(unit)]) * factor
    return float(q) / 2**30


def quantity_cpu(q: str | int | float) -> float:
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def pod_requests(spec: dict) -> tuple[float, float]:
    """(CPU, GiB) the scheduler reserves for a pod: the larger of its biggest init container and
    the sum of its containers (Kubernetes' effective request)."""

    def req(c: dict) -> tuple[float, float]:
        r = c.get("resources", {}).get("requests", {})
        return quantity_cpu(r.get("cpu", 0)), quantity_gib(r.get("memory", 0))

    main = [req(c) for c in spec["containers"]]
    init = [req(c) for c in spec.get("initContainers", [])]
    cpu = max([sum(c for c, _ in main)] + [c for c, _ in init])
    mem = max([sum(m for _, m in main)] + [m for _, m in init])
    return cpu, mem


def pod_limits(spec: dict) -> tuple[float, float]:
    def lim(c: dict) -> tuple[float, float]:
        r = c.get("resources", {}).get("limits", {})
        return quantity_cpu(r.get("cpu", 0)), quantity_gib(r.get("memory", 0))

    main = [lim(c) for c in spec["containers"]]
    return sum(c for c, _ in main), sum(m for _, m in main)


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


# Objects whose rendered name carries a suffix: the ConfigMap a hash of its content (kustomize's
# configMapGenerator), the Jobs the version they run (the overlays' replacements).
SUFFIXED = {("ConfigMap", "ocr-config"), ("Job", "migrate"), ("Job", "model-ingestion")}


def base_name(kind: str, name: str) -> str:
    for k, base in SUFFIXED:
        if kind == k and name.startswith(base + "-") and not name.startswith(base + "-egress"):
            return base
    return name


def find(docs: list[dict], kind: str, name: str) -> dict:
    matches = [d for d in docs if d["kind"] == kind and base_name(kind, d["metadata"]["name"]) == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def env_file(path: Path) -> dict[str, str]:
    """KEY=value lines of a kustomize env file (configMapGenerator envs), comments skipped."""
    pairs = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value
    return pairs


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
    machine: str  # a key of MACHINES
    max_nodes: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    disk_gib: int = 0  # the node's root (OS) disk
    ephemeral_os: bool = False  # Azure: the OS disk on the VM's temp disk
    accelerator: str | None = None  # GKE: the pool's --accelerator type
    max_pods: int | None = None  # AKS: the pool's max_pods (else the machine's)

    @property
    def allocatable(self) -> tuple[float, float]:
        return allocatable(self.cloud, self.spec, self.max_pods or self.spec.max_pods)

    @property
    def cloud(self) -> str:
        return (
            "aks"
            if "kubernetes.azure.com/agentpool" in self.labels
            else "eks"
            if "eks.amazonaws.com/nodegroup" in self.labels
            else "gke"
        )

    @property
    def spec(self) -> Machine:
        return MACHINES[self.machine]

    @property
    def card(self) -> str | None:
        if self.accelerator:
            return CARD_OF_ACCELERATOR[self.accelerator]
        return self.spec.card

    @property
    def gpus(self) -> int:
        return 1 if self.accelerator else self.spec.gpus


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


def aks_cluster() -> dict:
    return tf_resource(hcl(K8S / "terraform" / "azure" / "main.tf"), "azurerm_kubernetes_cluster", "main")


def aks_pools() -> dict[str, Pool]:
    doc = hcl(K8S / "terraform" / "azure" / "main.tf")
    resource = tf_resource(doc, "azurerm_kubernetes_cluster_node_pool", "tier")
    assert resource["for_each"] == "${local.pools}" and resource["node_taints"] == "${each.value.taints}"
    assert resource["vm_size"] == "${each.value.vm_size}" and resource["os_disk_type"] == "${each.value.os_disk}"
    assert resource["os_disk_size_gb"] == "${each.value.disk_gb}" and resource["node_labels"] == "${each.value.labels}"
    max_pods = int(resource["max_pods"])
    pools = {}
    for name, p in _locals(doc, "pools").items():
        taints = []
        for t in p["taints"]:
            kv, effect = t.split(":")
            key, value = kv.split("=")
            taints.append(Taint(key, value, effect))
        labels = {"kubernetes.azure.com/agentpool": name, "agentpool": name, **p["labels"]}
        pools[name] = Pool(
            name,
            p["vm_size"],
            int(p["max"]),
            labels,
            taints,
            int(p["disk_gb"]),
            p["os_disk"] == "Ephemeral",
            max_pods=max_pods,
        )
    default = aks_cluster()["default_node_pool"][0]
    pools[default["name"]] = Pool(
        default["name"],
        default["vm_size"],
        int(default["max_count"]),
        {"kubernetes.azure.com/agentpool": default["name"]},
        [],
        int(default["os_disk_size_gb"]),
        default["os_disk_type"] == "Ephemeral",
        max_pods=int(default["max_pods"]),
    )
    return pools


_EKS_EFFECT = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def eks_pools() -> dict[str, Pool]:
    doc = hcl(K8S / "terraform" / "aws" / "eks.tf")
    resource = tf_resource(doc, "aws_eks_node_group", "tier")
    assert resource["for_each"] == "${local.node_groups}" and resource["node_group_name"] == "${each.key}"
    assert resource["scaling_config"][0]["max_size"] == "${each.value.max}"
    # No launch template: the group's disk_size is the root volume (else AWS's default, 20 GiB).
    assert "launch_template" not in resource and resource["disk_size"] == "${each.value.disk_gb}"
    assert resource["labels"] == '${merge({"ocr/pool" = each.key}, each.value.labels)}', resource["labels"]
    (content,) = resource["dynamic"][0]["taint"]["content"]
    assert content["value"] == "${taint.value}"
    pools = {}
    for name, g in _locals(doc, "node_groups").items():
        (machine,) = g["instance_types"]
        taints = [] if g["taint"] is None else [Taint(content["key"], g["taint"], _EKS_EFFECT[content["effect"]])]
        labels = {"eks.amazonaws.com/nodegroup": name, "ocr/pool": name, **g["labels"]}
        pools[name] = Pool(name, machine, int(g["max"]), labels, taints, int(g["disk_gb"]))
    return pools


def gke_commands() -> list[str]:
    """The gcloud commands of k8s/overlays/gke/cluster.sh, continuation lines joined."""
    script = (K8S / "overlays" / "gke" / "cluster.sh").read_text().replace("\\\n", " ")
    return [line.strip() for line in script.splitlines() if line.strip().startswith("gcloud ")]


def gke_pools() -> dict[str, Pool]:
    """Pools from k8s/overlays/gke/cluster.sh. GKE itself labels accelerator nodes
    cloud.google.com/gke-accelerator=<type> and taints them nvidia.com/gpu=present:NoSchedule.
    The boot disk is --disk-size (gcloud's default: 100 GB)."""
    pools = {}
    for line in gke_commands():
        m = re.search(r"gcloud container (?:node-pools create (\S+)|clusters create)", line)
        if not m:
            continue
        name = m.group(1) or re.search(r"--node-pool-name (\S+)", line).group(1)
        accel = re.search(r"--accelerator type=([\w-]+)", line)
        machine = re.search(r"--machine-type (\S+)", line).group(1)
        labels = {"cloud.google.com/gke-nodepool": name}
        taints = []
        if accel:
            labels["cloud.google.com/gke-accelerator"] = accel.group(1)
            taints.append(Taint("nvidia.com/gpu", "present", "NoSchedule"))
        nodes = re.search(r"--max-nodes (\d+)", line) or re.search(r"--num-nodes (\d+)", line)
        disk = re.search(r"--disk-size (\d+)", line)
        pools[name] = Pool(
            name,
            machine,
            int(nodes.group(1)),
            labels,
            taints,
            int(disk.group(1)) if disk else 100,
            accelerator=accel.group(1) if accel else None,
        )
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


# --- add-ons and storage, per cloud -----------------------------------------------------------

# Where KEDA's operator runs (the pods that read Redis list lengths). AKS: the managed add-on the
# Terraform enables (workload_autoscaler_profile.keda_enabled) deploys keda-operator into
# kube-system (learn.microsoft.com/azure/aks/keda-about); elsewhere the kedacore/keda Helm chart,
# installed into `keda` (README: order of operations).
KEDA_NAMESPACE = {"aks": "kube-system", "eks": "keda", "gke": "keda"}

# The NVIDIA device plugin chart's default scheduling (NVIDIA/k8s-device-plugin
# deployments/helm/nvidia-device-plugin/values.yaml): node affinity on any of these labels being
# "true"/"NVIDIA", and tolerations for CriticalAddonsOnly and nvidia.com/gpu:NoSchedule only.
DEVICE_PLUGIN_AFFINITY = {
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/cpu-model.vendor_id": "NVIDIA",
    "nvidia.com/gpu.present": "true",
}
DEVICE_PLUGIN_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]
# GKE installs its own device plugin on accelerator nodes; a second one must not be installed.
CLOUDS_WITH_OWN_DEVICE_PLUGIN = {"gke"}


def device_plugin_values(cloud: str) -> dict | None:
    path = K8S / "addons" / f"nvidia-device-plugin-{cloud}.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else None


def device_plugin_lands_on(values: dict, pool: Pool) -> bool:
    """Whether the chart's DaemonSet, with `values` over its defaults (Helm replaces lists),
    schedules a pod on a node of `pool`."""
    tolerations = values.get("tolerations", DEVICE_PLUGIN_TOLERATIONS)
    if "affinity" in values or "nodeSelector" in values:
        raise AssertionError("values override the chart's affinity: extend device_plugin_lands_on first")
    selected = any(pool.labels.get(k) == v for k, v in DEVICE_PLUGIN_AFFINITY.items())
    return selected and all(tolerates(tolerations, t) for t in pool.taints)


# How a non-root pod gets write access to each cloud's ReadWriteMany volume.
# - Azure Files (SMB) ignores fsGroup: the StorageClass's mountOptions uid/gid own the mount.
# - EFS: the access point the efs-ap StorageClass creates is owned by its uid/gid parameters.
# - Filestore (NFS) shares start root-owned: the kubelet applies the pod's fsGroup (group owner,
#   g+rwx, setgid) only when the CSIDriver's fsGroupPolicy is File. The driver's deploy overlays set
#   it (kubernetes-sigs/gcp-filestore-csi-driver deploy/kubernetes/overlays/stable-master/
#   fsgrouppolicy.yaml; its base CSIDriver has none, where Kubernetes' default,
#   ReadWriteOnceWithFSType, skips RWX volumes) and GKE documents fsGroup for Filestore volumes
#   (cloud.google.com/filestore/docs/csi-driver "Use fsgroup with Filestore volumes"). The
#   ingestion Job fails with that diagnosis if /models is still not writable.
PROVISIONER_OF_BUILTIN_CLASS = {"standard-rwx": "filestore.csi.storage.gke.io"}
FSGROUP_POLICY = {"filestore.csi.storage.gke.io": "File"}


# --- compose --------------------------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose" / "docker-compose.yml").read_text())


def dockerfile_stage_env(stage: str) -> dict[str, str]:
    """ENV of one stage of compose/Dockerfile (KEY=value pairs on ENV lines, continuations joined)."""
    text = (ROOT / "compose" / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"FROM \S+ AS (\S+)", line)
        if m:
            current = m.group(1)
        elif current == stage and line.startswith("ENV "):
            env.update(dict(pair.split("=", 1) for pair in line[4:].split()))
    return env


def dockerfile_arg(name: str) -> str:
    m = re.search(rf"^ARG {name}=(\S+)", (ROOT / "compose" / "Dockerfile").read_text(), re.M)
    assert m, name
    return m.group(1)
