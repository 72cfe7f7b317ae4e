# Third-party images (redis, rclone) come through ECR's pull-through cache, not anonymously from
# Docker Hub: every node leaves through one NAT address, and Docker Hub's anonymous pull limit is
# per address. The overlay names them <account>.dkr.ecr.<region>.amazonaws.com/docker-hub/<repo>;
# ECR pulls from Docker Hub on the first request with the account's credentials, stored here by hand
# (`aws secretsmanager put-secret-value`, {"username": ..., "accessToken": ...}; docs/deploying.md).
resource "aws_secretsmanager_secret" "docker_hub" {
  # ECR requires this name prefix for pull-through credentials.
  name        = "ecr-pullthroughcache/${var.name}-docker-hub"
  description = "Docker Hub username and access token for ECR's pull-through cache"
}

resource "aws_ecr_pull_through_cache_rule" "docker_hub" {
  ecr_repository_prefix = "docker-hub"
  upstream_registry_url = "registry-1.docker.io"
  credential_arn        = aws_secretsmanager_secret.docker_hub.arn
}

# The first pull of an image not yet cached creates its repository and imports it: the nodes'
# read-only registry policy lacks both actions. Only under the cache's prefix.
data "aws_iam_policy_document" "node_pull_through" {
  statement {
    actions   = ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]
    resources = ["arn:aws:ecr:${var.region}:${data.aws_caller_identity.current.account_id}:repository/docker-hub/*"]
  }
}

resource "aws_iam_role_policy" "node_pull_through" {
  name   = "${var.name}-ecr-pull-through"
  role   = aws_iam_role.node.id
  policy = data.aws_iam_policy_document.node_pull_through.json
}
