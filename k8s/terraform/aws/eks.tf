resource "aws_eks_cluster" "main" {
  name     = var.name
  version  = var.kubernetes_version
  role_arn = aws_iam_role.cluster.arn

  vpc_config {
    subnet_ids              = aws_subnet.private[*].id
    endpoint_private_access = true
    # kubectl from the operators' network only; set to false once a bastion/VPN is in place.
    endpoint_public_access = true
    public_access_cidrs    = ["203.0.113.0/24"]
  }

  encryption_config {
    resources = ["secrets"]
    provider { key_arn = aws_kms_key.main.arn }
  }

  enabled_cluster_log_types = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
}

# One node group per tier. GPU groups scale from zero (KEDA + cluster autoscaler) and carry a
# taint: EKS does not taint GPU node groups itself, and without the taint CPU pods would land on
# (and hold) the expensive nodes. The overlay's GPU pods tolerate exactly these taints and
# select their group by eks.amazonaws.com/nodegroup; KEDA's maxReplicaCount stays within max_size.
# tests/test_k8s.py checks every pod's requests against the allocatable of its group's instance
# type (tests/k8s_manifests.py MACHINES: capacity less AL2023's kube-reserved and eviction
# threshold) and the root volume against the images each group pulls.
# GPU groups also carry k8s.amazonaws.com/accelerator, the label the cluster autoscaler's AWS
# provider reads to know a node has a GPU: without it, a new node whose device plugin has not yet
# advertised nvidia.com/gpu looks like a node that cannot run the pending pod, and the autoscaler
# starts a second one while the first boots.
locals {
  node_groups = {
    # Add-ons (CoreDNS, KEDA, the LB controller, Prometheus): small and untainted.
    system = { instance_types = ["m6i.large"], ami_type = "AL2023_x86_64_STANDARD", min = 2, max = 3, desired = 2, taint = null, disk_gb = 50, labels = {} }
    cpu    = { instance_types = ["c6i.2xlarge"], ami_type = "AL2023_x86_64_STANDARD", min = 1, max = 10, desired = 2, taint = null, disk_gb = 50, labels = {} }
    redis  = { instance_types = ["r6i.large"], ami_type = "AL2023_x86_64_STANDARD", min = 1, max = 1, desired = 1, taint = null, disk_gb = 50, labels = {} }
    # Layout: T4 16 GB. The AL2023 NVIDIA AMI ships the driver and container toolkit, not the
    # device plugin: the label is what the NVIDIA device plugin chart's default node affinity
    # selects (k8s/addons/nvidia-device-plugin-eks.yaml).
    gpu-t4 = { instance_types = ["g4dn.xlarge"], ami_type = "AL2023_x86_64_NVIDIA", min = 0, max = 4, desired = 0, taint = "t4", disk_gb = 100, labels = { "nvidia.com/gpu.present" = "true", "k8s.amazonaws.com/accelerator" = "nvidia-tesla-t4" } }
    # VLM: L40S 48 GB (p4d A100s ship only as 8-GPU nodes and are scarce); the overlay serves
    # the 48 GB profile. g6e.2xlarge, not .xlarge: vLLM requests 4 CPU / 32 GiB, which a
    # 4 vCPU / 32 GiB node cannot allocate. 150 GiB root: the vLLM image is ~28 GB unpacked.
    gpu-l40s = { instance_types = ["g6e.2xlarge"], ami_type = "AL2023_x86_64_NVIDIA", min = 0, max = 2, desired = 0, taint = "l40s", disk_gb = 150, labels = { "nvidia.com/gpu.present" = "true", "k8s.amazonaws.com/accelerator" = "nvidia-l40s" } }
  }
}

resource "aws_eks_node_group" "tier" {
  for_each        = local.node_groups
  cluster_name    = aws_eks_cluster.main.name
  node_group_name = each.key
  node_role_arn   = aws_iam_role.node.arn
  subnet_ids      = aws_subnet.private[*].id
  instance_types  = each.value.instance_types
  ami_type        = each.value.ami_type
  # Without a launch template this is the root volume; AWS's default is 20 GiB, which cannot
  # hold the GPU images.
  disk_size = each.value.disk_gb

  scaling_config {
    min_size     = each.value.min
    max_size     = each.value.max
    desired_size = each.value.desired
  }

  labels = merge({ "ocr/pool" = each.key }, each.value.labels)

  dynamic "taint" {
    for_each = each.value.taint == null ? [] : [each.value.taint]
    content {
      key    = "nvidia.com/gpu"
      value  = taint.value
      effect = "NO_SCHEDULE"
    }
  }

  lifecycle {
    ignore_changes = [scaling_config[0].desired_size]
  }
}

# IRSA: pods' service accounts assume IAM roles through the cluster's OIDC issuer.
data "tls_certificate" "oidc" {
  url = aws_eks_cluster.main.identity[0].oidc[0].issuer
}

resource "aws_iam_openid_connect_provider" "eks" {
  url             = aws_eks_cluster.main.identity[0].oidc[0].issuer
  client_id_list  = ["sts.amazonaws.com"]
  thumbprint_list = [data.tls_certificate.oidc.certificates[0].sha1_fingerprint]
}

resource "aws_eks_addon" "efs_csi" {
  cluster_name             = aws_eks_cluster.main.name
  addon_name               = "aws-efs-csi-driver"
  service_account_role_arn = aws_iam_role.irsa["efs-csi"].arn
}

# The VPC CNI enforces NetworkPolicy only with its network-policy agent switched on
# (docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html: enableNetworkPolicy in the
# add-on's configuration); without it k8s/base/networkpolicy.yaml is accepted and ignored.
resource "aws_eks_addon" "vpc_cni" {
  cluster_name         = aws_eks_cluster.main.name
  addon_name           = "vpc-cni"
  configuration_values = jsonencode({ enableNetworkPolicy = "true" })
}
