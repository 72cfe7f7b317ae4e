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
    assert all(d["metadata"].get("namespace") == "ocr" for d in docs if d["kind"] not in ("Namespace", "StorageClass"))


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


def test_keda_wakes_on_one_and_sleeps_at_zero(docs):
    scaled = {d["spec"]["scaleTargetRef"]["name"]: d["spec"] for d in docs if d["kind"] == "ScaledObject"}
    assert set(scaled) == {"worker-layout", "worker-ocr", "vllm"}
    for target, spec in scaled.items():
        assert spec["minReplicaCount"] == 0, target
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
    worker = m.find(docs, "Deployment", "worker-ocr")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in worker["containers"][0]["env"]}
    attempts, base, cap = (
        int(env["OCR_MAX_ATTEMPTS"]),
        float(env["OCR_RETRY_BACKOFF_S"]),
        float(env["OCR_RETRY_BACKOFF_MAX_S"]),
    )
    # workers.retry: full jitter, uniform(0, min(cap, base * 2**(n-1))) before retry n; the mean
    # total wait is half the sum of the ceilings.
    mean_wait = sum(min(cap, base * 2 ** max(0, n - 1)) for n in range(1, attempts)) / 2
    vllm = m.find(docs, "Deployment", "vllm")["spec"]["template"]["spec"]["containers"][0]
    startup = vllm["startupProbe"]["periodSeconds"] * vllm["startupProbe"]["failureThreshold"]
    assert mean_wait >= startup, f"pages give up after ~{mean_wait:.0f}s; vLLM may take {startup}s to start"
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
        if not mounts_models or name == "Job/model-ingestion":
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
    for name in ("worker-cpu", "worker-layout", "worker-ocr"):
        spec = m.find(docs, "Deployment", name)["spec"]["template"]["spec"]
        assert spec.get("terminationGracePeriodSeconds", 30) >= 120, name


def test_each_worker_consumes_the_queue_its_scaler_watches(docs):
    queues = {}
    for name in ("worker-cpu", "worker-layout", "worker-ocr"):
        command = m.find(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]["command"]
        queues[name] = command[command.index("-Q") + 1]
    assert set(queues.values()) == {q.value for q in Queue}
    for d in docs:
        if d["kind"] == "ScaledObject":
            for t in d["spec"]["triggers"]:
                if t["type"] == "redis":
                    assert t["metadata"]["listName"] == queues[d["spec"]["scaleTargetRef"]["name"]]


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
    assert integration["request_parameters"]["overwrite:header.X-Forwarded-Proto"] == "https"
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
