# The edge: API Gateway (HTTP API) -> VPC Link -> the internal NLB in front of web. Never a public
# load balancer. A JWT authorizer (Cognito or any OIDC issuer) rejects unauthenticated calls at
# the edge, and stage throttling caps the rate so a flood cannot queue work that scales GPUs up.
resource "aws_security_group" "vpc_link" {
  name        = "${var.name}-apigw-vpc-link"
  description = "API Gateway VPC Link to the internal NLB"
  vpc_id      = aws_vpc.main.id
  egress {
    description = "to the internal NLB"
    from_port   = 80
    to_port     = 80
    protocol    = "tcp"
    cidr_blocks = [var.vpc_cidr]
  }
}

resource "aws_apigatewayv2_vpc_link" "web" {
  name               = "${var.name}-web"
  subnet_ids         = aws_subnet.edge[*].id
  security_group_ids = [aws_security_group.vpc_link.id]
}

resource "aws_apigatewayv2_api" "ocr" {
  name          = var.name
  protocol_type = "HTTP"
}

resource "aws_apigatewayv2_authorizer" "jwt" {
  api_id           = aws_apigatewayv2_api.ocr.id
  name             = "jwt"
  authorizer_type  = "JWT"
  identity_sources = ["$request.header.Authorization"]
  jwt_configuration {
    issuer   = var.jwt_issuer
    audience = var.jwt_audience
  }
}

resource "aws_apigatewayv2_integration" "web" {
  count              = var.nlb_listener_arn == "" ? 0 : 1
  api_id             = aws_apigatewayv2_api.ocr.id
  integration_type   = "HTTP_PROXY"
  integration_method = "ANY"
  connection_type    = "VPC_LINK"
  connection_id      = aws_apigatewayv2_vpc_link.web.id
  integration_uri    = var.nlb_listener_arn
  # TLS ends here. HTTP APIs reserve X-Forwarded-* (a mapping of them is ignored) and send the
  # client's address and scheme as RFC 7239 `Forwarded: by=…;for=…;host=…;proto=https`: the EKS
  # overlay sets DJANGO_PROXY_HEADERS=forwarded, so Django reads that header from this one hop.
}

resource "aws_apigatewayv2_route" "api" {
  count              = var.nlb_listener_arn == "" ? 0 : 1
  api_id             = aws_apigatewayv2_api.ocr.id
  route_key          = "ANY /{proxy+}"
  target             = "integrations/${aws_apigatewayv2_integration.web[0].id}"
  authorization_type = "JWT"
  authorizer_id      = aws_apigatewayv2_authorizer.jwt.id
}

resource "aws_cloudwatch_log_group" "apigw" {
  name              = "/${var.name}/apigw"
  retention_in_days = 365
  kms_key_id        = aws_kms_key.main.arn
}

resource "aws_apigatewayv2_stage" "default" {
  api_id      = aws_apigatewayv2_api.ocr.id
  name        = "$default"
  auto_deploy = true
  default_route_settings {
    throttling_rate_limit  = 20
    throttling_burst_limit = 50
  }
  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.apigw.arn
    format = jsonencode({
      requestId = "$context.requestId", ip = "$context.identity.sourceIp", route = "$context.routeKey",
      status    = "$context.status", latency = "$context.responseLatency", sub = "$context.authorizer.claims.sub"
    })
  }
}
