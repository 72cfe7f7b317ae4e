"""Layout results shaped exactly as PaddleOCR 3.x's ``LayoutDetection.predict`` returns them
(PaddleX 3.7), for tests of the ``paddle`` adapter and of what the stages keep from its boxes."""

from __future__ import annotations

# A two-column page as PaddleX 3.7 returns it for PP-DocLayoutV3: boxes listed in the model's
# reading order, integer coordinates (``restructured_boxes``), and ``order`` numbered only for
# labels outside PaddleX's SKIP_ORDER_LABELS: the table and the chart get None
# (``update_order_index``). The model reads the table (right column) between the two left-column
# paragraphs that refer to it, an order our XY-cut would not produce.
V3_RESULT = {
    "res": {
        "input_path": None,
        "page_index": None,
        "boxes": [
            {
                "cls_id": 6,
                "label": "doc_title",
                "score": 0.9612,
                "coordinate": [120, 80, 980, 141],
                "order": 1,
                "polygon_points": [[120, 80], [980, 80], [980, 141], [120, 141]],
            },
            {
                "cls_id": 22,
                "label": "text",
                "score": 0.9790,
                "coordinate": [120, 180, 540, 560],
                "order": 2,
                "polygon_points": [[120, 180], [540, 180], [540, 560], [120, 560]],
            },
            {
                "cls_id": 21,
                "label": "table",
                "score": 0.95,
                "coordinate": [580, 180, 1000, 560],
                "order": None,
                "polygon_points": [[580, 180], [1000, 180], [1000, 560], [580, 560]],
            },
            {
                "cls_id": 22,
                "label": "text",
                "score": 0.9871,
                "coordinate": [120, 600, 540, 900],
                "order": 3,
                "polygon_points": [[120, 600], [540, 610], [540, 900], [120, 890]],
            },
            {
                "cls_id": 5,
                "label": "display_formula",
                "score": 0.91,
                "coordinate": [580, 600, 1000, 660],
                "order": 4,
                "polygon_points": [[580, 600], [1000, 600], [1000, 660], [580, 660]],
            },
            {
                "cls_id": 3,
                "label": "chart",
                "score": 0.88,
                "coordinate": [580, 700, 1000, 900],
                "order": None,
                "polygon_points": [[580, 700], [1000, 700], [1000, 900], [580, 900]],
            },
            {
                "cls_id": 16,
                "label": "number",
                "score": 0.80,
                "coordinate": [540, 1500, 580, 1530],
                "order": 5,
                "polygon_points": [[540, 1500], [580, 1500], [580, 1530], [540, 1530]],
            },
        ],
    }
}

PLUS_L_RESULT = {
    "res": {
        "input_path": None,
        "page_index": None,
        "boxes": [
            {"cls_id": 2, "label": "text", "score": 0.97, "coordinate": [50.0, 300.0, 500.0, 400.0]},
            {"cls_id": 0, "label": "paragraph_title", "score": 0.93, "coordinate": [50.0, 240.0, 500.0, 280.0]},
            {"cls_id": 8, "label": "table", "score": 0.90, "coordinate": [50.0, 420.0, 500.0, 700.0]},
            {"cls_id": 1, "label": "image", "score": 0.85, "coordinate": [10.0, 10.0, 10.0, 50.0]},  # zero width
        ],
    }
}
