output "cluster_name" { value = aws_eks_cluster.main.name }
output "efs_file_system_id" { value = aws_efs_file_system.models.id }
output "ecr_registry" { value = split("/", aws_ecr_repository.image["ocr-app"].repository_url)[0] }
output "irsa_role_arns" { value = { for k, r in aws_iam_role.irsa : k => r.arn } }
output "api_endpoint" { value = aws_apigatewayv2_api.ocr.api_endpoint }
