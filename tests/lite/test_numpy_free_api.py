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
