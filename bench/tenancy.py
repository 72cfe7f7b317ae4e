"""tenancy: what one tenant's bomb costs another tenant, and how long the door takes to answer it.

The real local stack (bench/stack.py: gunicorn as in the Procfile, one worker per queue as in the
Procfile: cpu ×2, layout ×1, ocr ×1, webhooks threads), two tenants with API keys of their own.
The bystander's one-page scan is timed from POST to ``done`` on the idle stack (the baseline,
median of ``--baseline`` runs), then again while each bomb of issue 35 runs: its delay is that time
less the baseline (goal ≤ 15 s). Each bomb's own outcome is recorded: refused at the door (status,
code and the door's answer time, goal ≤ 5 s) or its job's terminal state and code, and the time
from its POST to that state. A bomb that is an ordinary document by every limit (the 5,000-frame
TIFF) is cancelled once the bystander is done, and the time to ``cancelled`` recorded. Gunicorn's
log is searched for killed or timed-out workers at the end (goal: none).

Bombs are built by tests/hostile/corpus.py at the issue's sizes (``--small`` for a quick run).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench import common, stack
from tests.hostile import corpus

TERMINAL = ("done", "failed", "cancelled")


def huge_annots_one_page(entries: int) -> Path:
    """One page whose /Annots array has ``entries`` references, written by hand to a file (the
    issue's direct upload: 24M entries held the GIL until gunicorn killed the worker)."""
    path = Path(tempfile.mkstemp(prefix="annots-", suffix=".pdf")[1])
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Annots 4 0 R >>",
        None,  # the array, streamed
        b"<< /Type /Annot /Subtype /Text /Rect [0 0 10 10] >>",
    ]
    offsets = []
    with path.open("wb") as out:
        out.write(b"%PDF-1.7\n")
        for n, body in enumerate(objects, start=1):
            offsets.append(out.tell())
            out.write(f"{n} 0 obj\n".encode())
            if body is None:
                out.write(b"[")
                chunk = b"5 0 R " * 100_000
                for _ in range(entries // 100_000):
                    out.write(chunk)
                out.write(b"]")
            else:
                out.write(body)
            out.write(b"\nendobj\n")
        xref = out.tell()
        out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
        for offset in offsets:
            out.write(f"{offset:010d} 00000 n \n".encode())
        out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return path


def _keys() -> dict[str, str]:
    script = (
        "from apps.api.models import Tenant, TenantAPIKey; "
        "[Tenant.objects.get_or_create(slug=t) for t in ('bomber', 'bystander')]; "
        "print(TenantAPIKey.objects.create_key(name='bench bomber', tenant='bomber')[1]); "
        "print(TenantAPIKey.objects.create_key(name='bench bystander', tenant='bystander')[1])"
    )
    out = subprocess.run(
        [str(stack.BIN / "python"), "manage.py", "shell", "-c", script],
        cwd=common.ROOT,
        env=stack.env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {"bomber": out[-2], "bystander": out[-1]}


class Api:
    def __init__(self, base: str, key: str) -> None:
        self.client = httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=600)

    def post(self, name: str, data: bytes) -> tuple[httpx.Response, float]:
        started = time.monotonic()
        resp = self.client.post("/api/v1/jobs", files={"file": (name, data)})
        return resp, time.monotonic() - started

    def post_direct(self, path: Path, content_type: str) -> tuple[httpx.Response, float]:
        """A direct upload: the slot, the PUT, then the job; the door's time is the last step's."""
        size = path.stat().st_size
        slot = self.client.post(
            "/api/v1/uploads", json={"filename": path.name, "size": size, "content_type": content_type}
        )
        slot.raise_for_status()
        body = slot.json()
        with path.open("rb") as fh:
            httpx.put(body["url"], content=fh, headers=body["headers"], timeout=600).raise_for_status()
        started = time.monotonic()
        resp = self.client.post("/api/v1/jobs", json={"upload": body["id"]})
        return resp, time.monotonic() - started

    def wait(self, job_id: str, timeout: float, until=TERMINAL) -> tuple[dict, float]:
        started = time.monotonic()
        while True:
            body = self.client.get(f"/api/v1/jobs/{job_id}").json()
            if body["status"] in until or time.monotonic() - started > timeout:
                return body, time.monotonic() - started
            time.sleep(0.2)

    def cancel(self, job_id: str) -> None:
        self.client.delete(f"/api/v1/jobs/{job_id}")


def _bombs(small: bool) -> list[tuple[str, Callable[[], tuple[str, bytes | Path, str]], bool]]:
    """(name, make → (upload name, bytes or a path for a direct upload, content type), cancel after)."""
    s = 10 if small else 1
    return [
        (
            "progressive JPEG, last scan ×40,000",
            lambda: ("scans.jpg", corpus.progressive_jpeg(1000, 40_000 // s), ""),
            False,
        ),
        (
            "progressive JPEG, 99 scans, 7000×7000",
            lambda: ("big-scans.jpg", corpus.progressive_jpeg(7000 // (2 if small else 1), 99), ""),
            False,
        ),
        (
            "animated WebP, 1,500 frames on 4000×4000",
            lambda: ("anim.webp", corpus.animated_webp((4000, 4000), 1500 // s), ""),
            False,
        ),
        (
            "animated WebP, 5,000 frames on 6000×6000",
            lambda: ("anim6k.webp", corpus.animated_webp((6000, 6000), 5000 // s), ""),
            False,
        ),
        (
            "TIFF, 5,000 frames (cancelled after)",
            lambda: ("frames.tif", corpus.many_frame_tiff(5000 // s, 64), ""),
            True,
        ),
        ("PDF, Form XObjects nested 5,000 deep", lambda: ("nested.pdf", corpus.nested_forms_pdf(5000), ""), False),
        (
            "PDF, 20 pages sharing a 1.6M-entry /Annots",
            lambda: ("annots.pdf", corpus.shared_annots_pdf(20, 1_600_000 // s), ""),
            False,
        ),
        (
            "direct upload, one page with a 24M-entry /Annots",
            lambda: ("annots24m.pdf", huge_annots_one_page(24_000_000 // s), "application/pdf"),
            False,
        ),
    ]


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench tenancy")
    parser.add_argument("--baseline", type=int, default=3, help="bystander runs on the idle stack (median)")
    parser.add_argument("--small", action="store_true", help="bombs at a tenth of the issue's sizes")
    parser.add_argument("--only", default="", help="comma-separated bomb numbers (1-based)")
    args = parser.parse_args(argv)
    info = common.machine()
    load_before = common.loadavg()
    stack.reset()
    stack.prepare_database()
    stack.purge_jobs()
    keys = _keys()
    port = stack.free_port()
    environ = stack.env(OCR_BACKPRESSURE_PAGES="1000000", WEB_WORKERS="2")
    procs = []
    try:
        procs.append(stack.start_web(stack.procfile_web(port), port, "tenancy-web", environ))
        procs.append(stack.start_worker(2, environ, name="tenancy-cpu", queues="cpu"))
        procs.append(stack.start_worker(1, environ, name="tenancy-layout", queues="layout"))
        procs.append(stack.start_worker(1, environ, name="tenancy-ocr", queues="ocr"))
        procs.append(stack.start_worker(2, environ, name="tenancy-webhooks", queues="webhooks"))
        base = f"http://127.0.0.1:{port}"
        bomber, bystander = Api(base, keys["bomber"]), Api(base, keys["bystander"])
        page = corpus.text_tiff(1, "Bystander")

        def one_page() -> float:
            resp, _ = bystander.post("bystander.tif", page)
            resp.raise_for_status()
            body, took = bystander.wait(resp.json()["id"], 600)
            assert body["status"] == "done", body
            return took

        one_page()  # warm-up: engines load on first use
        baseline_runs = [one_page() for _ in range(args.baseline)]
        baseline = statistics.median(baseline_runs)
        wanted = {int(n) for n in args.only.split(",") if n.strip()}
        rows = []
        for number, (label, make, cancel_after) in enumerate(_bombs(args.small), start=1):
            if wanted and number not in wanted:
                continue
            name, data, content_type = make()
            size = data.stat().st_size if isinstance(data, Path) else len(data)
            posted = time.monotonic()
            if isinstance(data, Path):
                resp, door_s = bomber.post_direct(data, content_type)
                data.unlink()
            else:
                resp, door_s = bomber.post(name, data)
            row = {"bomb": label, "bytes": size, "door_s": door_s, "door": f"{resp.status_code}"}
            if resp.status_code >= 400:
                row["door"] += f" {resp.json()['error']['code']}"
            bomb_id = resp.json()["id"] if resp.status_code in (200, 202) else None
            if bomb_id:  # the bystander sends once the bomb is being worked on
                bomber.wait(bomb_id, 60, until=("running", *TERMINAL))
            row["bystander_s"] = one_page()
            row["delay_s"] = row["bystander_s"] - baseline
            if bomb_id:
                if cancel_after:
                    cancelled_at = time.monotonic()
                    bomber.cancel(bomb_id)
                    body, _ = bomber.wait(bomb_id, 600)
                    row["bomb_end"] = f"{body['status']} (cancel answered in {time.monotonic() - cancelled_at:.1f} s)"
                else:
                    body, _ = bomber.wait(bomb_id, 900)
                    code = (body.get("error") or {}).get("code", "")
                    row["bomb_end"] = f"{body['status']} {code}".strip()
                row["bomb_s"] = time.monotonic() - posted
            else:
                row["bomb_end"], row["bomb_s"] = "refused at the door", door_s
            rows.append(row)
            print(row, flush=True)
            # The next bomb starts on an idle stack: what the last one left is cancelled and drained.
            time.sleep(1)
        web_log = procs[0].log.read_text(errors="replace")
        killed = sum(web_log.count(s) for s in ("WORKER TIMEOUT", "was sent SIGKILL", "Worker exiting"))
    finally:
        for proc in reversed(procs):
            proc.stop()
    worst_delay = max((r["delay_s"] for r in rows), default=0.0)
    worst_door = max((r["door_s"] for r in rows), default=0.0)
    extra = {
        "load average (before / after)": f"{load_before} / {common.loadavg()}",
        "stack": "gunicorn (Procfile line, WEB_WORKERS=2), workers cpu×2, layout×1, ocr×1, webhooks×2; Redis db "
        f"{stack.BROKER_URL.rsplit('/', 1)[-1]}, PostgreSQL {stack.DB_NAME}",
        "bystander": f"one 900×160 page of text (TIFF), baseline median of {args.baseline}: {baseline:.1f} s "
        f"({', '.join(f'{b:.1f}' for b in baseline_runs)})",
        "bomb sizes": "a tenth of the issue's (--small)" if args.small else "the issue's",
    }
    md = common.header("tenancy — another tenant's delay under each bomb, and the door's answer", info, extra)
    md += "\n" + common.table(
        ["bomb", "bytes", "door answer", "door s", "bystander s", "delay s", "bomb's end", "bomb s"],
        [
            [r["bomb"], r["bytes"], r["door"], r["door_s"], r["bystander_s"], r["delay_s"], r["bomb_end"], r["bomb_s"]]
            for r in rows
        ],
    )
    md += (
        f"\n\nWorst bystander delay {worst_delay:.1f} s (goal ≤ 15: {'MET' if worst_delay <= 15 else 'NOT MET'}); "
        f"slowest door answer {worst_door:.2f} s (goal ≤ 5: {'MET' if worst_door <= 5 else 'NOT MET'}); "
        f"gunicorn workers killed or timed out: {killed} (goal 0).\n"
    )
    common.report(
        "tenancy", "tenancy", md, {"machine": info, "baseline": baseline_runs, "rows": rows, "killed": killed}
    )
    return [
        {
            "bench": "tenancy",
            "measure": "another tenant's one-page delay under the worst bomb (s)",
            "ours": round(worst_delay, 1),
            "reference": round(baseline, 1),
            "goal": "≤ 15 s",
            "met": worst_delay <= 15,
        },
        {
            "bench": "tenancy",
            "measure": "the door's slowest answer to a bomb (s)",
            "ours": round(worst_door, 2),
            "reference": "",
            "goal": "≤ 5 s, no gunicorn worker killed",
            "met": worst_door <= 5 and killed == 0,
        },
    ]
