"""Cleaning what a VLM answers: loops cut, chat artefacts stripped, tables checked, grounding parsed.

Pure functions on strings, so every rule is tested without a model. Each returns the cleaned
text and the flags it raised; flags end up on ``Region.flags`` where operators can filter them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

# Flags (stable strings: operators and tests match on them).
LOOP_CUT = "loop-cut"
TRUNCATED = "truncated"
TABLE_INVALID = "table-invalid"
ARTEFACT_STRIPPED = "chat-artefact"


def clean(text: str, *, task: str, finish_reason: str | None) -> tuple[str, list[str]]:
    """The full hygiene pass for one region's answer."""
    flags: list[str] = []
    text, cut = cut_loop(text, truncated=finish_reason == "length")
    if cut:
        flags.append(LOOP_CUT)
    elif finish_reason == "length":
        # Hit max_tokens without a detectable loop: the text is real but incomplete.
        flags.append(TRUNCATED)
    stripped = strip_chat_artefacts(text)
    if stripped != text.strip():
        flags.append(ARTEFACT_STRIPPED)
    text = stripped
    if task == "formula":
        text = strip_math_delimiters(text)
    if task == "table" and text and not table_is_valid(text):
        flags.append(TABLE_INVALID)
    return text, flags


# --- repetition loops --------------------------------------------------------------------------

MAX_PERIOD = 200  # longest repeating unit looked for, in characters
MIN_SPAN = 64  # a run shorter than this is left alone (dot leaders, "| | |" rows)
MIN_REPEATS = 3


def cut_loop(text: str, *, truncated: bool = True) -> tuple[str, bool]:
    """Cut a repetition loop at the end of ``text``, keeping one copy of the repeated unit.

    Decoding loops show up at the tail (the model repeats until max_tokens). A ``truncated``
    answer may stop mid-unit, so for each period we also try dropping a partial last unit;
    an answer that ended on its own is only checked at its end (cheap: ~200 slice compares).
    """
    n = len(text)
    best: tuple[int, int] | None = None  # (start of the repeated run, period)
    for period in range(1, min(MAX_PERIOD, n // MIN_REPEATS) + 1):
        for partial in range(period if truncated else 1):
            end = n - partial
            unit = text[end - period : end]
            if not unit.strip():
                break  # whitespace runs are layout, not a loop
            k = 1
            while end - (k + 1) * period >= 0 and text[end - (k + 1) * period : end - k * period] == unit:
                k += 1
            if k >= MIN_REPEATS and k * period >= MIN_SPAN:
                start = end - k * period
                if best is None or start < best[0]:
                    best = (start, period)
                break
    if best is None:
        return text, False
    start, period = best
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1  # the run may begin mid-unit: walk back to its true start
    return text[: start + period].rstrip(), True


# --- chat artefacts ----------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)
_PREAMBLE = re.compile(
    r"^\s*(?:sure[,!.]?\s*)?(?:here\s+is|here's|below\s+is|the\s+(?:text|table|formula)\s+(?:is|reads))\b[^\n]*:\s*\n",
    re.IGNORECASE,
)
_OUTRO = re.compile(r"\n\s*(?:let me know|i hope this|feel free)[^\n]*$", re.IGNORECASE)
_MATH_DELIMS = re.compile(r"^\s*(\$\$|\\\[|\$)(.*?)(\$\$|\\\]|\$)\s*$", re.DOTALL)


def strip_chat_artefacts(text: str) -> str:
    """Remove what a chat model wraps around the answer: a preamble, code fences, an outro."""
    text = text.strip()
    text = _PREAMBLE.sub("", text, count=1)
    text = _OUTRO.sub("", text).strip()
    match = _FENCE.match(text)
    if match:
        text = match.group(1)
    return text.strip()


def strip_math_delimiters(text: str) -> str:
    """Formulas are stored as bare LaTeX; the Markdown assembler adds its own delimiters."""
    match = _MATH_DELIMS.match(text)
    return match.group(2).strip() if match else text


# --- tables ------------------------------------------------------------------------------------


class _TableChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ok = True
        self.rows = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("table", "tr", "td", "th", "thead", "tbody"):
            self.stack.append(tag)
            self.rows += tag == "tr"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("table", "tr", "td", "th", "thead", "tbody"):
            if not self.stack or self.stack[-1] != tag:
                self.ok = False
            else:
                self.stack.pop()


def table_is_valid(text: str) -> bool:
    """HTML: balanced table tags with at least one row. Markdown: a separator row and the same
    number of cells on every row. Anything else is not a table."""
    if "<table" in text.lower():
        checker = _TableChecker()
        checker.feed(text)
        checker.close()
        return checker.ok and not checker.stack and checker.rows > 0
    rows = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(rows) < 2 or not all(r.startswith("|") for r in rows):
        return False
    if not re.fullmatch(r"\|(\s*:?-{3,}:?\s*\|)+", rows[1]):
        return False
    widths = {len(r.strip("|").split("|")) for r in rows}
    return len(widths) == 1


# --- grounding (one-stage page models) ---------------------------------------------------------

_GROUNDED = re.compile(r"<\|ref\|>(.*?)<\|/ref\|><\|det\|>(.*?)<\|/det\|>", re.DOTALL)
_SPECIAL = re.compile(r"<\|[^|>]{1,32}\|>")


@dataclass(frozen=True)
class GroundedBlock:
    label: str  # as the model wrote it
    bbox: tuple[float, float, float, float]  # page pixels
    text: str


def parse_grounding(text: str, *, width: int, height: int, coord_scale: float) -> list[GroundedBlock]:
    """``<|ref|>label<|/ref|><|det|>[[x0, y0, x1, y1], ...]<|/det|>`` then the block's content,
    up to the next marker. Boxes are in the model's 0..coord_scale space; we return page
    pixels, clamped to the page. A marker whose box cannot be parsed is skipped, not fatal."""
    blocks: list[GroundedBlock] = []
    matches = list(_GROUNDED.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        content = _SPECIAL.sub("", text[m.end() : end]).strip()
        for box in _parse_boxes(m.group(2)):
            x0, y0, x1, y1 = (
                _clamp(box[0] / coord_scale * width, width),
                _clamp(box[1] / coord_scale * height, height),
                _clamp(box[2] / coord_scale * width, width),
                _clamp(box[3] / coord_scale * height, height),
            )
            if x1 <= x0 or y1 <= y0:
                continue
            blocks.append(GroundedBlock(m.group(1).strip(), (x0, y0, x1, y1), content))
            content = ""  # several boxes for one block: the text belongs to the first
    return blocks


def _parse_boxes(raw: str) -> list[tuple[float, ...]]:
    numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", raw)]
    return [tuple(numbers[i : i + 4]) for i in range(0, len(numbers) - 3, 4)]


def _clamp(value: float, limit: int) -> float:
    return round(min(max(value, 0.0), float(limit)), 1)
