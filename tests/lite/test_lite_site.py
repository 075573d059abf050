"""The JupyterLite site (`rlx lite build`) in headless system Chromium, served from 127.0.0.1:
the Pyodide kernel starts from the local distribution (no network), the demo notebook compiles a
model and runs it on the browser's WebGPU (SwiftShader), its printed values match numpy here,
and the explorer output renders through the rlx-explorer extension."""

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

pytestmark = pytest.mark.slow
SITE = ROOT / "build" / "lite-site"


@pytest.fixture(scope="module")
def site() -> Path:
    require_browser()
    build_extension()
    import importlib.util

    for mod in ("jupyterlite_core", "jupyterlite_pyodide_kernel", "pyodide_lock"):
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


def _reference() -> np.ndarray:
    """What the demo notebook computes, here with numpy and the numpy target."""
    b, d, k = 4, 8, 5
    x = np.array([np.sin(i * 0.37) for i in range(b * d)], np.float32).reshape(b, d)
    w = np.array([np.cos(j * 0.11) * 0.5 for j in range(d * k)], np.float32).reshape(d, k)
    return rlx.compile(lambda x, w: rlx.nn.softmax(x @ w, axis=-1), x, w, target="numpy")(x, w)


def test_demo_notebook_runs_on_browser_webgpu(url: str) -> None:
    with chromium_page() as page:
        page.goto(f"{url}/lab/index.html?path=rlx-webgpu-demo.ipynb")
        page.wait_for_function("() => document.body.dataset.rlxExtension === 'active'",
                               timeout=180_000)
        if not page.evaluate("async () => !!(navigator.gpu && await navigator.gpu.requestAdapter())"):
            pytest.skip("this Chromium exposes no WebGPU adapter")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        # wait until the Pyodide kernel is idle, then Run > Run All Cells
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                               timeout=300_000)
        page.click(".lm-MenuBar-item:has-text('Run')", timeout=30_000)
        page.click(".lm-Menu-item[data-command='runmenu:run-all']", timeout=30_000)
        out = page.wait_for_selector(".jp-OutputArea-output:has-text('RLX-RESULT')",
                                     timeout=420_000)
        text = out.inner_text()
        res = json.loads(re.search(r"RLX-RESULT (\{.*\})", text).group(1))  # type: ignore[union-attr]
        got = np.array(res["values"], np.float32).reshape(4, 5)
        np.testing.assert_allclose(got, _reference(), rtol=1e-5, atol=1e-6)
        assert res["max_abs_err"] < 1e-5 and res["adapter"]
        root = page.wait_for_selector("[data-rlx-mime] .rlx-root[data-ready='1']",
                                      timeout=180_000)
        assert "softmax(x @ w)" in root.query_selector(".rlx-header").inner_text()
        page.wait_for_selector("[data-rlx-mime] .rlx-graph-canvas[data-rendered='1'] svg",
                               timeout=120_000)
        errors = [t for t in page.console_lines if "Traceback" in t]
        assert not errors, errors
