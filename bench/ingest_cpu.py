"""The ingest benchmark's diagnosis: CPU milliseconds per upload, product vs reference, in one process, no server.

On a box with few cores throughput follows CPU per request, so this says where its ratio comes
from. The product is called through Django's test client (the full middleware stack, DRF and
services.submit), the reference as a WSGI callable; both on the same body, same database and
Redis db, after warm-up. The product's profile, by cumulative CPU time, names the big parts.

Run by bench/ingest.py as ``python -m bench.ingest_cpu BODY TOKEN N`` in the stack's environment; prints one
JSON line.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time

# Parts of the product's request worth naming, by function (file:line(name) as pstats keys them).
PARTS = {
    "DRF token authentication": ("rest_framework/authentication.py", "authenticate"),
    "multipart parsing (Django)": ("django/http/multipartparser.py", "parse"),
    "probe (shared with the reference)": ("apps/jobs/documents.py", "probe"),
    "backpressure queries (ORM)": ("apps/api/throttles.py", "waiting_pages"),
    "file storage save": ("django/core/files/storage/base.py", "save"),
    "Job INSERT (ORM, in atomic)": ("django/db/models/base.py", "save"),
    "Celery send_task (message + task-sent event)": ("celery/app/base.py", "send_task"),
    "JobSerializer(job).data": ("rest_framework/serializers.py", "data"),
}


def main(argv: list[str]) -> None:
    body_path, token, n = argv[0], argv[1], int(argv[2])
    body = open(body_path, "rb").read()  # noqa: PTH123, SIM115 - read once, closed at exit
    content_type = "multipart/form-data; boundary=" + body[2 : body.index(b"\r\n")].decode()

    import django

    django.setup()
    from django.test import Client

    from bench import ingest_ref

    client = Client()

    def product() -> None:
        r = client.generic("POST", "/api/v1/jobs", body, content_type=content_type, HTTP_AUTHORIZATION=f"Token {token}")
        assert r.status_code == 202, r.content[:300]

    def reference() -> None:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/api/v1/jobs",
            "CONTENT_TYPE": content_type,
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "HTTP_AUTHORIZATION": f"Token {token}",
        }
        status = []
        ingest_ref.app(environ, lambda s, _h: status.append(s))
        assert status[0].startswith("202"), status

    def cpu_ms(fn) -> float:
        for _ in range(5):
            fn()
        t0 = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - t0) / n * 1000

    # Alternate the two, three times each, and keep the medians.
    ours, ref = [], []
    for _ in range(3):
        ours.append(cpu_ms(product))
        ref.append(cpu_ms(reference))

    profile = cProfile.Profile(time.process_time)
    profile.enable()
    for _ in range(n):
        product()
    profile.disable()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in stats.values())
    parts = {}
    for label, (path, name) in PARTS.items():
        # max, not sum: a subclass method calling super() under the same name is counted once.
        ct = max((v[3] for k, v in stats.items() if k[0].endswith(path) and k[2] == name), default=0.0)
        parts[label] = round(100 * ct / total, 1) if total else None
    print(
        json.dumps(
            {
                "product_cpu_ms": sorted(ours)[1],
                "reference_cpu_ms": sorted(ref)[1],
                "product_runs": ours,
                "reference_runs": ref,
                "product_parts_pct": parts,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
