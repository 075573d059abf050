"""The whole compile pipeline imports and runs without numpy, as in Pyodide (the JupyterLite
site compiles for the browser's WebGPU there): a pass that imported numpy at module level
broke every browser compile once (dynamic_int_linear, caught only by the slow lite tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import importlib, pkgutil, sys
sys.modules["numpy"] = None  # any `import numpy` now raises ModuleNotFoundError
import rlx_core as rlx
import rlx_core.passes, rlx_core.dispatch
for pkg in (rlx_core.passes, rlx_core.dispatch):
    for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)
from rlx_core.api import lower

def block(x, w):
    return rlx.nn.gelu(rlx.nn.softmax(x @ w, axis=-1))

hir, mir, lir, _ = lower(block, rlx.spec((4, 8)), rlx.spec((8, 8)), target="webgpu")
print("ok", len(lir.nodes) > 0, "numpy" in sys.modules and sys.modules["numpy"] is not None)
"""


def test_pipeline_lowers_for_webgpu_without_numpy() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["ok", "True", "False"], r.stdout
