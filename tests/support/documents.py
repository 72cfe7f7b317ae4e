"""Where the test documents are, and where tests leave what a person may want to look at."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data" / "dev"
BUNDLED_DATA = ROOT / "tests" / "data"
ARTIFACTS = ROOT / "tests" / "artifacts"


def dev_file(name: str) -> Path:
    """A document from ../shared/data/dev, or the bundled copy when shared/ is absent."""
    for base in (SHARED_DATA, BUNDLED_DATA):
        path = base / name
        if path.exists():
            return path
    pytest.skip(f"{name} is in neither {SHARED_DATA} nor {BUNDLED_DATA}")
