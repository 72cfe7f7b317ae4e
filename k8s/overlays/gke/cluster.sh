#!/usr/bin/env bash
# GKE cluster for k8s/overlays/gke: one node pool per tier. GKE taints GPU nodes
# nvidia.com/gpu=present:NoSchedule itself and labels them cloud.google.com/gke-accelerator;
# the overlay's GPU pods tolerate that taint and select pool + accelerator. KEDA's
# maxReplicaCount stays within each pool's --max-nodes (tests/test_k8s.py reads this file).
# Run once by the platform team: PROJECT=... REGION=... bash k8s/overlays/gke/cluster.sh
set -euo pipefail
: "${PROJECT:?set PROJECT}" "${REGION:=europe-west4}" "${ZONE:=europe-west4-a}" "${CLUSTER:=ocr}"

gcloud container clusters create "$CLUSTER" --project "$PROJECT" --zone "$ZONE" \
  --release-channel regular --enable-private-nodes --enable-ip-alias --master-ipv4-cidr 172.16.0.32/28 \
  --workload-pool "$PROJECT.svc.id.goog" --enable-dataplane-v2 --addons GcpFilestoreCsiDriver \
  --shielded-secure-boot --machine-type e2-standard-4 --num-nodes 2 --node-pool-name system

gcloud container node-pools create cpu --project "$PROJECT" --cluster "$CLUSTER" --zone "$ZONE" \
  --machine-type c3-standard-8 --enable-autoscaling --min-nodes 1 --max-nodes 10 \
  --workload-metadata GKE_METADATA

gcloud container node-pools create redis --project "$PROJECT" --cluster "$CLUSTER" --zone "$ZONE" \
  --machine-type n2-highmem-4 --enable-autoscaling --min-nodes 1 --max-nodes 1 \
  --workload-metadata GKE_METADATA

# Layout: T4. GKE installs the driver (gpu-driver-version=default) and its own NVIDIA device plugin
# (kube-system), and taints the nodes: install no second device plugin on GKE.
gcloud container node-pools create gpu-t4 --project "$PROJECT" --cluster "$CLUSTER" --zone "$ZONE" \
  --machine-type n1-standard-8 --accelerator type=nvidia-tesla-t4,count=1,gpu-driver-version=default \
  --enable-autoscaling --min-nodes 0 --max-nodes 4 --workload-metadata GKE_METADATA

# VLM: A100 80 GB (a2-ultragpu-1g), the card the base vLLM argv is sized for. A 200 GB boot disk:
# the vLLM image is ~28 GB unpacked and the node keeps its compressed layers too (tests/test_k8s.py).
# The vLLM image is pinned to its CUDA 12.9 build (compose/Dockerfile), which runs on the R535+
# drivers `default` installs (CUDA minor-version compatibility); the unsuffixed tag is CUDA 13
# and would need R580.
gcloud container node-pools create gpu-a100 --project "$PROJECT" --cluster "$CLUSTER" --zone "$ZONE" \
  --machine-type a2-ultragpu-1g --accelerator type=nvidia-a100-80gb,count=1,gpu-driver-version=default \
  --disk-size 200 \
  --enable-autoscaling --min-nodes 0 --max-nodes 2 --workload-metadata GKE_METADATA

# Third-party images (redis, rclone) through an Artifact Registry remote repository for Docker Hub
# (the overlay names them $REGION-docker.pkg.dev/$PROJECT/docker-hub/<repo>), not anonymously from
# Docker Hub behind one NAT address. Nodes read it with their default Artifact Registry access.
gcloud artifacts repositories create docker-hub --project "$PROJECT" --location "$REGION" \
  --repository-format docker --mode remote-repository --remote-docker-repo DOCKER-HUB \
  --description "Docker Hub cache for third-party images"

# Private nodes have no external addresses: without Cloud NAT they reach only Google APIs (Private
# Google Access): webhooks to receivers on the internet need NAT (images do not any more). NAT for
# every subnet range of the cluster's network in its region (tests/test_k8s.py checks it exists
# whenever an image of the gke overlay is outside Artifact Registry).
gcloud compute routers create "$CLUSTER-nat" --project "$PROJECT" --network default --region "$REGION"
gcloud compute routers nats create "$CLUSTER-nat" --project "$PROJECT" --router "$CLUSTER-nat" --region "$REGION" \
  --auto-allocate-nat-external-ips --nat-all-subnet-ip-ranges
