"""The JupyterLab extension in a real JupyterLab in headless Chromium (WebGPU on SwiftShader):
it activates, renders a saved explorer output with no kernel running, and runs WGSL sent by a
Python kernel (target "webgpu-browser") on the browser's GPU, results checked against numpy.

The server runs on 127.0.0.1 with private config/runtime folders; the extension is the one
built from extension/ (bash extension/build.sh), put on JUPYTER_PATH.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest

import rlx_core as rlx
from tests.binder.harness import (
    LabServer,
    build_extension,
    chromium_page,
    extension_data_dir,
    lab_server,
    require_browser,
)

pytestmark = pytest.mark.slow

W = (np.arange(32, dtype=np.float32).reshape(8, 4) - 16) / 16


def model(x: Any) -> Any:
    return rlx.nn.softmax(rlx.nn.gelu(x @ W) * 2 + 1, axis=-1)


def saved_notebook(path: Path) -> None:
    """A notebook as saved after running the explorer: the MIME output, and no kernel behind it."""
    from rlx_explorer import explore
    from rlx_explorer.mime import trace_output

    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    bundle = trace_output(explore(model, x, targets=["numpy", "webgpu"], title="saved <b>mlp</b>"))
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("trace_output(explore(model, x))", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data=bundle._repr_mimebundle_())]
    nb.cells = [cell]
    # a kernel that does not exist here: opening the notebook starts nothing
    nb.metadata["kernelspec"] = {"name": "rlx-no-such-kernel", "display_name": "none",
                                 "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    require_browser()
    tmp = tmp_path_factory.mktemp("lab")
    data = extension_data_dir(tmp, build_extension())
    jupyter = [sys.executable, "-m", "jupyterlab"]
    with lab_server(tmp, jupyter, data_path=data) as server:
        saved_notebook(server.root / "saved.ipynb")
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell("1 + 1")]
        nbformat.write(nb, server.root / "roundtrip.ipynb")
        yield server


def test_extension_is_listed_and_activates(lab: LabServer) -> None:
    with chromium_page() as page:
        page.goto(lab.page_url("lab"))
        page.wait_for_function("() => document.body.dataset.rlxExtension === 'active'",
                               timeout=120_000)
        assert any("rlx-explorer: WebGPU executor active" in t for t in page.console_lines)
        assert page.evaluate("() => !!window.rlxWebGpuExecutor")


def test_saved_output_renders_the_explorer_without_a_kernel(lab: LabServer) -> None:
    with chromium_page() as page:
        page.goto(lab.page_url("lab/tree/saved.ipynb"))
        root = page.wait_for_selector("[data-rlx-mime] .rlx-root[data-ready='1']", timeout=120_000)
        header = root.query_selector(".rlx-header").inner_text()
        assert "saved <b>mlp</b>" in header  # the name shown as text, never as markup
        assert root.query_selector(".rlx-header b b") is None
        page.wait_for_selector("[data-rlx-mime] .rlx-graph-canvas[data-rendered='1'] svg",
                               timeout=60_000)
        # JupyterLab asks for a kernel (the saved one does not exist here): decline
        if page.query_selector(".jp-Dialog"):
            page.keyboard.press("Escape")
            page.wait_for_selector(".jp-Dialog", state="detached")
        # other views work from the saved bundle alone
        root.query_selector("button[data-view='kernels']").click()
        page.wait_for_selector("[data-rlx-mime] [data-pane='kernels']:not([hidden])")
        assert lab.api("kernels") == []  # nothing was started to show it


def test_kernel_runs_wgsl_on_the_browser_gpu_over_the_comm(lab: LabServer) -> None:
    from jupyter_client import BlockingKernelClient

    with chromium_page() as page:
        page.goto(lab.page_url("lab/tree/roundtrip.ipynb"))
        page.wait_for_function("() => document.body.dataset.rlxExtension === 'active'",
                               timeout=120_000)
        if not page.evaluate("async () => !!(navigator.gpu && await navigator.gpu.requestAdapter())"):
            pytest.skip("this Chromium exposes no WebGPU adapter")
        packed = page.evaluate("() => !!navigator.gpu.wgslLanguageFeatures?.has("
                               "'packed_4x8_integer_dot_product')")
        kernel_id = _wait_for_kernel(lab, page)
        client = BlockingKernelClient(connection_file=str(lab.runtime / f"kernel-{kernel_id}.json"))
        client.load_connection_file()
        client.start_channels()
        try:
            x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)
            code = (
                "import json, numpy as np, rlx_core as rlx\n"
                f"W = np.array({W.tolist()!r}, np.float32)\n"
                "def model(x):\n"
                "    return rlx.nn.softmax(rlx.nn.gelu(x @ W) * 2 + 1, axis=-1)\n"
                f"x = np.array({x.tolist()!r}, np.float32)\n"
                "exe = rlx.compile(model, x, target='webgpu-browser')\n"
                "ys = [exe(x).tolist(), exe(x * 0.5).tolist()]\n"
                "info = exe.program.info\n"
                # int8 over the comm: prepacked weights, the packed dot where the tab's WGSL
                # has it (the extension reports it), bit-exact against the numpy reference
                "from rlx_core import quant as Q\n"
                "rng = np.random.default_rng(1)\n"
                "xq = rng.integers(0, 255, (9, 70), endpoint=True).astype(np.uint8)\n"
                "wq = rng.integers(-128, 127, (40, 70), endpoint=True).astype(np.int8)\n"
                "f8 = lambda a: Q.int_linear(a, wq, None, 3, -2)\n"
                "e8 = rlx.compile(f8, xq, target='webgpu-browser')\n"
                "int8 = {'same': e8(xq).tolist() == rlx.compile(f8, xq, target='numpy')(xq)"
                ".tolist(), 'packed': 'dot4I8Packed(' in '\\n'.join(e8.sources.values()), "
                "'route': e8.program.info['route']}\n"
                "print('RLX' + json.dumps({'y': ys, 'route': info['route'], 'int8': int8, "
                "'adapter': info['adapter'], 'kernels': len(exe.sources)}))\n")
            out = _execute(client, code)
        finally:
            client.stop_channels()
        res = json.loads(out.split("RLX", 1)[1])
        assert res["route"] == "comm" and res["kernels"] >= 1
        assert res["int8"] == {"same": True, "packed": packed, "route": "comm"}
        ref = rlx.compile(model, x, target="numpy")
        np.testing.assert_allclose(np.array(res["y"][0], np.float32), ref(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(res["y"][1], np.float32), ref(x * 0.5), rtol=1e-5,
                                   atol=1e-6)


def _wait_for_kernel(lab: LabServer, page: Any) -> str:
    for _ in range(240):
        sessions = lab.api("sessions")
        if sessions and (lab.runtime / f"kernel-{sessions[0]['kernel']['id']}.json").exists():
            if sessions[0]["kernel"]["execution_state"] == "idle":
                return str(sessions[0]["kernel"]["id"])
        page.wait_for_timeout(500)
    raise AssertionError(f"the notebook's kernel did not start: {lab.log.read_text()[-3000:]}")


def _execute(client: Any, code: str, timeout: float = 180) -> str:
    msg_id = client.execute(code)
    text: list[str] = []
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            text.append(content["text"])
        elif kind == "error":
            raise AssertionError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(text)
