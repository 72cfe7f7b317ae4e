# Azure side of the AKS deployment: the cluster with one node pool per tier (GPU pools tainted
# sku=gpunpa100 / sku=gpunpt4, as the reference deployment's managed GPU pools are), workload
# identity for the ingestion Job, ACR. API Management (the edge) applies
# k8s/overlays/aks/apim-policy.xml to an API whose backend is the internal load balancer.
terraform {
  required_version = ">= 1.6"
  required_providers {
    azurerm = { source = "hashicorp/azurerm", version = "~> 4.10" }
  }
}

provider "azurerm" {
  features {}
}

variable "name" {
  type    = string
  default = "ocr"
}

variable "location" {
  type    = string
  default = "westeurope"
}

variable "models_storage_account_id" {
  type        = string
  description = "The storage account holding the model mirror container (read by the ingestion Job)"
  default     = ""
}

resource "azurerm_resource_group" "main" {
  name     = "${var.name}-rg"
  location = var.location
}

resource "azurerm_kubernetes_cluster" "main" {
  name                      = var.name
  location                  = azurerm_resource_group.main.location
  resource_group_name       = azurerm_resource_group.main.name
  dns_prefix                = var.name
  oidc_issuer_enabled       = true
  workload_identity_enabled = true
  private_cluster_enabled   = true
  local_account_disabled    = true
  azure_policy_enabled      = true
  sku_tier                  = "Standard"
  automatic_upgrade_channel = "patch"

  # Add-ons only (CoreDNS, KEDA, monitoring): small and untainted. An ephemeral OS disk lives on
  # the VM's temp disk, which the Dsv5 sizes lack ("Ephemeral OS Disks: Not Supported"): the
  # Ddsv5 size has one (150 GiB), and the disk size fits in it (tests/test_k8s.py checks both).
  default_node_pool {
    name                         = "system"
    vm_size                      = "Standard_D4ds_v5"
    vnet_subnet_id               = azurerm_subnet.nodes.id
    auto_scaling_enabled         = true
    min_count                    = 2
    max_count                    = 3
    only_critical_addons_enabled = false
    max_pods                     = 50
    os_disk_type                 = "Ephemeral"
    os_disk_size_gb              = 100
    host_encryption_enabled      = true
  }

  identity {
    type = "SystemAssigned"
  }

  network_profile {
    network_plugin = "azure"
    network_policy = "azure"
    service_cidr   = "10.51.0.0/16"
    dns_service_ip = "10.51.0.10"
  }

  azure_active_directory_role_based_access_control {
    azure_rbac_enabled = true
  }

  key_vault_secrets_provider {
    secret_rotation_enabled = true
  }

  workload_autoscaler_profile {
    keda_enabled = true
  }

  oms_agent {
    log_analytics_workspace_id = azurerm_log_analytics_workspace.main.id
  }
}

resource "azurerm_log_analytics_workspace" "main" {
  name                = "${var.name}-logs"
  location            = azurerm_resource_group.main.location
  resource_group_name = azurerm_resource_group.main.name
  sku                 = "PerGB2018"
  retention_in_days   = 90
}

# One pool per tier. The GPU pools scale from zero and are tainted, so nothing but the pods that
# tolerate the taint AND select the pool (k8s/overlays/aks) runs there; KEDA's maxReplicaCount
# stays within max_count. AKS installs the NVIDIA driver on GPU pools but not the device plugin:
# the nvidia.com/gpu.present label is what the NVIDIA device plugin chart's default node affinity
# selects, and k8s/addons/nvidia-device-plugin-aks.yaml adds the `sku` toleration it lacks.
# os_disk "Ephemeral" needs a size with a temp disk at least disk_gb large; the A100 size's temp
# disk (64 GiB) is smaller than the vLLM image needs, so that pool takes a managed disk.
locals {
  pools = {
    cpu     = { vm_size = "Standard_D8ds_v5", min = 1, max = 10, taints = [], os_disk = "Ephemeral", disk_gb = 128, labels = { "ocr/pool" = "cpu" } }
    redis   = { vm_size = "Standard_E4ds_v5", min = 1, max = 1, taints = [], os_disk = "Ephemeral", disk_gb = 128, labels = { "ocr/pool" = "redis" } }
    gput4   = { vm_size = "Standard_NC4as_T4_v3", min = 0, max = 4, taints = ["sku=gpunpt4:NoSchedule"], os_disk = "Ephemeral", disk_gb = 128, labels = { "ocr/pool" = "gput4", "nvidia.com/gpu.present" = "true" } }
    gpua100 = { vm_size = "Standard_NC24ads_A100_v4", min = 0, max = 2, taints = ["sku=gpunpa100:NoSchedule"], os_disk = "Managed", disk_gb = 256, labels = { "ocr/pool" = "gpua100", "nvidia.com/gpu.present" = "true" } }
  }
}

resource "azurerm_kubernetes_cluster_node_pool" "tier" {
  for_each                = local.pools
  name                    = each.key
  kubernetes_cluster_id   = azurerm_kubernetes_cluster.main.id
  vm_size                 = each.value.vm_size
  vnet_subnet_id          = azurerm_subnet.nodes.id
  auto_scaling_enabled    = true
  min_count               = each.value.min
  max_count               = each.value.max
  node_taints             = each.value.taints
  node_labels             = each.value.labels
  max_pods                = 50
  os_disk_type            = each.value.os_disk
  os_disk_size_gb         = each.value.disk_gb
  host_encryption_enabled = true
}

# --- network: the nodes' subnet, the edge's subnet, and the registry's private endpoint ----------
# The registry refuses public access, so nodes pull through a private endpoint in the VNet and
# resolve <name>.azurecr.io (and its data endpoints) through the privatelink zone linked to it;
# without both, every pull fails (learn.microsoft.com/azure/container-registry/
# container-registry-private-link).
resource "azurerm_virtual_network" "main" {
  name                = "${var.name}-vnet"
  location            = azurerm_resource_group.main.location
  resource_group_name = azurerm_resource_group.main.name
  address_space       = ["10.50.0.0/16"]
}

resource "azurerm_subnet" "nodes" {
  name                 = "nodes"
  resource_group_name  = azurerm_resource_group.main.name
  virtual_network_name = azurerm_virtual_network.main.name
  address_prefixes     = ["10.50.0.0/20"]
}

resource "azurerm_subnet" "private_endpoints" {
  name                 = "private-endpoints"
  resource_group_name  = azurerm_resource_group.main.name
  virtual_network_name = azurerm_virtual_network.main.name
  address_prefixes     = ["10.50.16.0/24"]
}

# API Management (the edge) is injected here; the web NetworkPolicy admits this range only.
resource "azurerm_subnet" "edge" {
  name                 = "apim"
  resource_group_name  = azurerm_resource_group.main.name
  virtual_network_name = azurerm_virtual_network.main.name
  address_prefixes     = ["10.50.17.0/24"]
}

# Subnets keep Azure's default NSG rules (VNet and load balancer in, internet in denied); API
# Management's subnet also admits its control plane on 3443 (internal VNet mode requirement).
resource "azurerm_network_security_group" "main" {
  name                = "${var.name}-subnets"
  location            = azurerm_resource_group.main.location
  resource_group_name = azurerm_resource_group.main.name
}

resource "azurerm_network_security_group" "edge" {
  name                = "${var.name}-apim"
  location            = azurerm_resource_group.main.location
  resource_group_name = azurerm_resource_group.main.name

  security_rule {
    name                       = "apim-management"
    priority                   = 100
    direction                  = "Inbound"
    access                     = "Allow"
    protocol                   = "Tcp"
    source_port_range          = "*"
    destination_port_range     = "3443"
    source_address_prefix      = "ApiManagement"
    destination_address_prefix = "VirtualNetwork"
  }
}

resource "azurerm_subnet_network_security_group_association" "nodes" {
  subnet_id                 = azurerm_subnet.nodes.id
  network_security_group_id = azurerm_network_security_group.main.id
}

resource "azurerm_subnet_network_security_group_association" "private_endpoints" {
  subnet_id                 = azurerm_subnet.private_endpoints.id
  network_security_group_id = azurerm_network_security_group.main.id
}

resource "azurerm_subnet_network_security_group_association" "edge" {
  subnet_id                 = azurerm_subnet.edge.id
  network_security_group_id = azurerm_network_security_group.edge.id
}

# A system-assigned cluster identity gets no rights on a subnet it did not create; the internal
# load balancer needs them.
resource "azurerm_role_assignment" "aks_subnet" {
  scope                = azurerm_subnet.nodes.id
  role_definition_name = "Network Contributor"
  principal_id         = azurerm_kubernetes_cluster.main.identity[0].principal_id
}

resource "azurerm_private_dns_zone" "acr" {
  name                = "privatelink.azurecr.io"
  resource_group_name = azurerm_resource_group.main.name
}

resource "azurerm_private_dns_zone_virtual_network_link" "acr" {
  name                  = "${var.name}-acr"
  resource_group_name   = azurerm_resource_group.main.name
  private_dns_zone_name = azurerm_private_dns_zone.acr.name
  virtual_network_id    = azurerm_virtual_network.main.id
}

resource "azurerm_private_endpoint" "acr" {
  name                = "${var.name}-acr"
  location            = azurerm_resource_group.main.location
  resource_group_name = azurerm_resource_group.main.name
  subnet_id           = azurerm_subnet.private_endpoints.id

  private_service_connection {
    name                           = "${var.name}-acr"
    private_connection_resource_id = azurerm_container_registry.main.id
    subresource_names              = ["registry"]
    is_manual_connection           = false
  }

  private_dns_zone_group {
    name                 = "acr"
    private_dns_zone_ids = [azurerm_private_dns_zone.acr.id]
  }
}

# Public access off: the nodes pull through the private endpoint above.
resource "azurerm_container_registry" "main" {
  name                          = "${var.name}platform"
  resource_group_name           = azurerm_resource_group.main.name
  location                      = azurerm_resource_group.main.location
  sku                           = "Premium"
  admin_enabled                 = false
  public_network_access_enabled = false
  zone_redundancy_enabled       = true
  data_endpoint_enabled         = true
  trust_policy_enabled          = true
  retention_policy_in_days      = 7
}

# Third-party images (redis, rclone, the OpenTelemetry collector) through the registry's cache rules, not anonymously from Docker
# Hub behind the cluster's one egress address: the AKS overlay names them
# ocrplatform.azurecr.io/hub/<repo>, cached on first pull (tests/test_k8s.py matches the two).
resource "azurerm_container_registry_cache_rule" "docker_hub" {
  for_each              = { redis = "library/redis", rclone = "rclone/rclone", otelcol = "otel/opentelemetry-collector-contrib" }
  name                  = "hub-${each.key}"
  container_registry_id = azurerm_container_registry.main.id
  source_repo           = "docker.io/${each.value}"
  target_repo           = "hub/${each.value}"
}

resource "azurerm_role_assignment" "aks_pull" {
  scope                = azurerm_container_registry.main.id
  role_definition_name = "AcrPull"
  principal_id         = azurerm_kubernetes_cluster.main.kubelet_identity[0].object_id
}

# Workload identity for the ingestion Job: a user-assigned identity trusted only for the
# ocr/model-ingestion service account, allowed to read the model mirror.
resource "azurerm_user_assigned_identity" "model_ingestion" {
  name                = "${var.name}-model-ingestion"
  resource_group_name = azurerm_resource_group.main.name
  location            = azurerm_resource_group.main.location
}

resource "azurerm_federated_identity_credential" "model_ingestion" {
  name                = "model-ingestion"
  resource_group_name = azurerm_resource_group.main.name
  parent_id           = azurerm_user_assigned_identity.model_ingestion.id
  audience            = ["api://AzureADTokenExchange"]
  issuer              = azurerm_kubernetes_cluster.main.oidc_issuer_url
  subject             = "system:serviceaccount:ocr:model-ingestion"
}

resource "azurerm_role_assignment" "model_mirror_reader" {
  count                = var.models_storage_account_id == "" ? 0 : 1
  scope                = var.models_storage_account_id
  role_definition_name = "Storage Blob Data Reader"
  principal_id         = azurerm_user_assigned_identity.model_ingestion.principal_id
}

output "model_ingestion_client_id" { value = azurerm_user_assigned_identity.model_ingestion.client_id }
output "acr_login_server" { value = azurerm_container_registry.main.login_server }
