"""Executes the teaching notebooks 00_tour and 01_legalization_failures with a real kernel."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow  # a kernel runs each notebook (the tour compiles CNNs): run first
@pytest.mark.parametrize("name", ["00_tour", "01_legalization_failures"])
def test_notebook_executes(name, tmp_path):
    nb = nbformat.read(EXAMPLES / f"{name}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    if name == "00_tour":
        assert "compile-ready" in text and "arena peak" in text
        widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json"
                   in o.get("data", {})]
        assert len(widgets) >= 3  # explore(), %%rlx on the small model, %%rlx on MiniLM
    else:
        assert "RLX-L002" in text and "RLX-L004" in text and "fix" in text
        # the policy what-if shows kinds that move (cpu's native layer_norm and attention)
        assert "layer_norm           native -> common-IR  (moved)" in text
        assert "attention            native -> common-IR  (moved)" in text
