"""The ``paddle`` layout adapter.

PaddleOCR's models cannot run here (no GPU, no model hub), so the conversion and label mapping
are tested on result structures shaped exactly as PaddleOCR 3.x's ``LayoutDetection.predict``
returns them (``res.json`` → ``{"res": {"input_path", "page_index", "boxes": [{"cls_id",
"label", "score", "coordinate", "order", "polygon_points"}]}}``, checked against PaddleX 3.7.2's
``layout_analysis/processors.py``: integer coordinates, boxes listed in the model's order, ``order``
None for the labels in its ``SKIP_ORDER_LABELS``; PP-DocLayout_plus-L goes through PaddleX's
object-detection predictor and has neither ``order`` nor ``polygon_points``). The model itself
runs in ``test_real_model_on_gpu`` when OCR_PADDLE_MODEL_DIR points at weights (marked ``gpu``,
skipped otherwise). The result structures are in tests/support/paddle_results.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from apps.jobs.documents import load_image_frame
from tests.support.documents import dev_file
from tests.support.paddle_results import PLUS_L_RESULT, V3_RESULT
from workers.content.order import reading_order
from workers.engines import paddle
from workers.engines.base import LABELS, EngineError
from workers.regions import order_of


def test_v3_result_converts_with_order_polygons_and_our_labels():
    boxes = paddle.boxes_from_result(V3_RESULT)
    assert [b.label for b in boxes] == ["title", "text", "table", "text", "equation", "figure", "footer"]
    assert all(b.label in LABELS for b in boxes)
    assert [b.task for b in boxes] == ["text", "text", "table", "text", "formula", "chart", "abandon"]
    assert boxes[0].bbox == (120.0, 80.0, 980.0, 141.0)
    assert boxes[0].score == 0.9612
    assert boxes[3].polygon == ((120.0, 600.0), (540.0, 610.0), (540.0, 900.0), (120.0, 890.0))


def test_none_orders_keep_the_models_order_for_boxes_that_have_one():
    """PaddleX leaves ``order`` None on tables and charts: the page still reads in the model's
    order (numbered boxes exactly as numbered, the others where the model listed them), not in
    our XY-cut's, which would read the whole left column before the table."""
    boxes = paddle.boxes_from_result(V3_RESULT)
    assert all(b.order is not None for b in boxes)
    ranked = [boxes[i].label for i in order_of(boxes)]
    assert ranked == ["title", "text", "table", "text", "equation", "figure", "footer"]
    numbered = [i for i, item in enumerate(V3_RESULT["res"]["boxes"]) if item["order"] is not None]
    assert sorted(numbered, key=lambda i: boxes[i].order) == sorted(
        numbered, key=lambda i: V3_RESULT["res"]["boxes"][i]["order"]
    )
    xy_cut = [boxes[i].label for i in reading_order([b.bbox for b in boxes])]
    assert xy_cut != ranked  # the fixture would not tell the two apart otherwise


def test_numbered_boxes_keep_their_numbers_even_when_listed_out_of_order():
    raw = V3_RESULT["res"]["boxes"]
    shuffled = {"res": {"boxes": [raw[3], raw[2], raw[0], raw[1]]}}  # text#3, table, title#1, text#2
    boxes = paddle.boxes_from_result(shuffled)
    assert [boxes[i].label for i in order_of(boxes)] == ["title", "text", "text", "table"]


def test_result_object_as_paddlex_builds_it_is_read():
    """``predict`` yields LayoutAnalysisResult objects: dicts holding ``input_img`` and
    ``boxes`` whose ``coordinate`` are ints and ``polygon_points`` numpy arrays (PaddleX 3.7
    ``restructured_boxes``); ``.json`` is ``{"res": ...}`` with lists. Both forms convert."""

    class LayoutAnalysisResult(dict):
        @property
        def json(self):
            return {"res": {k: v for k, v in self.items() if k != "input_img"}}

    raw = LayoutAnalysisResult(
        input_path=None,
        page_index=None,
        input_img=np.zeros((1600, 1100, 3), np.uint8),
        boxes=[
            {
                "cls_id": 22,
                "label": "text",
                "score": 0.97,
                "coordinate": [120, 180, 540, 560],
                "order": 1,
                "polygon_points": np.array([[120, 180], [540, 180], [540, 560], [120, 560]]),
            }
        ],
    )
    (box,) = paddle.boxes_from_result(raw)
    assert box.bbox == (120.0, 180.0, 540.0, 560.0) and box.order == 0
    assert box.polygon == ((120.0, 180.0), (540.0, 180.0), (540.0, 560.0), (120.0, 560.0))
    assert paddle.boxes_from_result(raw.json) == [box]
    assert len(paddle.boxes_from_result(V3_RESULT["res"])) == 7


def test_plus_l_result_without_order_leaves_ordering_to_us():
    boxes = paddle.boxes_from_result(PLUS_L_RESULT)
    assert [b.label for b in boxes] == ["text", "title", "table"]  # the degenerate box is dropped
    assert all(b.order is None and b.polygon is None for b in boxes)


def test_label_map_covers_both_models_and_task_types_follow_glm_ocr():
    v3 = [
        "abstract",
        "algorithm",
        "aside_text",
        "chart",
        "content",
        "display_formula",
        "doc_title",
        "figure_title",
        "footer",
        "footer_image",
        "footnote",
        "formula_number",
        "header",
        "header_image",
        "image",
        "inline_formula",
        "number",
        "paragraph_title",
        "reference",
        "reference_content",
        "seal",
        "table",
        "text",
        "vertical_text",
        "vision_footnote",
    ]
    plus_l = [
        "paragraph_title",
        "image",
        "text",
        "number",
        "abstract",
        "content",
        "figure_table_chart_title",
        "formula",
        "table",
        "reference",
        "doc_title",
        "footnote",
        "header",
        "algorithm",
        "footer",
        "seal",
        "chart",
        "formula_number",
        "aside_text",
        "reference_content",
    ]
    for label in set(v3) | set(plus_l):
        ours, task = paddle.LABEL_MAP[label]
        assert ours in LABELS and task in ("text", "table", "formula", "chart", "skip", "abandon"), label
    assert paddle.task_of("display_formula") == "formula"
    assert paddle.task_of("table") == "table"
    assert paddle.task_of("image") == "skip"
    assert paddle.task_of("header") == "abandon"
    assert paddle.task_of("chart") == "chart"


def test_missing_weights_fail_at_build_naming_the_setting(tmp_path: Path):
    for model_dir in ("", str(tmp_path / "absent"), str(tmp_path)):  # unset, missing, empty
        with pytest.raises(EngineError) as info:
            paddle.PaddleLayoutEngine(paddle.PaddleLayoutConfig(model_dir=model_dir))
        assert info.value.permanent and info.value.code == "engine:unavailable"
        assert "OCR_PADDLE_MODEL_DIR" in info.value.message


def test_unknown_model_name_is_a_configuration_error(tmp_path: Path):
    with pytest.raises(EngineError) as info:
        paddle.PaddleLayoutEngine(paddle.PaddleLayoutConfig(model_dir=str(tmp_path), model="PP-Nope"))
    assert "OCR_PADDLE_MODEL" in info.value.message


@pytest.mark.gpu
@pytest.mark.skipif(not os.environ.get("OCR_PADDLE_MODEL_DIR"), reason="OCR_PADDLE_MODEL_DIR does not point at weights")
def test_real_model_on_gpu():
    """The real PP-DocLayoutV3 on a real scan, batched: boxes in our labels, a table-free page
    with text regions, reading order from the model."""
    image, _ = load_image_frame(dev_file("phototest.tif").read_bytes(), 0, 60_000_000)
    engine = paddle.PaddleLayoutEngine(
        paddle.PaddleLayoutConfig(
            model_dir=os.environ["OCR_PADDLE_MODEL_DIR"],
            model=os.environ.get("OCR_PADDLE_MODEL", "PP-DocLayoutV3"),
            device=os.environ.get("OCR_PADDLE_DEVICE", "gpu:0"),
        )
    )
    pages = engine.detect([image, np.ascontiguousarray(image[: image.shape[0] // 2])])
    assert len(pages) == 2
    assert any(b.label in ("text", "title") for b in pages[0])
    assert all(b.label in LABELS for page in pages for b in page)
