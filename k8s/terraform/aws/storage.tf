# EFS: the ReadWriteMany volumes (model weights, media). EBS is block storage and cannot be RWX.
resource "aws_efs_file_system" "models" {
  encrypted        = true
  kms_key_id       = aws_kms_key.main.arn
  performance_mode = "generalPurpose"
  throughput_mode  = "elastic" # weights are read in bursts when GPU pods start
  tags             = { Name = "${var.name}-models" }
}

resource "aws_security_group" "efs" {
  name        = "${var.name}-efs"
  description = "NFS from the cluster's nodes only"
  vpc_id      = aws_vpc.main.id
  ingress {
    description = "NFS from the VPC"
    from_port   = 2049
    to_port     = 2049
    protocol    = "tcp"
    cidr_blocks = [var.vpc_cidr]
  }
}

resource "aws_efs_mount_target" "models" {
  count           = length(var.azs)
  file_system_id  = aws_efs_file_system.models.id
  subnet_id       = aws_subnet.private[count.index].id
  security_groups = [aws_security_group.efs.id]
}

# Images: the targets the Dockerfile builds (app, layout-gpu, vllm).
resource "aws_ecr_repository" "image" {
  for_each             = toset(["ocr-app", "ocr-layout-gpu", "ocr-vllm"])
  name                 = each.key
  image_tag_mutability = "IMMUTABLE"
  image_scanning_configuration { scan_on_push = true }
  encryption_configuration {
    encryption_type = "KMS"
    kms_key         = aws_kms_key.main.arn
  }
}
