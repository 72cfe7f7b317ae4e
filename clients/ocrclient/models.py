"""Typed views of the API's answers. Unknown fields are ignored, so a newer server does not break us."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TERMINAL = frozenset({"done", "failed", "cancelled"})


@dataclass(frozen=True)
class Progress:
    pages_done: int = 0
    pages_failed: int = 0
    pages_total: int = 0


@dataclass(frozen=True)
class JobError:
    code: str
    message: str


@dataclass(frozen=True)
class Job:
    id: str
    status: str
    filename: str = ""
    kind: str = ""
    engine: str = ""
    sha256: str = ""
    size_bytes: int = 0
    progress: Progress = field(default_factory=Progress)
    error: JobError | None = None
    created_at: str | None = None
    finished_at: str | None = None
    links: dict[str, str] = field(default_factory=dict)
    # True when the API answered a repeated Idempotency-Key with the job it already had.
    replayed: bool = False

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def from_api(cls, body: dict[str, Any], *, replayed: bool = False) -> Job:
        error = body.get("error")
        return cls(
            id=str(body["id"]),
            status=str(body["status"]),
            filename=body.get("filename") or "",
            kind=body.get("kind") or "",
            engine=body.get("engine") or "",
            sha256=body.get("sha256") or "",
            size_bytes=int(body.get("size_bytes") or 0),
            progress=Progress(**{k: int(v or 0) for k, v in (body.get("progress") or {}).items() if k in _PROGRESS}),
            error=JobError(str(error.get("code", "")), str(error.get("message", ""))) if error else None,
            created_at=body.get("created_at"),
            finished_at=body.get("finished_at"),
            links=dict(body.get("links") or {}),
            replayed=replayed,
        )


_PROGRESS = {"pages_done", "pages_failed", "pages_total"}


@dataclass(frozen=True)
class Region:
    order: int
    label: str
    bbox: tuple[float, float, float, float]
    text: str = ""
    confidence: float | None = None
    source: str = ""
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Page:
    index: int
    width: int
    height: int
    source: str
    regions: tuple[Region, ...]

    def tables(self) -> list[Region]:
        return [r for r in self.regions if r.label == "table"]


@dataclass(frozen=True)
class Document:
    """A job's JSON result: pages of regions in reading order, with boxes in page pixels."""

    pages: tuple[Page, ...]
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, body: dict[str, Any]) -> Document:
        pages = tuple(
            Page(
                index=int(p["index"]),
                width=int(p.get("width") or 0),
                height=int(p.get("height") or 0),
                source=str(p.get("source") or ""),
                regions=tuple(
                    Region(
                        order=int(r["order"]),
                        label=str(r["label"]),
                        bbox=tuple(float(v) for v in r["bbox"]),  # type: ignore[arg-type]
                        text=r.get("text") or "",
                        confidence=r.get("confidence"),
                        source=str(r.get("source") or ""),
                        flags=tuple(r.get("flags") or ()),
                    )
                    for r in p.get("regions", [])
                ),
            )
            for p in body.get("pages", [])
        )
        return cls(pages=pages, raw=body)


@dataclass
class Batch:
    """A batch (POST /api/v1/batches): its status and progress as the API reports them."""

    id: str
    status: str
    source: str = ""
    prefix: str = ""
    progress: dict[str, Any] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in ("done", "cancelled")

    @classmethod
    def from_api(cls, body: dict[str, Any]) -> Batch:
        return cls(
            id=str(body["id"]),
            status=str(body["status"]),
            source=body.get("source") or "",
            prefix=body.get("prefix") or "",
            progress=dict(body.get("progress") or {}),
            links=dict(body.get("links") or {}),
        )
