"""Which way a scanned page stands, decided by reading it: a turn is made only when the page's
lines read clearly better turned, and a page whose reading does not say stays as it is, flagged.

The evidence comes from a ``LineReader`` (the CPU engine's text-line detector, its line-angle
classifier and a recogniser; ``workers.engines.cpu.orientation``):

1. **Which way lines run** (script-independent): the detected line boxes are long across the
   page (candidates 0 and 180) or long down it (90 and 270; a page of vertical CJK columns too).
   When the lines that called the axis read as nothing either way round (a table's columns of
   figures, joined by the detector into tall boxes), the other axis is read and may decide.
2. **Which end is up**: a sample of the longest lines is read both ways — as cut and turned half
   round — by the recogniser (character-weighted mean confidence) and by the line-angle
   classifier (the share of lines it calls upside down).

When neither way wins on lines across the page, the same lines are read both ways again by a
recogniser of more scripts (``LineReader.read_again``: the small full head, which has the kana the
tiny one lacks), weighted by the letters and digits it reads, and the same rule decides.

A candidate wins only when its lines read with high confidence, clearly above the other way, and
the classifier does not say otherwise (unless the reading is decisive: the classifier, trained on
Chinese and English lines, errs on some skewed sideways scans and on scripts it never saw). A recogniser that does not know the page's script (Hebrew,
Devanagari under a Latin/CJK model) reads both ways poorly, and then nothing turns: all-caps
print, receipts and other scripts have none of the ink asymmetries the earlier ink heuristic
relied on, and an upright page turned over is garbage marked done. When the evidence is weak or
split, the page keeps its orientation and carries ``PageFlag.ORIENTATION_UNSURE`` (an upright
page in a script the recogniser cannot read too: its orientation was not confirmed). A page
with no text at all (blank, a picture) is left as it is, unflagged: nothing there can be wrong.

Pure: pixels and a reader in, a decision out (numpy and OpenCV; no Django, no model files here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ocrsite.vocabulary import PageFlag

# How many lines are read each way: the longest ones (most characters per crop).
SAMPLE_LINES = 8
# A crop longer than this many times its height is cut to that (the first part of the line):
# enough characters to judge, and recognition cost stays flat on wide tables.
MAX_ASPECT = 8.0
# Lines whose sample reads under this both ways round are not lines of text that way (table
# columns the detector joined): text in any script measured here reads 0.35 or more at least one way
# (Hebrew and Devanagari under the Latin recogniser 0.48-0.74; a Chinese poster 0.35-0.41, the Hebrew
# nikud scans 0.58-0.65), and the NICS table's joined columns 0.22-0.27.
NOT_TEXT = 0.3
# A line box is "long" one way when that side is at least this many times the other.
LONG = 1.5
# Lines must run this many times more often one way than the other to call the axis.
AXIS_MAJORITY = 2.0
# A candidate wins when its lines read with at least READ_MIN confidence, READ_MARGIN above the
# other way, and the classifier calls at least CLS_AGREE of the lines that way. Measured
# (docs/rotation-and-conservation.md): upright Latin pages read 0.82-0.99 the right way and
# 0.49-0.72 upside down; Hebrew and Devanagari under the Latin recogniser read 0.48-0.74 both ways,
# and the classifier calls upright Hebrew upside down (0.69-0.88 of its lines).
READ_MIN = 0.78
READ_MARGIN = 0.15
CLS_AGREE = 0.5
# A reading this sure and this far above the other way wins even against the classifier (on a
# sideways skewed scan it called 6 of 8 lines the wrong way round while they read 0.93 vs 0.49).
READ_DECISIVE = 0.9
DECISIVE_MARGIN = 0.3
# A page in a script only an installed Tesseract model reads (``_in_script``): the way it reads
# in that script at least this surely (other_scripts.ACCEPT), and this far above the other way.
# Upside down, those models read nothing in their script (score 0); the right way the corpus's
# Declarations read 0.88-0.94, a real Hebrew scan of mixed typefaces 0.77.
IN_SCRIPT_MIN = 0.7
IN_SCRIPT_MARGIN = 0.3
IN_SCRIPT_ASPECT = 40.0
# Reading the other way is skipped when the classifier calls at least this share of the lines
# as they stand and they read at least this well (the common upright Latin page: half the cost).
CLS_CLEAR = 0.9
READ_SURE = 0.92
# Line boxes shorter than this (pixels) are noise for the check.
MIN_LINE_PX = 6


class LineReader(Protocol):
    """What the check needs from an OCR engine (``workers.engines.cpu.orientation``)."""

    def line_boxes(self, image: np.ndarray) -> np.ndarray:
        """Text-line quads (n × 4 × 2) in ``image``'s pixels (RGB)."""

    def upside_down(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """The probability that each (horizontal, RGB) line crop is upside down."""

    def read(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence) of each line crop."""

    def read_again(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence) of each line crop by a recogniser of more scripts (asked only when
        ``read`` leaves a page unsure)."""

    def read_in_script(self, crops: Sequence[np.ndarray]) -> float:
        """How surely a model of a script the other readers lack reads the crops in that script's
        letters (0: none does, or none is installed); asked only when both leave a page unsure."""


@dataclass(frozen=True)
class Orientation:
    """The clockwise turn a scan's text stands at (0 when unsure), whether the reading left it
    unsure, and the evidence: ``lines`` detected, ``sideways`` (lines run down the page),
    ``read`` (confidence of the sample read as the first candidate, then the second: 0/180 or
    90/270), ``flipped`` (the classifier's share of sample lines upside down from the first)."""

    rotation: int
    unsure: bool = False
    lines: int = 0
    sideways: bool = False
    read: tuple[float, float] = (0.0, 0.0)
    flipped: float = 0.0

    @property
    def flags(self) -> tuple[str, ...]:
        return (str(PageFlag.ORIENTATION_UNSURE),) if self.unsure else ()


def find_orientation(image: np.ndarray, reader: LineReader) -> Orientation:
    """The quarter-turn ``image``'s text stands at, confirmed by reading (see the module doc)."""
    quads = np.asarray(reader.line_boxes(image), dtype=np.float32).reshape(-1, 4, 2)
    if not len(quads):
        return Orientation(0)  # nothing to read: a blank page or a picture, nothing to turn
    w = quads[:, :, 0].max(axis=1) - quads[:, :, 0].min(axis=1)
    h = quads[:, :, 1].max(axis=1) - quads[:, :, 1].min(axis=1)
    # Which way lines run, by their total length: the detector breaks a sideways line into words,
    # some of them short enough to look like lines across the page.
    across = float(w[(w >= LONG * h) & (h >= MIN_LINE_PX)].sum())
    down = float(h[(h >= LONG * w) & (w >= MIN_LINE_PX)].sum())
    sideways = down > AXIS_MAJORITY * across
    found = _read_axis(image, quads, w, h, reader, sideways=sideways)
    if not found.unsure:
        return found
    # The other axis is read too, and kept only if it confirms a turn, where lines run both ways
    # about as much (a form, a table with sideways headers), or where the "lines" the axis was
    # called by read as nothing either way round: on a table of figures the detector joins each
    # column's numbers into one tall box (the NICS table's upright page: more length down than
    # across, read 0.22-0.27 both ways), while the few real lines across read 0.95-0.98.
    mixed = not sideways and across <= AXIS_MAJORITY * down
    if not mixed and max(found.read) >= NOT_TEXT:
        return found
    other = _read_axis(image, quads, w, h, reader, sideways=not sideways)
    return found if other.unsure else other


def _read_axis(image, quads, w, h, reader: LineReader, *, sideways: bool) -> Orientation:
    """Read the longest lines running across (or, ``sideways``, down) the page both ways round."""
    base = 90 if sideways else 0
    length, keep = (h, h >= LONG * w) if sideways else (w, w >= LONG * h)
    order = [i for i in np.argsort(-length) if keep[i] and min(w[i], h[i]) >= MIN_LINE_PX][:SAMPLE_LINES]
    if not order:  # text, but no line long enough to read: nothing confirms the page as it stands
        return Orientation(0, unsure=True, lines=len(quads), sideways=sideways)
    crops = [_line_crop(image, quads[i], base) for i in order]
    flipped = float(np.mean(np.asarray(reader.upside_down(crops)) > 0.5))
    first = _confidence(reader.read(crops))
    if not sideways and flipped <= 1 - CLS_CLEAR and first >= READ_SURE:
        return Orientation(0, lines=len(quads), read=(first, 0.0), flipped=flipped)
    turned = [np.ascontiguousarray(c[::-1, ::-1]) for c in crops]
    second = _confidence(reader.read(turned))
    found = decide(len(quads), sideways, first, second, flipped)
    if not found.unsure:
        return found
    if sideways:
        return _in_script(found, image, quads, order, reader)
    # The first recogniser may not know the page's script (the tiny model has no kana: upright
    # Japanese reads ~0.76 as it stands, ~0.48 turned): a recogniser of more scripts reads the
    # same lines both ways, counting only the letters and digits it reads (a recogniser that does
    # not know a script is sure of its spaces and commas). Not for the sideways axis: a page of
    # vertical CJK columns reads well turned a quarter, as a recogniser reads such columns, and
    # is upright as it stands.
    again = decide(
        len(quads),
        sideways,
        _confidence(reader.read_again(crops), True),
        _confidence(reader.read_again(turned), True),
        flipped,
    )
    if not again.unsure:
        return again
    return _in_script(found, image, quads, order, reader)


def _in_script(found: Orientation, image: np.ndarray, quads: np.ndarray, order, reader: LineReader) -> Orientation:
    """A page neither recogniser settles (a script both lack: Hebrew, Devanagari, Hangul, Cyrillic,
    Arabic) read both ways by the model of its script where one is installed (``read_in_script``):
    the way its lines read in that script's letters, clearly better than the other, wins. The
    line-angle classifier has no say here: trained on Chinese and English lines, it calls upright
    Hebrew upside down. No model, or no clear winner: ``found`` (unsure) stands. The sample's
    lines (``order`` of ``quads``) are cut again to IN_SCRIPT_ASPECT, not MAX_ASPECT (Tesseract
    reads a line cut through a word far less surely: upright Korean 0.63 cut at 8 heights)."""
    base = 90 if found.sideways else 0
    crops = [_line_crop(image, quads[i], base, IN_SCRIPT_ASPECT) for i in order]
    turned = [np.ascontiguousarray(c[::-1, ::-1]) for c in crops]
    first, second = reader.read_in_script(crops), reader.read_in_script(turned)
    evidence = {"lines": found.lines, "sideways": found.sideways, "read": (first, second), "flipped": found.flipped}
    if first >= IN_SCRIPT_MIN and first - second >= IN_SCRIPT_MARGIN:
        return Orientation(base, **evidence)
    if second >= IN_SCRIPT_MIN and second - first >= IN_SCRIPT_MARGIN:
        return Orientation(base + 180, **evidence)
    return found


def decide(lines: int, sideways: bool, first: float, second: float, flipped: float) -> Orientation:
    """The rule, on the evidence: ``first``/``second`` the sample's confidence read as the first
    and second candidate (0/180, or 90/270 when ``sideways``), ``flipped`` the classifier's share
    of lines upside down from the first."""
    base = 90 if sideways else 0
    evidence = {"lines": lines, "sideways": sideways, "read": (first, second), "flipped": flipped}
    if _confirmed(first, second, 1 - flipped):
        return Orientation(base, **evidence)
    if _confirmed(second, first, flipped):
        return Orientation(base + 180, **evidence)
    # Not confirmed either way (a script the recogniser does not know reads poorly both ways,
    # and the classifier's call on it is no better than a guess): the page stays as it stands.
    return Orientation(0, unsure=True, **evidence)


def _confirmed(reads: float, other: float, agree: float) -> bool:
    """A candidate whose lines read ``reads`` (``other`` the other way round), ``agree`` the
    classifier's share of lines its way: confirmed when the reading is high and clearly above
    the other way, and the classifier agrees or the reading is decisive."""
    if reads < READ_MIN or reads - other < READ_MARGIN:
        return False
    return agree >= CLS_AGREE or (reads >= READ_DECISIVE and reads - other >= DECISIVE_MARGIN)


def upright(image: np.ndarray, reader: LineReader) -> tuple[np.ndarray, Orientation]:
    """The page turned upright (unchanged when unsure), and the decision."""
    found = find_orientation(image, reader)
    return turn_upright(image, found.rotation), found


def turn_upright(image: np.ndarray, rotation: int) -> np.ndarray:
    """The image turned back by ``rotation`` clockwise degrees (counter-clockwise)."""
    return np.ascontiguousarray(np.rot90(image, rotation // 90)) if rotation % 360 else image


def _line_crop(image: np.ndarray, quad: np.ndarray, base: int, max_aspect: float = MAX_ASPECT) -> np.ndarray:
    """A line's quad (clockwise from its top-left, in the image's axes, as the detector gives it)
    cut out straight, turned so its text runs across as it would with the page turned back by
    ``base`` degrees, and cut to ``max_aspect``. Cut along the quad, not its bounding box: a skewed
    line's bounding box holds the neighbouring lines' ascenders and descenders, and the
    classifier then calls upright lines upside down."""
    import cv2

    quad = quad.astype(np.float32)
    width = int(max(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[2] - quad[3])))
    height = int(max(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2])))
    target = np.float32([[0, 0], [width, 0], [width, height], [0, height]])
    crop = cv2.warpPerspective(
        image,
        cv2.getPerspectiveTransform(quad, target),
        (max(1, width), max(1, height)),
        borderMode=cv2.BORDER_REPLICATE,
        flags=cv2.INTER_CUBIC,
    )
    if base:
        crop = np.rot90(crop, base // 90)
    limit = int(max_aspect * crop.shape[0])
    return np.ascontiguousarray(crop[:, :limit])


def _confidence(read: list[tuple[str, float]], letters: bool = False) -> float:
    """Character-weighted mean confidence of lines read (0 when nothing was read); ``letters``:
    weighted by letters and digits only."""

    def weight(text: str) -> int:
        return sum(ch.isalnum() for ch in text) if letters else len(text.strip())

    chars = sum(weight(text) for text, _ in read)
    return sum(weight(text) * score for text, score in read) / chars if chars else 0.0
