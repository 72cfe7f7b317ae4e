"""The clients: submit with an Idempotency-Key until accepted, poll to the end and check each
result; watchers read beside them; every answer's status is counted (``Figures``)."""

from __future__ import annotations

import random
import threading
import time

import requests

from tests.chaos.documents import Doc, check_result


class Figures:
    """What the clients got: each answer's status (a 503 with its code), over the whole run and,
    by method, within the outage in progress when it came (``window``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[str, int] = {}
        self.window: str | None = None
        self.windows: dict[str, dict[str, int]] = {}
        self.last_seen: dict[str, float] = {}

    def count(self, what: str, method: str) -> None:
        with self.lock:
            self.statuses[what] = self.statuses.get(what, 0) + 1
            self.last_seen[what] = time.monotonic()
            if self.window:
                seen = self.windows.setdefault(self.window, {})
                seen[f"{method} {what}"] = seen.get(f"{method} {what}", 0) + 1


def request(session: requests.Session, figures: Figures, method: str, url: str, **kw) -> requests.Response | None:
    try:
        resp = session.request(method, url, timeout=60, **kw)
    except requests.RequestException:
        figures.count("connection-error", method)
        return None
    what = str(resp.status_code)
    if resp.status_code == 503:
        try:
            what += " " + resp.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            what += " (no error code)"
    figures.count(what, method)
    return resp


def submit(base: str, key: str, doc: Doc, figures: Figures, stop: threading.Event) -> None:
    session = requests.Session()
    headers = {"X-API-Key": key, "Idempotency-Key": doc.key}
    while not stop.is_set():
        doc.submit_tries += 1
        files = {"file": (f"doc{doc.index}.{'pdf' if doc.kind == 'pdf' else 'tif'}", doc.data)}
        resp = request(session, figures, "POST", f"{base}/api/v1/jobs", headers=headers, files=files)
        if resp is not None and resp.status_code in (200, 202):
            doc.job_id = resp.json()["id"]
            return
        if resp is not None and resp.status_code < 500 and resp.status_code != 429:
            doc.problems.append(f"submission refused: {resp.status_code} {resp.text[:200]}")
            return
        wait = float(resp.headers.get("Retry-After", 1)) if resp is not None else 1.0
        time.sleep(min(wait, 5) * random.uniform(0.5, 1.0))


def poll(base: str, key: str, docs: list[Doc], figures: Figures, deadline: float, every_s: float = 1.0) -> None:
    session = requests.Session()
    headers = {"X-API-Key": key}
    waiting = [d for d in docs if d.job_id]
    while waiting and time.monotonic() < deadline:
        doc = waiting.pop(0)
        resp = request(session, figures, "GET", f"{base}/api/v1/jobs/{doc.job_id}", headers=headers)
        if resp is not None and resp.status_code == 200 and resp.json()["status"] in ("done", "failed", "cancelled"):
            doc.status = resp.json()["status"]
            if doc.status != "done":
                doc.problems.append(f"ended {doc.status}: {resp.json().get('error')}")
                continue
            md = request(
                session, figures, "GET", f"{base}/api/v1/jobs/{doc.job_id}/result?format=markdown", headers=headers
            )
            js = request(
                session, figures, "GET", f"{base}/api/v1/jobs/{doc.job_id}/result?format=json", headers=headers
            )
            if md is None or js is None or md.status_code != 200 or js.status_code != 200:
                doc.status = ""  # try again
                waiting.append(doc)
                continue
            doc.problems += check_result(doc, md.text, js.json())
            continue
        waiting.append(doc)
        # One poll every ``every_s`` per client (the size's): the polls must not become the load.
        time.sleep(every_s if len(waiting) > 1 else 0.5)
    for doc in waiting:
        doc.problems.append("not terminal before the drain deadline")


def watcher(base: str, key: str, docs: list[Doc], figures: Figures, stop: threading.Event, seed: int) -> None:
    """A dashboard beside the clients: reads accepted jobs and the job list twice a second all
    run long, so each outage meets reads as well as submissions (the clients submit everything
    before they poll)."""
    session = requests.Session()
    headers = {"X-API-Key": key}
    rng = random.Random(seed)
    while not stop.wait(0.5):
        ids = [d.job_id for d in docs if d.job_id]
        if ids and rng.random() < 0.7:
            request(session, figures, "GET", f"{base}/api/v1/jobs/{rng.choice(ids)}", headers=headers)
        else:
            request(session, figures, "GET", f"{base}/api/v1/jobs", headers=headers)
