"""Engine protocols and the plain values they exchange. Nothing here imports Django.

Coordinates are page-image pixels, origin top-left, ``(x0, y0, x1, y1)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ocrsite.vocabulary import ErrorCode

# Our label vocabulary (CDLA's, which the CPU layout model speaks); other engines map to it.
LABELS = (
    "text",
    "title",
    "figure",
    "figure_caption",
    "table",
    "table_caption",
    "header",
    "footer",
    "reference",
    "equation",
)


# Layout tasks that mean "do not send to a recognizer": ``skip`` keeps the region without text
# (pictures), ``abandon`` is page furniture (headers, footers, page numbers, asides).
NOT_READ_TASKS = ("skip", "abandon")


@dataclass(frozen=True)
class LayoutBox:
    label: str
    bbox: tuple[float, float, float, float]
    score: float = 1.0
    polygon: tuple[tuple[float, float], ...] | None = None
    order: int | None = None  # reading order when the engine knows it
    # What the layout model says to do with the box (``TASKS`` below, or ``skip`` / ``abandon``);
    # None: the recognizer decides from ``label``.
    task: str | None = None


@dataclass(frozen=True)
class TextLine:
    text: str
    bbox: tuple[float, float, float, float]
    confidence: float = 1.0


@dataclass(frozen=True)
class RegionText:
    text: str
    confidence: float | None = None
    lines: tuple[TextLine, ...] = ()
    flags: tuple[str, ...] = ()
    latency_ms: int | None = None
    # A VLM request's estimated GPU time: its latency times its share of the server while it ran
    # (1 / the requests this process had in flight, at its start and end averaged). Requests from
    # other processes share the GPU too, so with several workers per server this is an upper bound.
    gpu_ms: int | None = None
    # (code, message) when this region could not be read though the page as a whole could.
    error: tuple[str, str] | None = None
    # A table region's grid (``workers.content.tables.to_dict``): rows × columns of cells with
    # their text, box and spans.
    table: dict | None = None


@dataclass(frozen=True)
class Recognition:
    """What a recognizer returns for one page.

    ``texts[i]`` belongs to ``regions[i]`` of the call. ``extra`` holds text the recognizer found
    outside every region, as new regions, so no text is dropped because layout missed it.
    """

    texts: list[RegionText]
    extra: list[tuple[LayoutBox, RegionText]] = field(default_factory=list)
    # The page's own findings: the script it was judged to be written in (``latin``, ``cjk``,
    # ``unsupported``; None where the recognizer does not judge), and page flags such as
    # ``script:unsupported`` (``Page.flags``: the JSON, the console and /metrics show them).
    script: str | None = None
    flags: tuple[str, ...] = ()


class EngineError(Exception):
    """An engine failure with a stable code and whether retrying can help."""

    def __init__(self, code: ErrorCode, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.code = str(code)  # a plain string from here on: it is stored, logged and serialized
        self.message = message
        self.permanent = permanent


class LayoutEngine(Protocol):
    name: str

    def detect(self, images: Sequence[np.ndarray]) -> list[list[LayoutBox]]:
        """One list of boxes per image, in one batched pass where the engine can batch."""
        ...


class Recognizer(Protocol):
    name: str

    def recognize(
        self, image: np.ndarray, regions: Sequence[LayoutBox], *, cancelled: Callable[[], bool] | None = None
    ) -> Recognition:
        """Text for every region of one page image.

        ``cancelled`` is polled by recognizers whose work is long or remote: when it returns True
        they abort what is in flight and raise ``EngineError(ErrorCode.JOB_CANCELLED, permanent=True)``.
        """
        ...
