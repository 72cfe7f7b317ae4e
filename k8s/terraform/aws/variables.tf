variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "name" {
  type    = string
  default = "ocr"
}

# EKS 1.35: standard support to 2027-03-27, extended to 2028-03-27 (1.31's extended support ended
# 2026-11-26). tests/test_k8s.py fails once the chosen version is within 6 months of its end.
variable "kubernetes_version" {
  type    = string
  default = "1.35"
}

variable "vpc_cidr" {
  type    = string
  default = "10.40.0.0/16"
}

variable "azs" {
  type    = list(string)
  default = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
}

# The OIDC issuer whose JWTs the API Gateway accepts (Cognito user pool or any OIDC provider).
variable "jwt_issuer" {
  type    = string
  default = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE"
}

variable "jwt_audience" {
  type    = list(string)
  default = ["ocr-api"]
}

# The listener of the internal NLB that the AWS Load Balancer Controller creates for the
# `web-internal` Service (k8s/overlays/eks). Known only after the overlay is applied:
# `aws elbv2 describe-listeners` on the NLB tagged service.k8s.aws/stack=ocr/web-internal.
variable "nlb_listener_arn" {
  type    = string
  default = ""
}

variable "models_mirror_bucket" {
  type    = string
  default = "ocr-models-mirror"
}

variable "documents_bucket" {
  type    = string
  default = "ocr-documents"
}
