"""The public API the JupyterLite site's notebooks use, checked here on CPython: numpy-free
weights (``array.array``, shaped memoryviews), ``await exe.run_async(...)``, ``rlx.init_webgpu``
outside a browser, and the explorer shown without anywidget (Pyodide's kernel has none)."""

from __future__ import annotations

import asyncio
import math
import sys
from array import array

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt


def _shaped(kind: str, rows: int, cols: int) -> memoryview:
    vals = array(kind, [math.sin(0.3 * i) for i in range(rows * cols)])
    return memoryview(vals).cast("B").cast(kind, (rows, cols))


def test_memoryview_weight_is_a_parameter_of_its_buffer_dtype() -> None:
    table = _shaped("d", 100, 8)
    hir = rlx.trace(lambda ids: rlx.take(table, ids, axis=0), rlx.spec((5,), "i32"))
    (p,) = hir.params
    assert p.type.dtype == dt.f64 and p.type.shape == (100, 8)
    assert p.name == "table"  # named after the closed-over variable, as numpy weights are


def test_small_numpy_free_arrays_are_inline_constants() -> None:
    w = array("f", [0.5, -1.0, 2.0])
    small = _shaped("f", 2, 3)
    hir = rlx.trace(lambda x: x * w + small, rlx.spec((2, 3)))
    consts = [n for n in hir.nodes if n.op == "constant"]
    assert {n.out.type.shape for n in consts} == {(3,), (2, 3)} and not hir.params
    x = np.ones((2, 3), np.float32)
    got = rlx.compile(lambda x: x * w + small, x, target="numpy")(x)
    want = x * np.array(w, np.float32) + np.array(small.tolist(), np.float32)
    np.testing.assert_array_equal(got, want)


def test_memoryview_weight_runs_like_the_numpy_array() -> None:
    w = _shaped("f", 8, 4)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    got = rlx.compile(lambda x: x @ w, x, target="numpy")(x)
    np.testing.assert_allclose(got, x @ np.array(w.tolist(), np.float32), rtol=1e-6)


def test_run_async_returns_what_the_call_returns() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = rlx.compile(lambda x: rlx.nn.softmax(x, axis=-1), x, target="numpy")
    got = asyncio.run(exe.run_async(x))
    np.testing.assert_array_equal(got, exe(x))
    with pytest.raises(rlx.ArgumentError):  # checked like a call
        asyncio.run(exe.run_async(x, x))


def test_init_webgpu_outside_a_browser_says_what_it_is_for() -> None:
    with pytest.raises(rlx.TargetUnavailableError) as err:
        asyncio.run(rlx.init_webgpu())
    assert "browser" in err.value.message and "wgpu" in err.value.hint


def test_explorer_displays_as_the_saved_output_without_anywidget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rlx_explorer import explore
    from rlx_explorer.mime import MIME_TYPE

    monkeypatch.setitem(sys.modules, "anywidget", None)  # import anywidget -> ImportError
    monkeypatch.delitem(sys.modules, "rlx_explorer.widget", raising=False)
    ex = explore(lambda x: x + 1.0, rlx.spec((2,)), targets=["numpy"], run=False,
                 devices=False, title="no widget")
    data = ex._repr_mimebundle_()
    assert data[MIME_TYPE]["title"] == "no widget"
    assert "text/html" in data and data["text/plain"].startswith("RLX Explorer")


TRAIN_SCRIPT = r"""
import asyncio, json, math, random, sys
from array import array
target = sys.argv[1]
if target != "numpy":
    sys.modules["numpy"] = None  # as in Pyodide: any `import numpy` raises
import rlx_core as rlx
from rlx_core.models.mlp import mlp_loss
from rlx_core.targets.gpu_common.host_arrays import HostArray

rng = random.Random(0)
def shaped(n, shape):
    return memoryview(array("f", [rng.uniform(-0.5, 0.5) for _ in range(n)])).cast("B").cast("f", shape)
params = {"fc1": {"weight": shaped(32, (4, 8)), "bias": shaped(4, (4,))},
          "fc2": {"weight": shaped(12, (3, 4)), "bias": shaped(3, (3,))}}
if target != "numpy":
    state = rlx.optim.Adam().init(params)
    assert type(state["t"]) is HostArray and state["m"]["fc1"]["weight"].values == (0.0,) * 32
x = [[math.sin(0.3 * i + j) for j in range(8)] for i in range(6)]
y = [i % 3 for i in range(6)]
step = rlx.optim.compile_step(mlp_loss, rlx.optim.Adam(lr=0.05), params,
                              rlx.spec((6, 8)), rlx.spec((6,), "i32"), target=target)
async def train():
    return [await step.run_async(x, y) for _ in range(8)]
losses = asyncio.run(train())
print(json.dumps([type(step.params["fc1"]["weight"]).__name__, losses]))
"""


def test_adam_trains_without_numpy_through_run_async() -> None:
    """03's browser edition: Adam's state made without numpy (HostArrays), memoryview
    parameters, and ``await step.run_async(x, y)``, here on the desktop WebGPU (wgpu)."""
    import json
    import os
    import subprocess
    from pathlib import Path

    if not any(t.name == "webgpu" and t.available for t in rlx.targets()):
        pytest.skip("no WebGPU adapter here (wgpu)")
    root = Path(__file__).resolve().parents[2]

    def run(target: str) -> tuple[str, list[float]]:
        r = subprocess.run([sys.executable, "-c", TRAIN_SCRIPT, target], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(root)}, cwd=root,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        kind, losses = json.loads(r.stdout.splitlines()[-1])
        return kind, losses

    kind, losses = run("webgpu")
    assert kind == "HostArray" and losses[-1] < losses[0], losses
    # the same eight steps with numpy, on the numpy reference
    np.testing.assert_allclose(losses, run("numpy")[1], rtol=1e-4, atol=1e-5)
