"""docs/science-legalization.md is what scripts/science_legalization.py prints: the table of
every linear algebra, sparse and splatting op on every target stays true as claims change."""

from __future__ import annotations

import contextlib
import io
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_doc_is_the_generated_table() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(ROOT / "scripts" / "science_legalization.py"), run_name="__main__")
    text = out.getvalue()
    assert "| `cholesky` | `linalg.cholesky` | kernel | kernel | kernel | kernel | RLX-S002 |" in text
    assert "| `solve` | `linalg.solve` | kernel | kernel | RLX-S002 |" in text
    assert (ROOT / "docs" / "science-legalization.md").read_text() == text, (
        "regenerate: python scripts/science_legalization.py > docs/science-legalization.md")
