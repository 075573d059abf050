"""The JupyterLite site (`rlx lite build`) in headless system Chromium, served from 127.0.0.1:
the Pyodide kernel starts from the local distribution (no network) and runs the site's small
example notebooks (public API only, no numpy in the page): 00 tour compiles a model and runs it
on the browser's WebGPU (SwiftShader), its printed values match numpy here; 01 legalization
failures prints root causes that match the grouping computed here; both explorer outputs render
through the rlx-explorer extension."""

from __future__ import annotations

import functools
import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from tests.binder.harness import ROOT, build_extension, chromium_page, require_browser
from tests.lite.notebook_run import run_all

pytestmark = pytest.mark.slow
SITE = ROOT / "build" / "lite-site"


@pytest.fixture(scope="module")
def site() -> Path:
    require_browser()
    build_extension()
    import importlib.util

    for mod in ("jupyterlite_core", "jupyterlite_pyodide_kernel", "pyodide_lock", "onnx"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed (pip install 'rlx-explorer[lite]')")
    from binder.build_lite import build

    return build(SITE)


class _Handler(http.server.SimpleHTTPRequestHandler):
    # module workers and WebAssembly.instantiateStreaming insist on these types
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript",
                      ".wasm": "application/wasm", ".json": "application/json"}

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def url(site: Path) -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(_Handler, directory=str(site)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def _tour_reference() -> np.ndarray:
    """binder/lite/content/00_tour.ipynb's model and input, here with numpy and the numpy target."""
    b, d, h, k = 4, 8, 16, 5

    def weight(rows: int, cols: int, seed: float) -> np.ndarray:
        return np.array([[np.sin(seed + 0.37 * r + 0.11 * c) * 0.4 for c in range(cols)]
                         for r in range(rows)], np.float32)

    w1, w2 = weight(d, h, 1.0), weight(h, k, 2.0)
    x = np.array([[np.sin(0.5 * i + 0.3 * j) for j in range(d)] for i in range(b)], np.float32)

    def model(x: Any) -> Any:
        h_ = rlx.nn.layer_norm(rlx.nn.gelu(x @ w1))
        return rlx.nn.softmax(h_ @ w2, axis=-1)

    return rlx.compile(model, x, target="numpy")(x)  # type: ignore[no-any-return]


def _failure_causes() -> dict[str, str]:
    """binder/lite/content/01_legalization_failures.ipynb's model (its table a memoryview, as
    there): the root causes and fix lines the explorer groups its webgpu failures under."""
    import math
    from array import array

    from rlx_explorer import explore

    # the fix hint is spelled for the kind of host array
    vals = array("d", [math.sin(0.7 * i) for i in range(100 * 8)])
    table = memoryview(vals).cast("B").cast("d", (100, 8))

    def model(a: Any, ids: Any) -> Any:
        return ((rlx.tanh(a).T @ a).sum(axis=0)
                + rlx.tanh(rlx.take(table, ids, axis=0)).sum(axis=0))

    ex = explore(model, rlx.spec((16, 8), "f64"), rlx.spec((5,), "i64"), targets=["webgpu"],
                 view="failures", run=False, devices=False)
    (failure,) = ex.bundle["failures"]
    # fix lines name a line number only where the source file is known: compare the rest
    return {g["cause"]: re.sub(r" at line \d+", "", g["fix_line"]) for g in failure["groups"]}


def test_tour_notebook_runs_on_browser_webgpu(url: str) -> None:
    """The site ships the examples in small, numpy-free versions that run with the public API."""
    with chromium_page() as page:
        res = run_all(page, url, "00_tour.ipynb")
        got = np.array(res["values"], np.float32).reshape(4, 5)
        np.testing.assert_allclose(got, _tour_reference(), rtol=1e-4, atol=1e-5)
        assert res["max_abs_err"] < 1e-5 and res["adapter"]
        root = page.wait_for_selector("[data-rlx-mime] .rlx-root[data-ready='1']",
                                      timeout=180_000)
        assert "fc1 -> layer_norm -> head" in root.query_selector(".rlx-header").inner_text()
        page.wait_for_selector("[data-rlx-mime] .rlx-graph-canvas[data-rendered='1'] svg",
                               timeout=120_000)
        errors = [t for t in page.console_lines if "Traceback" in t]
        assert not errors, errors


def test_failures_notebook_groups_by_root_cause(url: str) -> None:
    with chromium_page() as page:  # its own profile: one would restore the other's tab too
        res = run_all(page, url, "01_legalization_failures.ipynb")
        # three nodes, one per cause: f64 tanh (webgpu emulates f64 arithmetic, not tanh) on
        # `a` and on `table`, and the i64 `ids` of the gather
        assert res["count"] == 3 and res["codes"] == ["RLX-L002", "RLX-L004"]
        assert res["moved"] == ["attention", "layer_norm"]
        want = _failure_causes()
        assert {c: re.sub(r" at line \d+", "", f) for c, f in res["causes"].items()} == want
        assert set(want) == {"a", "table", "ids"}
        page.wait_for_selector("[data-rlx-mime] .rlx-root[data-ready='1']", timeout=180_000)
        cards = page.wait_for_selector("[data-rlx-mime] .rlx-cause[data-cause='table']",
                                       timeout=60_000)
        assert "fixes 1 node" in cards.inner_text()
        assert page.query_selector_all("[data-rlx-mime] .rlx-cause[data-cause='table'] "
                                       ".rlx-poisoned > *")
        errors = [t for t in page.console_lines if "Traceback" in t]
        assert not errors, errors


def _cells(notebook: str) -> list[str]:
    nb = json.loads((ROOT / "binder" / "lite" / "content" / notebook).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _minilm_reference() -> np.ndarray:
    """02's encoder, weights and tokens: the notebook's own cells, here on the numpy target."""
    scope: dict[str, Any] = {}
    exec("import json, math, random\nfrom array import array\nimport rlx_core as rlx", scope)
    for src in _cells("02_minilm.ipynb")[1:3]:  # the model cell, the tokens cell
        exec(src, scope)
    specs = [rlx.spec((scope["B"], scope["S"]), "i32")] * 3
    exe = rlx.compile(scope["encode"], *specs, target="numpy")
    return exe(*(np.array(a, np.int32) for a in (scope["ids"], scope["mask"], scope["types"])))


def _mnist_first_loss(site: Path) -> float:
    """03's loss on its first batch before any update (the notebook's data and parameters)."""
    scope: dict[str, Any] = {}
    exec("import base64, json, math, random\nfrom array import array\nimport rlx_core as rlx",
         scope)
    data, init = _cells("03_mnist_training.ipynb")[1:3]
    exec(data.replace("'data/mnist-small.json'", repr(str(site / "files" / "data" /
                                                          "mnist-small.json"))), scope)
    exec(init, scope)
    from rlx_core.models.mlp import mlp_loss

    b = scope["BATCH"]
    x = np.array(scope["x_train"][:b], np.float32)
    y = np.array(scope["y_train"][:b], np.int32)
    params = scope["params"]
    return float(rlx.compile(lambda x, y: mlp_loss(params, x, y), x, y, target="numpy")(x, y))


def _onnx_reference(site: Path) -> np.ndarray:
    """ONNX's reference evaluator on the site's tiny_cnn.onnx and 04's input, here."""
    import base64

    onnx = pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator

    doc = json.loads((site / "files" / "data" / "tiny_cnn.rlx.json").read_text())
    x = np.frombuffer(base64.b64decode(doc["input"]["f32"]), np.float32)
    model = onnx.load(str(site / "files" / "data" / "tiny_cnn.onnx"))
    (want,) = ReferenceEvaluator(model).run(None, {"x": x.reshape(doc["input"]["shape"])})
    return want  # type: ignore[no-any-return]


def test_example_notebooks_run_on_browser_webgpu(site: Path, url: str) -> None:
    """02 (MiniLM's encoder, small and seeded), 03 (MNIST training on WebGPU, a subset bundled
    with the site) and 04 (the ONNX example, imported at site-build time: the page has no
    ``onnx``), each checked against the same computation here; every explorer renders."""
    results = {}
    for notebook in ("02_minilm.ipynb", "03_mnist_training.ipynb", "04_onnx.ipynb"):
        with chromium_page() as page:  # a fresh profile each: no other notebook's tab restored
            results[notebook] = run_all(page, url, notebook)
            page.wait_for_selector("[data-rlx-mime] .rlx-root[data-ready='1']",
                                   timeout=180_000)
            errors = [t for t in page.console_lines if "Traceback" in t]
            assert not errors, (notebook, errors)
    minilm = results["02_minilm.ipynb"]
    got = np.array(minilm["values"], np.float32).reshape(minilm["shape"])
    np.testing.assert_allclose(got, _minilm_reference(), rtol=1e-4, atol=2e-5)
    mnist = results["03_mnist_training.ipynb"]
    losses = mnist["losses"]
    assert abs(losses[0] - _mnist_first_loss(site)) < 1e-4, losses[0]
    assert np.mean(losses[-5:]) < 0.75 * np.mean(losses[:5]), losses
    assert mnist["acc"] > max(0.5, mnist["acc0"] + 0.3), mnist
    cnn = results["04_onnx.ipynb"]
    np.testing.assert_allclose(np.array(cnn["values"], np.float32).reshape(2, 10),
                               _onnx_reference(site), rtol=1e-5, atol=1e-6)
