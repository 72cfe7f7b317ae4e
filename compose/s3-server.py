"""The compose stack's S3-compatible store: moto's server on S3_HOST:S3_PORT with the app's bucket.

moto keeps objects in memory and accepts any credentials: it stands in for S3 or MinIO on a single
host and in CI, so the stack runs django-storages' S3 backend, not local disk.
"""

from __future__ import annotations

import os
import signal

import boto3
from moto.server import ThreadedMotoServer

host = os.environ.get("S3_HOST", "127.0.0.1")
port = int(os.environ.get("S3_PORT", "9000"))
# Blocked before the server thread starts, so only sigwait below sees them.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
server.start()
boto3.client(
    "s3",
    endpoint_url=f"http://{host}:{port}",
    region_name=os.environ.get("AWS_S3_REGION_NAME") or "us-east-1",
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
    aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
).create_bucket(Bucket=os.environ.get("AWS_STORAGE_BUCKET_NAME", "ocr"))
print(f"s3: moto on {host}:{port}, bucket ready", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
server.stop()
