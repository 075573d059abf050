"""Executes examples/04_onnx.ipynb with a real kernel: import, run, compare, refuse, report."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow  # a kernel runs the notebook: run first (tests/conftest.py)
def test_onnx_notebook_executes(tmp_path: Path) -> None:
    nb = nbformat.read(EXAMPLES / "04_onnx.ipynb", as_version=4)
    # run from another folder than examples/ (issue 30: it read ../docs relative to the cwd)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, errors[0].get("evalue") if errors else ""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "max |rlx - onnx|" in text  # ran and compared with ONNX's reference evaluator
    assert "RLX-O003" in text and "where_nonzero (NonZero)" in text and "temperature" in text
    assert "rejected" in text and "fail" in text  # the committed report's summary
