"""Invariants of the rendered Kubernetes manifests, each one a defect that would break a cloud.

Rendering needs kubectl and the node pools need python-hcl2: `make k8s` runs this file in
.venv-infra, where both are installed; elsewhere the tests that need them skip and say why.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from ocrsite.vocabulary import Queue
from tests import k8s_manifests as m
from workers.engines import profiles

pytestmark = pytest.mark.skipif(m.kubectl() is None, reason="kubectl not installed: run `make k8s`")

GPU_WORKLOADS = {"Deployment/worker-layout": "t4-16gb", "Deployment/vllm": None}  # None: a VLM card
SCALED_GPU = {"worker-layout", "vllm"}


@pytest.fixture(params=m.CLOUDS)
def cloud(request) -> str:
    return request.param


@pytest.fixture
def docs(cloud) -> list[dict]:
    return m.render(cloud)


@pytest.fixture
def pools(cloud):
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    return m.pools(cloud)


def test_base_lists_every_manifest():
    listed = set(yaml.safe_load((m.K8S / "base" / "kustomization.yaml").read_text())["resources"])
    present = {p.name for p in (m.K8S / "base").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


@pytest.mark.parametrize("target", m.existing_targets())
def test_every_target_renders_without_duplicates(target):
    docs = m.render(target)
    keys = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(keys) == len(set(keys))
    assert all(
        d["metadata"].get("namespace") == "ocr"
        for d in docs
        if d["kind"] not in ("Namespace", "StorageClass", "PriorityClass")
    )


def test_gpu_pods_tolerate_and_select_a_tainted_pool_of_their_card(cloud, docs, pools):
    seen = set()
    for name, spec in m.pod_specs(docs):
        if not m.gpus(spec):
            continue
        seen.add(name)
        pool = m.pool_of(cloud, spec)
        assert pool.card, f"{name} selects {pool.name}, which has no GPU"
        assert pool.taints, f"{name}'s pool {pool.name} is not tainted: CPU pods would take its nodes"
        for taint in pool.taints:
            assert m.tolerates(spec.get("tolerations", []), taint), f"{name} does not tolerate {taint}"
        wanted = GPU_WORKLOADS[name]
        if wanted:
            assert pool.card == wanted, f"{name} on {pool.card}"
        else:
            assert pool.card in ("a100-80gb", "l40s-48gb"), f"{name} on {pool.card}"
    assert seen == set(GPU_WORKLOADS)


def test_cpu_pods_stay_off_gpu_pools(cloud, docs, pools):
    gpu_taints = [t for p in pools.values() if p.card for t in p.taints]
    for name, spec in m.pod_specs(docs):
        if m.gpus(spec):
            continue
        pool = m.pool_of(cloud, spec)
        assert not pool.card and not pool.taints, f"{name} lands on {pool.name}"
        assert not any(m.tolerates(spec.get("tolerations", []), t) for t in gpu_taints), name


def test_every_gpu_pool_is_tainted(pools):
    for pool in pools.values():
        if pool.card:
            assert pool.taints, f"GPU pool {pool.name} has no taint"


def test_vllm_serves_the_profile_sized_for_its_card(cloud, docs, pools):
    deploy = m.find(docs, "Deployment", "vllm")
    spec = deploy["spec"]["template"]["spec"]
    card = m.pool_of(cloud, spec).card
    args = spec["containers"][0]["args"]
    profile = m.config(docs)["VLLM_PROFILE"]
    assert args == profiles.serve_args(profile, profiles.CARDS[card], model=args[0])
    assert args[0].startswith("/models/")
    # An 80 GB budget on a 48 GB card OOMs at start-up: the 48 GB override must be in force.
    seqs = int(args[args.index("--max-num-seqs") + 1])
    if profiles.CARDS[card] < 80:
        assert seqs == profiles.PROFILES[profile]["gpu48"]["max-num-seqs"]


def test_serve_args_cli_renders_the_same_argv(capsys):
    profiles.main(["serve-args", "glm-ocr", "--card", "l40s-48gb", "--model", "/models/GLM-OCR", "--json"])
    assert json.loads(capsys.readouterr().out) == profiles.serve_args("glm-ocr", 48, model="/models/GLM-OCR")


def test_gpu_deployments_recreate(docs):
    for name, spec in m.pod_specs(docs):
        if m.gpus(spec):
            deploy = m.find(docs, *name.split("/"))
            assert deploy["spec"]["strategy"]["type"] == "Recreate", name


# One worker Deployment per queue (ocrsite.vocabulary.Queue), named for it: the tests below read
# the tiers from the vocabulary, so a new queue is checked without editing them (the queue recipe).
WORKER_TIERS = tuple(f"worker-{q.value}" for q in Queue)

# Every tier scales to zero but worker-cpu, which keeps one replica (beat's sweep, retention, the
# re-send of lost webhooks).
FLOORS = {**dict.fromkeys(WORKER_TIERS, 0), "vllm": 0, "worker-cpu": 1}


def test_keda_wakes_on_one_and_sleeps_at_zero(docs):
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d["spec"] for d in docs if d["kind"] == "ScaledObject"}
    assert set(scaled) == set(FLOORS)
    for target, spec in scaled.items():
        assert spec["minReplicaCount"] == FLOORS[target], target
        metric = [t for t in spec["triggers"] if t["type"] != "cron"]
        assert metric, target
        for trigger in metric:
            assert m.trigger_active(trigger, 1), f"{target}: one waiting item does not wake it ({trigger})"
            assert not m.trigger_active(trigger, 0), f"{target}: never sleeps ({trigger})"
    for target in SCALED_GPU:
        crons = [t for t in scaled[target]["triggers"] if t["type"] == "cron"]
        assert crons and int(crons[0]["metadata"]["desiredReplicas"]) >= 1, f"{target} has no business-hours floor"


def test_vllm_wakes_on_durable_state_not_a_drainable_queue(docs):
    spec = m.find(docs, "ScaledObject", "vllm")["spec"]
    types = {t["type"]: t for t in spec["triggers"]}
    assert "jobs_page" in types["postgresql"]["metadata"]["query"]
    assert "vllm:num_requests_waiting" in types["prometheus"]["metadata"]["query"]
    # The ocr list is emptied by the ocr workers' 32 threads before KEDA's next poll.
    assert "redis" not in types


def test_keda_never_asks_for_more_gpu_pods_than_the_pool_has_nodes(cloud, docs, pools):
    for d in docs:
        if d["kind"] != "ScaledObject" or d["spec"]["scaleTargetRef"]["name"] not in SCALED_GPU:
            continue
        name = d["spec"]["scaleTargetRef"]["name"]
        spec = m.find(docs, "Deployment", name)["spec"]["template"]["spec"]
        pool = m.pool_of(cloud, spec)
        # One GPU per node on every GPU machine type used here, one GPU per pod.
        assert d["spec"]["maxReplicaCount"] <= pool.max_nodes, f"{name}: {d['spec']['maxReplicaCount']} > {pool.name}"


def test_ocr_worker_outlasts_a_vllm_start(docs):
    """A vLLM pod rescheduled onto a fresh node refuses connections until it is up: the ocr workers
    wait that out as overload (no page attempt spent), for longer than the pod may take to come
    back (its rollout deadline, which covers the image pull, and its startup probe window)."""
    worker = m.find(docs, "Deployment", "worker-ocr")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in worker["containers"][0]["env"]}
    deadline = float(env["VLLM_OVERLOAD_DEADLINE_S"])
    vllm = m.find(docs, "Deployment", "vllm")["spec"]
    probe = vllm["template"]["spec"]["containers"][0]["startupProbe"]
    startup = probe["periodSeconds"] * probe["failureThreshold"]
    assert deadline >= max(startup, vllm["progressDeadlineSeconds"]), (deadline, startup)
    waits = [c["name"] for c in worker.get("initContainers", [])]
    assert "wait-for-vllm" in waits


def test_vllm_has_startup_liveness_and_readiness_probes(docs):
    container = m.find(docs, "Deployment", "vllm")["spec"]["template"]["spec"]["containers"][0]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", probe


def test_no_public_load_balancer(cloud, docs):
    key, value = m.INTERNAL_LB[cloud]
    balancers = [d for d in docs if d["kind"] == "Service" and d["spec"].get("type") == "LoadBalancer"]
    assert balancers, "the edge needs an internal load balancer"
    for svc in balancers:
        assert svc["metadata"].get("annotations", {}).get(key) == value, svc["metadata"]["name"]


@pytest.mark.parametrize("target", m.existing_targets())
def test_namespace_is_default_deny(target):
    docs = m.render(target)
    deny = [
        d
        for d in docs
        if d["kind"] == "NetworkPolicy"
        and d["spec"]["podSelector"] == {}
        and set(d["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not d["spec"].get("ingress")
        and not d["spec"].get("egress")
    ]
    assert deny


@pytest.mark.parametrize("target", m.existing_targets())
def test_every_container_has_requests_and_limits(target):
    for name, spec in m.pod_specs(m.render(target)):
        for c in m.containers(spec):
            res = c.get("resources", {})
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(res.get(kind, {})), f"{name}/{c['name']} {kind}"


def test_shared_volumes_are_read_write_many_on_file_storage(cloud, docs):
    file_classes = {"aks": "ocr-azurefile", "eks": "efs", "gke": "standard-rwx"}[cloud]
    for d in docs:
        if d["kind"] == "PersistentVolumeClaim":
            assert d["spec"]["accessModes"] == ["ReadWriteMany"]
            assert d["spec"]["storageClassName"] == file_classes, d["metadata"]["name"]
    for d in docs:
        if d["kind"] == "StorageClass":
            assert d["provisioner"] in ("file.csi.azure.com", "efs.csi.aws.com")


def test_gpu_pods_wait_for_the_ingestion_marker(docs):
    job = m.find(docs, "Job", "model-ingestion")["spec"]["template"]["spec"]["containers"][0]
    script = job["args"][0]
    assert 'marker="/models/.ingested-${MODELS_VERSION}"' in script and 'mv "${marker}.tmp" "$marker"' in script
    for name, spec in m.pod_specs(docs):
        mounts_models = any(
            v.get("persistentVolumeClaim", {}).get("claimName") == "ocr-models" for v in spec["volumes"]
        )
        if not mounts_models or name.startswith("Job/model-ingestion"):
            continue
        waits = [c for c in spec.get("initContainers", []) if c["name"] == "wait-for-models"]
        assert waits and "/models/.ingested-$MODELS_VERSION" in waits[0]["command"][-1], name


def test_no_static_cloud_keys_and_workload_identity_on_the_ingestion_account(cloud, docs):
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AZURE_ACCOUNT_KEY", "AZURE_CONNECTION_STRING")
    cfg = m.config(docs)
    assert not any(k in cfg or f"{k}_FILE" in cfg for k in keys)
    for _, spec in m.pod_specs(docs):
        for c in m.containers(spec):
            assert not any(e["name"].startswith(keys) for e in c.get("env", []))
    sa = m.find(docs, "ServiceAccount", "model-ingestion")["metadata"].get("annotations", {})
    identity = {
        "aks": "azure.workload.identity/client-id",
        "eks": "eks.amazonaws.com/role-arn",
        "gke": "iam.gke.io/gcp-service-account",
    }
    assert identity[cloud] in sa
    # rclone's backend for the cloud's object store, credentials from the environment (the identity).
    job = m.find(docs, "Job", "model-ingestion")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in job["env"]}
    backend = {"aks": "azureblob", "eks": "s3", "gke": "google cloud storage"}[cloud]
    assert env["RCLONE_CONFIG_SRC_TYPE"] == backend and env["RCLONE_CONFIG_SRC_ENV_AUTH"] == "true"
    assert env["MODEL_SOURCE"].startswith("src:")


def test_web_probes_and_pod_ip(docs):
    web = m.find(docs, "Deployment", "web")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in web["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"


@pytest.mark.parametrize("target", m.existing_targets())
def test_pods_meet_the_restricted_pod_security_standard(target):
    # The namespace enforces `restricted`: a pod that misses one of these is refused at admission.
    docs = m.render(target)
    assert m.find(docs, "Namespace", "ocr")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for name, spec in m.pod_specs(docs):
        pod = spec.get("securityContext", {})
        assert pod.get("runAsNonRoot") is True and pod.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        for c in m.containers(spec):
            sc = c.get("securityContext", {})
            assert sc.get("allowPrivilegeEscalation") is False, f"{name}/{c['name']}"
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], f"{name}/{c['name']}"


@pytest.mark.parametrize("target", ["base", "local"])
def test_cloudless_targets_have_no_load_balancer(target):
    assert not [d for d in m.render(target) if d["kind"] == "Service" and d["spec"].get("type") == "LoadBalancer"]


def test_workers_get_time_to_finish_their_pages_on_scale_down(docs):
    """SIGTERM (scale-in, rollout) lets the task in hand finish (workers.drain); a grace shorter
    than what that task may take SIGKILLs it and leaves its page to the sweep. Prefork tiers are
    bounded by Celery's hard time limit; the thread-pool ocr tier (no time limits) by one vLLM
    request, since its pages waiting on vLLM are handed back at once."""
    config = m.config(docs)
    hard = int(config.get("OCR_TASK_HARD_LIMIT", 660))  # ocrsite/settings.py's default
    for name in WORKER_TIERS:
        spec = m.find(docs, "Deployment", name)["spec"]["template"]["spec"]
        command = spec["containers"][0]["command"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env", [])}
        if command[command.index("-Q") + 1] == Queue.WEBHOOKS:
            # A delivery has a total deadline (workers.webhooks), far under the task limits.
            need = float(config.get("OCR_WEBHOOK_TIMEOUT_S", 10)) + 30
        elif "threads" in command:
            need = float(env.get("VLLM_TIMEOUT_S", config.get("VLLM_TIMEOUT_S", 120))) + 30
        else:
            need = hard + 30
        assert spec.get("terminationGracePeriodSeconds", 30) >= need, (name, need)


# What each worker tier's PostgreSQL trigger must count: the pages waiting for it (apps.jobs.states
# PAGE_WAITS_FOR; a page handed back or waiting out a retry is waiting) and the pages it holds.
PAGES_OF_QUEUE = {Queue.LAYOUT.value: {"queued", "detecting"}, Queue.OCR.value: {"detected", "recognizing"}}


def test_each_worker_consumes_the_queue_its_scaler_watches(docs):
    queues = {}
    for name in WORKER_TIERS:
        command = m.find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]["command"]
        queues[name] = command[command.index("-Q") + 1]
    assert set(queues.values()) == {q.value for q in Queue}
    for d in docs:
        if d["kind"] != "ScaledObject" or d["spec"]["scaleTargetRef"]["name"] not in queues:
            continue
        queue = queues[d["spec"]["scaleTargetRef"]["name"]]
        for t in d["spec"]["triggers"]:
            if t["type"] == "postgresql" and queue in PAGES_OF_QUEUE:
                statuses = set(
                    re.findall(r"p\.status IN \(([^)]*)\)", t["metadata"]["query"])[0]
                    .replace("'", "")
                    .replace(" ", "")
                    .split(",")
                )
                assert statuses == PAGES_OF_QUEUE[queue], (queue, statuses)


def test_worker_tiers_scale_on_work_that_exists_not_on_a_redis_list(docs):
    """A Redis list omits messages delivered and not yet acknowledged, prefetched ones and retries
    held in a worker with a countdown: a pool that keeps up reads ~0 and KEDA would scale it in
    with pages mid-recognition. Every worker tier scales on PostgreSQL, the record."""
    for d in docs:
        if d["kind"] == "ScaledObject" and d["spec"]["scaleTargetRef"]["name"].startswith("worker-"):
            types = {t["type"] for t in d["spec"]["triggers"]}
            assert "redis" not in types and "postgresql" in types, (d["metadata"]["name"], types)


def test_dashboard_queries_series_the_app_exports():
    dashboard = json.loads((m.K8S / "base" / "dashboards" / "ocr-platform.json").read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    source = (m.ROOT / "apps" / "jobs" / "monitoring.py").read_text()
    exported = set(re.findall(r'MetricFamily\(\s*"(ocr_\w+)"', source))
    # Counters are exposed with _total, histograms with _bucket/_sum/_count.
    for name in set(re.findall(r"\bocr_\w+", exprs)):
        base = re.sub(r"_(total|bucket|sum|count)$", "", name)
        assert base in exported, f"the dashboard reads {name}, which the app does not export"


def test_aws_edge_authenticates_and_throttles():
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    edge = m.hcl(m.K8S / "terraform" / "aws" / "edge.tf")
    route = m.tf_resource(edge, "aws_apigatewayv2_route", "api")
    assert route["authorization_type"] == "JWT" and route["route_key"] == "ANY /{proxy+}"
    authorizer = m.tf_resource(edge, "aws_apigatewayv2_authorizer", "jwt")
    assert authorizer["authorizer_type"] == "JWT"
    integration = m.tf_resource(edge, "aws_apigatewayv2_integration", "web")
    assert integration["connection_type"] == "VPC_LINK"
    # HTTP APIs reserve X-Forwarded-*: a mapping of them does nothing, and the scheme arrives as
    # RFC 7239 Forwarded, which the EKS overlay tells Django to read (apps.api.proxy).
    reserved = [k for k in integration.get("request_parameters", {}) if "x-forwarded" in k.lower()]
    assert not reserved, reserved
    assert m.config(m.render("eks"))["DJANGO_PROXY_HEADERS"] == "forwarded"
    for cloud in ("aks", "gke"):
        assert m.config(m.render(cloud))["DJANGO_PROXY_HEADERS"] == "x-forwarded", cloud
    throttle = m.tf_resource(edge, "aws_apigatewayv2_stage", "default")["default_route_settings"][0]
    assert 0 < throttle["throttling_rate_limit"] <= 100 and throttle["throttling_burst_limit"] > 0


def test_apim_policy_validates_jwt_limits_rate_and_size():
    import xml.etree.ElementTree as ET

    inbound = ET.parse(m.K8S / "overlays" / "aks" / "apim-policy.xml").getroot().find("inbound")
    assert inbound.find("validate-jwt") is not None
    limit = inbound.find("rate-limit-by-key")
    assert (limit.get("calls"), limit.get("renewal-period")) == ("100", "60")
    conditions = " ".join(w.get("condition") for w in inbound.iter("when"))
    assert "10485760" in conditions and "Content-Length" in conditions
    proto = [h for h in inbound.iter("set-header") if h.get("name") == "X-Forwarded-Proto"]
    assert proto and proto[0].find("value").text == "https"


# --- facts the clouds enforce at run time (issue 22) ---------------------------------------------


def test_pods_fit_the_allocatable_of_their_pool(cloud, docs, pools):
    """A pod whose requests exceed its node's allocatable (capacity less kube-reserved and the
    eviction threshold: tests/k8s_manifests.py allocatable) is Pending forever, and a
    scale-from-zero group's autoscaler, which counts capacity, keeps adding nodes for it."""
    for name, spec in m.pod_specs(docs):
        pool = m.pool_of(cloud, spec)
        cpu, mem = pool.allocatable
        want_cpu, want_mem = m.pod_requests(spec)
        where = f"{name} on {pool.name} ({pool.machine}: {cpu:.2f} CPU / {mem:.1f} GiB allocatable)"
        assert want_cpu <= cpu and want_mem <= mem, f"{where} requests {want_cpu} CPU / {want_mem:.1f} GiB"
        # A memory limit beyond the node's allocatable ends in node-pressure eviction instead of
        # the container's own OOM kill.
        assert m.pod_limits(spec)[1] <= mem, f"{where}: memory limit {m.pod_limits(spec)[1]:.1f} GiB"
        assert m.gpus(spec) <= pool.gpus, f"{where} wants {m.gpus(spec)} GPUs"


def test_allocatable_rules_match_the_clouds_published_examples():
    """The reservation rules reproduce figures the clouds publish, so a typo in a tier fails here."""
    # AKS docs: 8 GB, 30 pods -> 650 MB kube-reserved + 100 Mi eviction.
    cpu, mem = m.allocatable("aks", m.Machine(8, 8), 30)
    assert round(mem + m.DAEMONSET_ALLOWANCE[1], 2) == round(8 - (20 * 30 + 50) / 1024 - 100 / 1024, 2)
    assert round(cpu + m.DAEMONSET_ALLOWANCE[0], 3) == 8 - 0.18
    # EKS/GKE CPU tiers on 4 cores: 60 + 10 + 10 = 80 m.
    assert round(m._tiered(4, m._CPU_TIERS), 3) == 0.08
    # GKE memory on 16 GiB: 1 + 0.8 + 0.8 = 2.6 GiB.
    assert round(m._tiered(16, [(4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02)]), 2) == 2.6


def test_node_root_disks_hold_the_images_they_pull(cloud, docs, pools):
    for name, spec in m.pod_specs(docs):
        pool = m.pool_of(cloud, spec)
        need = m.root_disk_needed(spec)
        assert pool.disk_gib >= need, f"{name}: {pool.name} has a {pool.disk_gib} GiB root disk, needs {need:.0f}"


def test_azure_ephemeral_os_disks_fit_a_temp_disk():
    """Ephemeral OS disks live on the VM's temp disk: sizes without one (Dsv5, Esv5) fail at
    `terraform apply`, and the OS disk must fit in it."""
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    for pool in m.aks_pools().values():
        if pool.ephemeral_os:
            temp = pool.spec.temp_disk_gib
            assert temp is not None, f"{pool.name}: {pool.machine} has no temp disk for an ephemeral OS disk"
            assert pool.disk_gib <= temp, f"{pool.name}: {pool.disk_gib} GiB OS disk > {temp} GiB temp disk"


def test_keda_reaches_redis_from_the_namespace_it_runs_in(cloud, docs):
    if cloud == "aks":
        pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
        assert m.aks_cluster()["workload_autoscaler_profile"][0]["keda_enabled"] is True
    policy = m.find(docs, "NetworkPolicy", "redis-ingress")["spec"]["ingress"]
    namespaces = {
        peer["namespaceSelector"]["matchLabels"].get("kubernetes.io/metadata.name")
        for rule in policy
        for peer in rule.get("from", [])
        if "namespaceSelector" in peer and any(p.get("port") == 6379 for p in rule.get("ports", []))
    }
    assert m.KEDA_NAMESPACE[cloud] in namespaces, f"KEDA runs in {m.KEDA_NAMESPACE[cloud]}; Redis admits {namespaces}"


def test_aks_nodes_reach_the_private_registry():
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    doc = m.hcl(m.K8S / "terraform" / "azure" / "main.tf")
    acr = m.tf_resource(doc, "azurerm_container_registry", "main")
    if acr["public_network_access_enabled"] is not False:
        return
    pe = m.tf_resource(doc, "azurerm_private_endpoint", "acr")
    conn = pe["private_service_connection"][0]
    assert conn["private_connection_resource_id"] == "${azurerm_container_registry.main.id}"
    assert conn["subresource_names"] == ["registry"]
    zone = m.tf_resource(doc, "azurerm_private_dns_zone", "acr")
    assert zone["name"] == "privatelink.azurecr.io"
    assert pe["private_dns_zone_group"][0]["private_dns_zone_ids"] == ["${azurerm_private_dns_zone.acr.id}"]
    link = m.tf_resource(doc, "azurerm_private_dns_zone_virtual_network_link", "acr")
    assert link["virtual_network_id"] == "${azurerm_virtual_network.main.id}"
    # The endpoint and every node pool are in that VNet.
    for subnet in (pe["subnet_id"], m.aks_cluster()["default_node_pool"][0]["vnet_subnet_id"]):
        name = subnet.split(".")[1]
        assert (
            m.tf_resource(doc, "azurerm_subnet", name)["virtual_network_name"] == "${azurerm_virtual_network.main.name}"
        )
    assert (
        m.tf_resource(doc, "azurerm_kubernetes_cluster_node_pool", "tier")["vnet_subnet_id"]
        == "${azurerm_subnet.nodes.id}"
    )
    # The overlay pulls from this registry.
    for d in m.render("aks"):
        for _, spec in m.pod_specs([d]):
            for c in m.containers(spec):
                if c["image"].split("/")[-1].startswith("ocr-"):
                    assert c["image"].startswith(f"{acr['name'].replace('${var.name}', 'ocr')}.azurecr.io/"), c["image"]


def test_eks_private_nodes_route_to_a_nat_gateway():
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    doc = m.hcl(m.K8S / "terraform" / "aws" / "network.tf")
    routes = m.tf_resource(doc, "aws_route_table", "private")["route"]
    assert any(r["cidr_block"] == "0.0.0.0/0" and r.get("nat_gateway_id") for r in routes)
    eks = m.hcl(m.K8S / "terraform" / "aws" / "eks.tf")
    assert m.tf_resource(eks, "aws_eks_node_group", "tier")["subnet_ids"] == "${aws_subnet.private[*].id}"


def test_gke_private_nodes_reach_every_image():
    """Private nodes reach Artifact Registry through Private Google Access only; anything else
    (docker.io/redis, rclone) needs Cloud NAT for the cluster's region."""
    commands = m.gke_commands()
    (create,) = [c for c in commands if "container clusters create" in c]
    if "--enable-private-nodes" not in create:
        return
    registry = re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev/")
    outside = {
        c["image"]
        for _, spec in m.pod_specs(m.render("gke"))
        for c in m.containers(spec)
        if not registry.match(c["image"])
    }
    if outside:
        nats = [c for c in commands if "compute routers nats create" in c]
        assert nats, f"private nodes cannot pull {sorted(outside)}: no Cloud NAT in cluster.sh"
        assert "--nat-all-subnet-ip-ranges" in nats[0] and '--region "$REGION"' in nats[0]
        routers = [c for c in commands if "compute routers create" in c]
        assert routers and "--network default" in routers[0] and "--network" not in create


def test_the_nvidia_device_plugin_lands_on_every_gpu_pool_and_no_other(cloud, pools):
    values = m.device_plugin_values(cloud)
    if cloud in m.CLOUDS_WITH_OWN_DEVICE_PLUGIN:
        assert values is None, f"{cloud} runs its own device plugin: ship no second one"
        return
    assert values is not None, (
        f"no k8s/addons/nvidia-device-plugin-{cloud}.yaml: no node would advertise nvidia.com/gpu"
    )
    for pool in pools.values():
        assert m.device_plugin_lands_on(values, pool) == bool(pool.card), pool.name


def test_read_write_many_volumes_are_writable_by_the_pods_user(cloud, docs):
    classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StorageClass"}
    claims = {
        d["metadata"]["name"]: d["spec"]["storageClassName"] for d in docs if d["kind"] == "PersistentVolumeClaim"
    }
    for name, spec in m.pod_specs(docs):
        pod = spec["securityContext"]
        writes = {
            v["persistentVolumeClaim"]["claimName"]
            for v in spec.get("volumes", [])
            if "persistentVolumeClaim" in v and not v["persistentVolumeClaim"].get("readOnly")
        }
        for claim in writes:
            sc = classes.get(claims[claim])
            provisioner = sc["provisioner"] if sc else m.PROVISIONER_OF_BUILTIN_CLASS[claims[claim]]
            where = f"{name} writes {claim} ({provisioner})"
            if provisioner == "file.csi.azure.com":
                opts = sc["mountOptions"]
                assert f"uid={pod['runAsUser']}" in opts and f"gid={pod['runAsGroup']}" in opts, where
            elif provisioner == "efs.csi.aws.com":
                p = sc["parameters"]
                assert (p["provisioningMode"], p["uid"], p["gid"]) == (
                    "efs-ap",
                    str(pod["runAsUser"]),
                    str(pod["runAsGroup"]),
                ), where
            else:
                assert m.FSGROUP_POLICY.get(provisioner) == "File", f"{where}: the driver does not apply fsGroup"
                assert pod.get("fsGroup") == pod["runAsGroup"], f"{where} without fsGroup"


def test_eks_version_is_supported_for_six_more_months():
    """EKS auto-upgrades a cluster whose version leaves extended support (1.31: 2026-11-26)."""
    import datetime

    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    # docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html (end of extended support)
    end_of_extended = {"1.33": "2027-07-29", "1.34": "2027-12-02", "1.35": "2028-03-27"}
    variables = m.hcl(m.K8S / "terraform" / "aws" / "variables.tf")["variable"]
    version = next(v["kubernetes_version"]["default"] for v in variables if "kubernetes_version" in v)
    assert version in end_of_extended, f"EKS {version}: past or unknown support window"
    left = datetime.date.fromisoformat(end_of_extended[version]) - datetime.date.today()
    assert left.days > 183, f"EKS {version} leaves extended support in {left.days} days"


def test_eks_enforces_network_policies():
    """The VPC CNI ignores NetworkPolicy unless its network-policy agent is on."""
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    addon = m.tf_resource(m.hcl(m.K8S / "terraform" / "aws" / "eks.tf"), "aws_eks_addon", "vpc_cni")
    assert addon["addon_name"] == "vpc-cni"
    # python-hcl2 leaves the jsonencode() call as text: ${jsonencode({enableNetworkPolicy = "true"})}
    assert re.search(r'enableNetworkPolicy\s*=\s*"true"', addon["configuration_values"]), addon["configuration_values"]


def test_vllm_writes_its_caches_to_volumes(docs):
    """The root filesystem is read-only: HOME, HF_HOME (set by the image) and vLLM's caches must
    point at mounted volumes."""
    spec = m.find(docs, "Deployment", "vllm")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    env = {**m.dockerfile_stage_env("vllm"), **{e["name"]: e["value"] for e in container["env"] if "value" in e}}
    mounts = [v["mountPath"] for v in container["volumeMounts"] if not v.get("readOnly")]
    for key in ("HOME", "HF_HOME", "VLLM_CACHE_ROOT", "TRITON_CACHE_DIR"):
        assert any(env[key] == p or env[key].startswith(p + "/") for p in mounts), f"{key}={env[key]} is read-only"


def test_vllm_image_is_a_cuda_12_build():
    """From v0.20.0 the unsuffixed vllm-openai tag is CUDA 13 (R580 drivers); the -cu129 build
    runs on the drivers AKS, GKE and EKS's AL2023 NVIDIA AMI install (docs/deploying.md)."""
    assert re.search(r":v[\d.]+-cu12\d$", m.dockerfile_arg("VLLM_IMAGE")), m.dockerfile_arg("VLLM_IMAGE")


# --- who may reach web and Flower (issue 25) --------------------------------------------------


def edge_ranges(target: str) -> set[str]:
    """The edge's address ranges as the infrastructure code declares them."""
    import ipaddress

    if target == "aks":
        subnet = m.tf_resource(m.hcl(m.K8S / "terraform" / "azure" / "main.tf"), "azurerm_subnet", "edge")
        return set(subnet["address_prefixes"])
    if target == "eks":
        variables = m.hcl(m.K8S / "terraform" / "aws" / "variables.tf")["variable"]
        vpc = ipaddress.ip_network(next(v["vpc_cidr"]["default"] for v in variables if "vpc_cidr" in v))
        azs = next(v["azs"]["default"] for v in variables if "azs" in v)
        subnet = m.tf_resource(m.hcl(m.K8S / "terraform" / "aws" / "network.tf"), "aws_subnet", "edge")
        assert subnet["cidr_block"] == "${cidrsubnet(var.vpc_cidr, 8, 240 + count.index)}"
        return {str(list(vpc.subnets(new_prefix=vpc.prefixlen + 8))[240 + i]) for i in range(len(azs))}
    if target == "gke":
        return {"192.0.2.0/24"}  # a placeholder that admits nobody until the operator fills it in
    return set()


@pytest.mark.parametrize("target", m.existing_targets())
def test_web_and_flower_admit_named_peers_only(target):
    if target in m.CLOUDS:
        pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    docs = m.render(target)
    assert "ingress" not in m.find(docs, "NetworkPolicy", "flower-ingress")["spec"], "Flower is port-forward only"
    blocks = set()
    for rule in m.find(docs, "NetworkPolicy", "web-ingress")["spec"]["ingress"]:
        assert rule.get("from"), f"{target}: a web ingress rule admits any source on its port"
        for peer in rule["from"]:
            if "ipBlock" in peer:
                blocks.add(peer["ipBlock"]["cidr"])
            else:
                # A namespace AND pods in it (one peer), never a whole namespace or any namespace's pods.
                assert peer.get("namespaceSelector", {}).get("matchLabels") and peer.get("podSelector", {}).get(
                    "matchLabels"
                ), peer
    assert blocks == edge_ranges(target), f"{target}: web admits {blocks}, the edge is {edge_ranges(target)}"
    if target in ("aks", "gke"):
        svc = m.find(docs, "Service", "web-internal")
        assert svc["spec"].get("externalTrafficPolicy") == "Local", "SNAT to a node address would hide the edge"


@pytest.mark.parametrize("target", m.existing_targets())
def test_flower_mounts_only_the_secrets_it_needs(target):
    spec = m.find(m.render(target), "Deployment", "flower")["spec"]["template"]["spec"]
    (secret,) = [v["secret"] for v in spec["volumes"] if "secret" in v]
    assert {i["key"] for i in secret["items"]} == {"broker-url", "flower-basic-auth"}
    config = m.config(m.render(target))
    env = {e["name"]: e["value"] for e in spec["containers"][0].get("env", [])}
    for key, path in config.items():
        if key.endswith("_FILE") and key != "CELERY_BROKER_URL_FILE":
            assert env.get(key) == "", f"Flower would read {path}, which it does not mount"


# --- compose: loopback only, vLLM behind its key, one GPU each ---------------------------------


def test_compose_listens_on_loopback_only():
    services = m.compose()["services"]
    listeners = {
        "web": lambda s: "${WEB_BIND:-127.0.0.1}:" in " ".join(s["command"]),
        "flower": lambda s: "--address=127.0.0.1" in " ".join(s["command"]),
        "redis": lambda s: "--bind 127.0.0.1" in " ".join(s["command"]),
        "vllm": lambda s: s["environment"]["VLLM_HOST"] == "127.0.0.1",
        "s3": lambda s: "S3_HOST" not in s["environment"],  # s3-server.py defaults to 127.0.0.1
        "postgres": lambda s: "POSTGRES_HOST" not in s["environment"],  # postgres-start.sh: 127.0.0.1
    }
    for name, binds_loopback in listeners.items():
        assert binds_loopback(services[name]), f"compose {name} listens beyond 127.0.0.1"
    serve = (m.ROOT / "compose" / "vllm-serve.sh").read_text()
    assert '--host "${VLLM_HOST:-127.0.0.1}"' in serve
    assert 'os.environ.get("S3_HOST", "127.0.0.1")' in (m.ROOT / "compose" / "s3-server.py").read_text()
    assert "${POSTGRES_HOST:-127.0.0.1}" in (m.ROOT / "compose" / "postgres-start.sh").read_text()


def test_compose_vllm_requires_the_key_the_workers_send():
    services = m.compose()["services"]
    vllm = services["vllm"]
    assert vllm["environment"]["VLLM_API_KEY"] == "${VLLM_API_KEY:-}"
    assert 'test -n "$$VLLM_API_KEY" ||' in vllm["entrypoint"][-1]
    for name in ("worker-ocr", "layout-gpu"):
        assert services[name]["environment"]["VLLM_API_KEY"] == "${VLLM_API_KEY:-}", name


def test_compose_gpu_services_take_different_gpus_by_default():
    services = m.compose()["services"]
    ids = [
        services[name]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"][0]
        for name in ("layout-gpu", "vllm")
    ]
    defaults = [re.search(r":-(\d+)\}", i).group(1) for i in ids]
    assert len(set(defaults)) == 2, f"layout-gpu and vLLM share GPU {defaults[0]}"


REGISTRY = {
    "aks": r"^\w+\.azurecr\.io/",
    "eks": r"^\d+\.dkr\.ecr\.[\w-]+\.amazonaws\.com/",
    "gke": r"^[a-z0-9-]+-docker\.pkg\.dev/",
}


def test_cloud_overlays_pull_every_image_from_their_registry(cloud, docs):
    """The base renames ocr-* to registry.example.internal/ocr-*: an overlay's images: entry must
    match that name, or every pod pulls from a host that does not exist. Third-party images
    (redis, rclone) come through the cloud's cache of Docker Hub, not anonymously from Docker Hub
    behind one NAT address (its pull limit is per address)."""
    for name, spec in m.pod_specs(docs):
        for c in m.containers(spec):
            assert re.match(REGISTRY[cloud], c["image"]), f"{name}/{c['name']} pulls {c['image']}"


def test_third_party_images_have_a_cache_rule_in_their_cloud():
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    third = {
        cloud: {
            c["image"]
            for _, spec in m.pod_specs(m.render(cloud))
            for c in m.containers(spec)
            if "/ocr-" not in c["image"]
        }
        for cloud in m.CLOUDS
    }
    rule = m.tf_resource(
        m.hcl(m.K8S / "terraform" / "aws" / "registry.tf"), "aws_ecr_pull_through_cache_rule", "docker_hub"
    )
    assert all(f"/{rule['ecr_repository_prefix']}/" in image for image in third["eks"]), third["eks"]
    azure = m.tf_resource(
        m.hcl(m.K8S / "terraform" / "azure" / "main.tf"), "azurerm_container_registry_cache_rule", "docker_hub"
    )
    targets = {f"hub/{repo}" for repo in azure["for_each"].values()}
    assert {i.split(".azurecr.io/")[1].rsplit(":", 1)[0] for i in third["aks"]} <= targets
    remote = [c for c in m.gke_commands() if "artifacts repositories create docker-hub" in c]
    assert remote and "--remote-docker-repo DOCKER-HUB" in remote[0]
    assert all("/docker-hub/" in image for image in third["gke"]), third["gke"]


@pytest.mark.parametrize("stage", ["vllm", "vllm-cpu"])
def test_vllm_images_render_the_profile_argv_from_what_they_copy(stage, tmp_path):
    """The vLLM images hold only the files their stage COPYs (no app, no Django): the profile
    renderer must run from those alone, as the entry point runs it."""
    import subprocess
    import sys

    text = (m.ROOT / "compose" / "Dockerfile").read_text()
    body = text.split(f" AS {stage}\n", 1)[1].split("\nFROM ", 1)[0]
    for src, dst in re.findall(r"^COPY (\S+) (/opt/ocr/\S+)$", body, re.M):
        target = tmp_path / dst.removeprefix("/opt/ocr/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((m.ROOT / src).read_bytes())
    for touched in re.findall(r"touch (/opt/ocr/\S+)", body):
        (tmp_path / touched.removeprefix("/opt/ocr/")).touch()
    out = subprocess.run(
        [sys.executable, "-E", "-s", str(tmp_path / "profiles.py"), "serve-args", "glm-ocr"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "zai-org/GLM-OCR"


# --- scale-in, upgrades, edges (issue 32) --------------------------------------------------------

APP_IMAGES = ("ocr-app", "ocr-layout-gpu")


@pytest.mark.parametrize("target", m.existing_targets())
def test_every_pod_that_uses_the_schema_waits_for_it(target):
    """A new image's pods start while the migrate Job runs: web and every worker take no request
    and no message before `migrate --check` passes (beat and flower never touch the database)."""
    for name, spec in m.pod_specs(m.render(target)):
        main = spec["containers"][0]
        uses_db = any(part in ("gunicorn", "worker") for part in main.get("command", [])) and any(
            image in main["image"] for image in APP_IMAGES
        )
        if not uses_db:
            continue
        first = spec.get("initContainers", [{}])[0]
        assert first.get("name") == "wait-for-migrations", name
        assert "migrate --check" in " ".join(first["command"]) and first["image"] == main["image"], name


@pytest.mark.parametrize("target", m.existing_targets())
def test_config_changes_roll_the_pods_that_read_it(target):
    """The ConfigMap's name carries a hash of its content and every reference uses that name: a
    changed setting is a new name in the pod template, so `kubectl apply` rolls those pods."""
    docs = m.render(target)
    (config,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("ocr-config")]
    name = config["metadata"]["name"]
    assert re.fullmatch(r"ocr-config-[a-z0-9]{10}", name), name
    refs = re.findall(r"ocr-config[\w-]*", json.dumps([d for d in docs if d["kind"] in ("Deployment", "Job")]))
    assert refs and set(refs) == {name}, set(refs)


@pytest.mark.parametrize("target", [*m.CLOUDS, "local"])
def test_jobs_are_named_by_what_they_run(target):
    """Jobs are immutable: applying a new image under the old Job's name fails. migrate is named by
    the app image's tag, model-ingestion by MODELS_VERSION."""
    docs = m.render(target)
    web = m.find(docs, "Deployment", "web")["spec"]["template"]["spec"]["containers"][0]["image"]
    migrate = m.find(docs, "Job", "migrate")
    assert migrate["metadata"]["name"] == f"migrate-{web.rsplit(':', 1)[1]}"
    assert migrate["spec"]["template"]["spec"]["containers"][0]["image"] == web
    if target != "local":
        version = m.config(docs)["MODELS_VERSION"]
        assert m.find(docs, "Job", "model-ingestion")["metadata"]["name"] == f"model-ingestion-{version}"
    for job in (d for d in docs if d["kind"] == "Job"):
        assert len(job["metadata"]["name"]) <= 63 and job["spec"].get("ttlSecondsAfterFinished"), job["metadata"][
            "name"
        ]


def test_gpu_rollouts_wait_for_their_image(docs):
    """A cold GPU node pulls the ~28 GB vLLM image (12 GB layout) before the probes begin: the
    default 600 s progress deadline marks a healthy rollout failed."""
    for name in ("vllm", "worker-layout"):
        spec = m.find(docs, "Deployment", name)["spec"]
        assert spec.get("progressDeadlineSeconds", 600) >= 1200, name


def test_eks_gpu_groups_carry_the_autoscalers_gpu_label():
    """Without k8s.amazonaws.com/accelerator the cluster autoscaler cannot tell a GPU node whose
    device plugin is still starting from one that cannot fit the pod, and starts a second."""
    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    for name, pool in m.pools("eks").items():
        if pool.gpus:
            assert pool.labels.get("k8s.amazonaws.com/accelerator"), name


def test_aks_edge_reaches_a_pinned_address_in_the_node_subnet():
    """APIM's backend is an address; the internal load balancer must own exactly it, inside the
    subnet the Service's annotation names (the VNet is 10.50.0.0/16)."""
    import ipaddress
    import xml.etree.ElementTree as ET
    from urllib.parse import urlsplit

    pytest.importorskip("hcl2", reason="python-hcl2 is in .venv-infra: run `make k8s`")
    azure = m.hcl(m.K8S / "terraform" / "azure" / "main.tf")
    svc = m.find(m.render("aks"), "Service", "web-internal")
    notes = svc["metadata"]["annotations"]
    subnet = m.tf_resource(azure, "azurerm_subnet", "nodes")
    assert notes["service.beta.kubernetes.io/azure-load-balancer-internal-subnet"] == subnet["name"]
    address = ipaddress.ip_address(notes["service.beta.kubernetes.io/azure-load-balancer-ipv4"])
    assert any(address in ipaddress.ip_network(p) for p in subnet["address_prefixes"]), address
    inbound = ET.parse(m.K8S / "overlays" / "aks" / "apim-policy.xml").getroot().find("inbound")
    backend = urlsplit(inbound.find("set-backend-service").get("base-url"))
    assert ipaddress.ip_address(backend.hostname) == address
    assert (backend.port or 80) == svc["spec"]["ports"][0]["port"]


@pytest.mark.parametrize("target", m.existing_targets())
def test_webhook_urls_the_egress_cannot_deliver_are_refused_at_the_door(target):
    """The app pods' egress NetworkPolicy lets them out to the internet on some ports only: the
    door must refuse a callback_url on any other (OCR_WEBHOOK_PORTS within them, https only)."""
    docs = m.render(target)
    egress = m.find(docs, "NetworkPolicy", "app-egress")["spec"]["egress"]
    # Rules without a `to` reach any address: those are the ports a receiver can be on.
    open_ports = {p["port"] for rule in egress if "to" not in rule for p in rule.get("ports", [])}
    config = m.config(docs)
    ports = {int(p) for p in config["OCR_WEBHOOK_PORTS"].split(",")}
    assert ports and ports <= open_ports - {5432}, (ports, open_ports)
    assert config["OCR_WEBHOOK_SCHEMES"] == "https"


def test_the_shared_vllm_cap_keeps_each_servers_batch_full(cloud, docs):
    """VLLM_GLOBAL_MAX_IN_FLIGHT bounds requests from all ocr workers together: below the server's
    --max-num-seqs it would starve continuous batching."""
    cap = int(m.config(docs)["VLLM_GLOBAL_MAX_IN_FLIGHT"])
    args = m.find(docs, "Deployment", "vllm")["spec"]["template"]["spec"]["containers"][0]["args"]
    seqs = int(args[args.index("--max-num-seqs") + 1])
    assert cap >= seqs, (cap, seqs)
