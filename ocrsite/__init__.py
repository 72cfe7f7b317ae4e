"""The project: settings, URLs, the Celery app (``ocrsite.celery``) and the shared vocabulary.

Deliberately empty of imports, so the Django-free engines can import ``ocrsite.vocabulary``
without starting Celery; Django loads the Celery app when the jobs app is ready, and
``celery -A ocrsite`` finds ``ocrsite.celery`` by itself.
"""

import sys

# PyMuPDF 2.0 imports its optional companions on every ``import pymupdf``: the layout analyser
# (pymupdf.layout, an ONNX graph network, through onnxruntime) and pymupdf4llm. Nothing here calls
# them (``Page.get_layout``, ``pymupdf.to_markdown``), yet they cost each web, worker and CLI
# process ~100 MB and seconds of start-up (bench memory). A None entry makes each optional import
# raise ImportError, which pymupdf catches, going on without them.
for _optional in ("pymupdf.layout", "pymupdf4llm"):
    sys.modules.setdefault(_optional, None)
