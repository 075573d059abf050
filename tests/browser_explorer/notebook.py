"""The explorer tour notebook, written with nbformat so the test and the docs share it."""

from __future__ import annotations

from pathlib import Path

import nbformat

from rlx_core.cli import REPO_ROOT

SMALL = '''%%rlx --target numpy,webgpu
import numpy as np
import rlx_core as rlx

_rng = np.random.default_rng(0)
W1 = (_rng.standard_normal((32, 16)) * 0.1).astype(np.float32)
W2 = (_rng.standard_normal((4, 32)) * 0.1).astype(np.float32)

def model(x):
    with rlx.block("fc1"):
        h = rlx.nn.relu(rlx.nn.linear(x, W1))
    with rlx.block("fc2"):
        return rlx.nn.softmax(rlx.nn.linear(h, W2), axis=-1)

def example_inputs():
    return (np.ones((2, 16), np.float32),)
'''

ILLEGAL = f'''%%rlx --target webgpu,numpy
import importlib.util
_spec = importlib.util.spec_from_file_location("illegal", {str(REPO_ROOT / "examples/models/illegal_f64.py")!r})
_mod = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(_mod)
model, example_inputs = _mod.model, _mod.example_inputs
'''

EXPLAIN = "x = example_inputs()[0]\n%rlx explain model(*example_inputs())"


def write_tour(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# RLX Explorer tour\nRun each cell: the explorer "
                                              "shows every IR level, dispatch and kernels."),
                nbformat.v4.new_code_cell("%load_ext rlx_explorer"),
                nbformat.v4.new_code_cell(SMALL),
                nbformat.v4.new_code_cell(ILLEGAL),
                nbformat.v4.new_code_cell(EXPLAIN)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)
    return path
