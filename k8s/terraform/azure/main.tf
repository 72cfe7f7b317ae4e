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

  # Add-ons only (CoreDNS, KEDA, monitoring): small and untainted.
  default_node_pool {
    name                         = "system"
    vm_size                      = "Standard_D4s_v5"
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
# stays within max_count.
locals {
  pools = {
    cpu     = { vm_size = "Standard_D8s_v5", min = 1, max = 10, taints = [] }
    redis   = { vm_size = "Standard_E4s_v5", min = 1, max = 1, taints = [] }
    gput4   = { vm_size = "Standard_NC4as_T4_v3", min = 0, max = 4, taints = ["sku=gpunpt4:NoSchedule"] }
    gpua100 = { vm_size = "Standard_NC24ads_A100_v4", min = 0, max = 2, taints = ["sku=gpunpa100:NoSchedule"] }
  }
}

resource "azurerm_kubernetes_cluster_node_pool" "tier" {
  for_each                = local.pools
  name                    = each.key
  kubernetes_cluster_id   = azurerm_kubernetes_cluster.main.id
  vm_size                 = each.value.vm_size
  auto_scaling_enabled    = true
  min_count               = each.value.min
  max_count               = each.value.max
  node_taints             = each.value.taints
  node_labels             = { "ocr/pool" = each.key }
  max_pods                = 50
  os_disk_type            = "Ephemeral"
  host_encryption_enabled = true
}

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
