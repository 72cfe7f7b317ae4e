"""The evaluation corpus's CI gates (bench/evaluation/gates.py) on synthetic page records: each gate
fails on the page or class that breaks it, and only then."""

from __future__ import annotations

import json

from bench.evaluation import gates


def page(pid="doc/p1/200", *, cls="scan/latin", expected=0, rotation=0, status="done", flags=(), f1=0.9):
    return {
        "id": pid,
        "cls": cls,
        "expected_rotation": expected,
        "rotation": rotation,
        "status": status,
        "flags": list(flags),
        "f1": f1,
    }


def test_clean_run_passes():
    result = gates.check([page(), page("doc/p1/200-r90", expected=90, rotation=90)], {"scan/latin": {"f1": 0.9}})
    assert result.passed
    assert result.lines() == []


def test_upright_page_turned_fails_gate_1():
    result = gates.check([page("bulletin/p1/150", rotation=180, f1=0.99)], None)
    assert not result.passed
    assert [p["id"] for p in result.upright_turned] == ["bulletin/p1/150"]
    assert "gate 1" in result.lines()[0] and "bulletin/p1/150" in result.lines()[0]


def test_turned_page_found_wrong_is_not_gate_1():
    # Gate 1 is about upright pages; a turned page read the wrong way shows in the confusion matrix.
    result = gates.check([page("doc/p1/200-r90", expected=90, rotation=270, f1=0.95)], None)
    assert result.upright_turned == []


def test_page_turned_in_the_file_itself_must_come_back():
    # A source image that is itself turned 270 degrees is expected to be turned 270, not left alone.
    result = gates.check([page("deva-270/p1/native", expected=270, rotation=270)], None)
    assert result.passed


def test_low_f1_done_without_flag_fails_gate_2():
    result = gates.check([page("korean/p1/200", cls="born-digital/korean", f1=0.01)], None)
    assert [p["id"] for p in result.unflagged_low] == ["korean/p1/200"]


def test_low_f1_with_a_flag_passes_gate_2():
    for flag in ("script:unsupported", "ocr:low-confidence", "orientation:unsure"):
        assert gates.check([page(f1=0.2, flags=[flag])], None).passed


def test_failed_job_and_page_without_truth_pass_gate_2():
    assert gates.check([page(status="failed", f1=0.0, rotation=None)], None).passed
    assert gates.check([page(f1=None)], None).passed


def test_exactly_half_passes_gate_2():
    assert gates.check([page(f1=gates.LOW_F1)], None).passed


def test_class_below_baseline_fails_gate_3_beyond_tolerance_only():
    baseline = {"receipt/latin": {"f1": 0.90}}
    within = [page(cls="receipt/latin", f1=0.895)]
    below = [page(cls="receipt/latin", f1=0.88)]
    assert gates.check(within, baseline, tolerance=0.01).passed
    result = gates.check(below, baseline, tolerance=0.01)
    assert [r["cls"] for r in result.regressions] == ["receipt/latin"]
    assert "0.880 < baseline 0.900" in result.lines()[0]


def test_class_missing_from_run_fails_gate_3_and_new_class_passes():
    result = gates.check([page(cls="new/latin")], {"receipt/latin": {"f1": 0.5}})
    assert [r["cls"] for r in result.regressions] == ["receipt/latin"]
    assert result.regressions[0]["f1"] is None
    assert gates.check([page(cls="new/latin")], {}).passed


def test_class_f1_counts_only_done_pages_with_truth():
    pages = [page(f1=1.0), page(f1=0.5), page(f1=None), page(status="failed", f1=0.0)]
    assert gates.class_f1(pages) == {"scan/latin": {"f1": 0.75, "pages": 2}}


def test_baseline_reads_a_baseline_file_or_a_recorded_run(tmp_path):
    from bench.evaluation.runner import load_baseline

    recorded = tmp_path / "baseline.json"
    recorded.write_text(json.dumps({"tolerance": 0.02, "classes": {"scan/latin": {"f1": 0.9, "pages": 3}}}))
    assert load_baseline(recorded) == ({"scan/latin": {"f1": 0.9, "pages": 3}}, 0.02)
    run = tmp_path / "eval.json"
    run.write_text(json.dumps({"meta": {}, "pages": [page(f1=1.0), page(f1=0.8), page(cls="x/y", f1=None)]}))
    assert load_baseline(run) == ({"scan/latin": {"f1": 0.9, "pages": 2}}, None)


def test_declined_pages_are_not_scored_and_an_all_declined_class_passes():
    baseline = {"udhr/korean": {"f1": 0.03}, "udhr/cyrillic": {"f1": 0.02}}
    pages = [
        page("kor/p1/200", cls="udhr/korean", f1=0.0, flags=["script:unsupported"]),
        page("rus/p1/200", cls="udhr/cyrillic", f1=0.0, flags=["ocr:low-confidence"]),
    ]
    result = gates.check(pages, baseline)
    assert [r["cls"] for r in result.regressions] == ["udhr/cyrillic"]
    assert result.unflagged_low == []
    assert gates.class_f1(pages) == {"udhr/cyrillic": {"f1": 0.0, "pages": 1}}
