"""The corpus gates that fail a CI run. Pure: page records in, verdicts out (tests/unit/test_eval_gates.py).

A page record is the dict the runner writes per page (``bench.evaluation.runner``); the gates read:
``id``, ``cls`` (the class key: ``kind/script``), ``expected_rotation`` (the turn that brings the
page upright, from the manifest), ``rotation`` (what the page JSON says it turned), ``status``
(the job's: ``done`` or ``failed``), ``flags`` (the page JSON's ``flags``), ``f1`` (the page's
primary score; ``None`` where the page has no ground truth).

1. **No upright page turned**: a page whose expected rotation is 0 must come back with rotation 0.
2. **No page done below 0.5 F1 without a flag**: a page the job calls ``done`` that reads under
   ``LOW_F1`` against its truth must carry at least one page flag (``orientation:unsure``,
   ``ocr:low-confidence``, ``script:unsupported``, ...). A job that fails with an error code is
   not ``done`` and passes this gate.
3. **Per-class F1 not below the last recorded baseline**: each class's mean primary F1 over its
   scored pages may fall at most ``tolerance`` under the baseline's figure for that class. A page
   the engine declines (``script:unsupported``: issue 30 accepts a clear refusal in place of a
   reading) is not scored, so a class whose pages are all declined passes. A class absent from
   the baseline is new and passes; a baseline class with no page in the run fails (the slice lost
   pages).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

LOW_F1 = 0.5
DEFAULT_TOLERANCE = 0.01
DECLINED = "script:unsupported"


@dataclass
class GateResult:
    upright_turned: list[dict] = field(default_factory=list)
    unflagged_low: list[dict] = field(default_factory=list)
    regressions: list[dict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not (self.upright_turned or self.unflagged_low or self.regressions)

    def lines(self) -> list[str]:
        """One line per failure, naming the page or class and the figures that failed it."""
        out = [f"gate 1 (upright page turned): {p['id']} turned {p['rotation']}°" for p in self.upright_turned]
        out += [
            f"gate 2 (done below {LOW_F1} F1 without a flag): {p['id']} F1 {p['f1']:.3f}" for p in self.unflagged_low
        ]
        out += [
            f"gate 3 (class below baseline): {r['cls']} F1 {_fmt(r['f1'])} < baseline {r['baseline']:.3f}"
            f" - {r['tolerance']}"
            for r in self.regressions
        ]
        return out


def _fmt(value: float | None) -> str:
    return "absent" if value is None else f"{value:.3f}"


def scored(page: Mapping) -> bool:
    """A page counts in its class's F1 when it has ground truth and the job finished it with a
    reading (not declined as a script it cannot read)."""
    return page.get("f1") is not None and page.get("status") == "done" and DECLINED not in (page.get("flags") or ())


def class_f1(pages: Iterable[Mapping]) -> dict[str, dict]:
    """Mean primary F1 and page count per class, over scored pages."""
    sums: dict[str, list[float]] = defaultdict(list)
    for page in pages:
        if scored(page):
            sums[page["cls"]].append(float(page["f1"]))
    return {cls: {"f1": round(sum(v) / len(v), 4), "pages": len(v)} for cls, v in sorted(sums.items())}


def check(
    pages: list[Mapping], baseline: Mapping[str, Mapping] | None, tolerance: float = DEFAULT_TOLERANCE
) -> GateResult:
    """All three gates over one run's pages; ``baseline`` maps class → {"f1": ...} (None: gate 3 off)."""
    result = GateResult()
    for page in pages:
        if page.get("expected_rotation") == 0 and page.get("status") == "done" and (page.get("rotation") or 0) != 0:
            result.upright_turned.append(dict(page))
        low = page.get("status") == "done" and page.get("f1") is not None and page["f1"] < LOW_F1
        if low and not page.get("flags"):
            result.unflagged_low.append(dict(page))
    if baseline is not None:
        now = class_f1(pages)
        present = {page["cls"] for page in pages}
        for cls, base in sorted(baseline.items()):
            current = now.get(cls, {}).get("f1")
            if current is None and cls in present:
                continue  # every page of the class declined or without truth: nothing to compare
            if current is None or current < float(base["f1"]) - tolerance:
                result.regressions.append(
                    {"cls": cls, "f1": current, "baseline": float(base["f1"]), "tolerance": tolerance}
                )
    return result
