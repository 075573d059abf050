"""rlx inside Pyodide in headless Chromium: a BERT-style encoder layer compiled for the browser
WebGPU target (SwiftShader) must match the numpy reference computed in this process.

The page (tests/browser/page/index.html) loads Pyodide from a local folder built by
scripts/build_pyodide_dist.sh (npm package ``pyodide`` + the rlx wheel), served on 127.0.0.1
only. No numpy in the page: inputs travel as ``HostArray`` values, results come back as lists.
Skips (with the reason) only when Chromium, Playwright, npm or WebGPU is genuinely absent.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "build" / "pyodide-dist"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

# The model, as source: the same text runs here (numpy reference) and in the page (WebGPU).
MODEL = '''
import rlx_core as rlx
HIDDEN, HEADS = 64, 4

def heads(t):
    b, s, _ = t.shape
    return t.reshape(b, s, HEADS, HIDDEN // HEADS).transpose(0, 2, 1, 3)

def layer(x, mask, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, ln1_w, ln1_b,
          ff1_w, ff1_b, ff2_w, ff2_b, ln2_w, ln2_b):
    q = heads(rlx.nn.linear(x, q_w, q_b))
    k = heads(rlx.nn.linear(x, k_w, k_b))
    v = heads(rlx.nn.linear(x, v_w, v_b))
    ctx = rlx.nn.attention(q, k, v, mask="padding", padding_mask=mask)
    ctx = ctx.transpose(0, 2, 1, 3).reshape(x.shape)
    x = rlx.nn.layer_norm(x + rlx.nn.linear(ctx, o_w, o_b), ln1_w, ln1_b, eps=1e-12)
    h = rlx.nn.gelu(rlx.nn.linear(x, ff1_w, ff1_b))
    return rlx.nn.layer_norm(x + rlx.nn.linear(h, ff2_w, ff2_b), ln2_w, ln2_b, eps=1e-12)
'''

# What the page runs: open the device, compile from specs, run with numpy-free inputs.
PAGE_CODE = '''
import json
import rlx_core as rlx
from rlx_core.targets.gpu_common.host_arrays import HostArray
from rlx_core.targets.webgpu.runtime_browser import init
rt = await init()
ns = {}
exec(MODEL_SRC, ns)
args = [HostArray(a["dtype"], tuple(a["shape"]), tuple(a["values"])) for a in json.loads(ARGS)]
exe = rlx.compile(ns["layer"], *[rlx.spec(a.shape, a.dtype) for a in args], target="webgpu")
(out,) = await exe.program.info["runtime"].run_async(args)
import importlib.util
json.dumps({"numpy": importlib.util.find_spec("numpy") is not None, "adapter": rt.info.name, "kernels": len(exe.sources), "shape": list(out.shape),
            "values": list(out.values), "type": type(out).__name__})
'''


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    h, f, b, s = 64, 128, 2, 16

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    x = rng.standard_normal((b, s, h)).astype(np.float32)
    mask = np.ones((b, s), np.int32)
    mask[1, s - 4:] = 0
    weights = [w(h, h), w(h), w(h, h), w(h), w(h, h), w(h), w(h, h), w(h), 1 + w(h), w(h),
               w(f, h), w(f), w(h, f), w(h), 1 + w(h), w(h)]
    return [x, mask, *weights]


@pytest.fixture(scope="module")
def dist() -> Path:
    if not Path(CHROMIUM).exists():
        pytest.skip("no system Chromium (Debian package chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not (ROOT / "build" / "pyodide-npm" / "node_modules" / "pyodide").exists() and \
            shutil.which("npm") is None:
        pytest.skip("npm is absent and the pyodide package is not installed")
    # the wheel is built by this interpreter: a worktree has no .venv of its own
    done = subprocess.run(["bash", str(ROOT / "scripts" / "build_pyodide_dist.sh"), str(DIST)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    for f in (ROOT / "tests" / "browser" / "page").iterdir():
        shutil.copy(f, DIST / f.name)
    return DIST


@pytest.fixture(scope="module")
def server(dist: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(Quiet, directory=str(dist)))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def page(server: str, dist: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    wheel = next(dist.glob("rlx_explorer-*.whl")).name
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM,
                                                    args=FLAGS, headless=True)
        try:
            pg = ctx.new_page()
            pg.on("console", lambda m: CONSOLE.append(m.text))
            pg.add_init_script(f"window.RLX_WHEEL = {json.dumps(wheel)};")
            pg.goto(f"{server}/index.html")
            if not pg.evaluate("() => !!navigator.gpu"):
                pytest.skip("this Chromium exposes no navigator.gpu")
            if not pg.evaluate("async () => !!(await navigator.gpu.requestAdapter())"):
                pytest.skip("navigator.gpu has no adapter in this Chromium")
            pg.evaluate("() => window.rlxReady", )
            yield pg
        finally:
            ctx.close()


CONSOLE: list[str] = []


def run_python(pg: Any, code: str) -> Any:
    return json.loads(pg.evaluate("(code) => window.rlxRun(code)", code))


def test_bert_layer_in_browser_matches_numpy(page: Any) -> None:
    arrays = _inputs()
    ns: dict[str, Any] = {}
    exec(MODEL, ns)
    want = rlx.compile(ns["layer"], *arrays, target="numpy")(*arrays)
    args = json.dumps([{"dtype": "f32" if a.dtype == np.float32 else "i32",
                        "shape": list(a.shape), "values": a.reshape(-1).tolist()}
                       for a in arrays])
    res = run_python(page, f"MODEL_SRC = {MODEL!r}\nARGS = {args!r}\n" + PAGE_CODE)
    assert res["numpy"] is False and res["type"] == "HostArray"  # the numpy-free path
    assert res["shape"] == list(want.shape)
    got = np.array(res["values"], np.float32).reshape(want.shape)
    # WebGPU errors (e.g. a shader Tint rejects) only reach the console: show them on failure
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                               err_msg="\n".join(CONSOLE[-30:]))
    assert res["kernels"] > 10 and res["adapter"]


# 3D Gaussian splatting in the page: the same scene rendered (and differentiated) by rlx.splat
# on the browser's WebGPU, against the numpy oracle here (issue 29's "rendered in the browser")
SPLAT_SRC = '''
import rlx_core as rlx
W, H = 48, 40

def render(*a):
    return rlx.splat.render(*a, width=W, height=H, background=(0.1, 0.2, 0.3))

def backward(*a):
    return rlx.splat.render_backward(*a, width=W, height=H, background=(0.1, 0.2, 0.3))
'''

SPLAT_PAGE = '''
import json
import rlx_core as rlx
from rlx_core.targets.gpu_common.host_arrays import HostArray
from rlx_core.targets.webgpu.runtime_browser import init
rt = await init()
ns = {}
exec(SPLAT_SRC, ns)
args = [HostArray(a["dtype"], tuple(a["shape"]), tuple(a["values"])) for a in json.loads(ARGS)]
res = {"adapter": rt.info.name}
for name, n in (("render", 7), ("backward", 8)):
    exe = rlx.compile(ns[name], *[rlx.spec(a.shape, a.dtype) for a in args[:n]],
                      target="webgpu")
    outs = await exe.program.info["runtime"].run_async(args[:n])
    res[name] = [list(o.values) for o in outs]
json.dumps(res)
'''


def test_splat_scene_rendered_in_browser_matches_the_oracle(page: Any) -> None:
    from rlx_core.splat import reference as ref
    from rlx_core.splat import scene

    ns: dict[str, Any] = {}
    exec(SPLAT_SRC, ns)
    w, h = ns["W"], ns["H"]
    g = scene.random_gaussians(24, 1, seed=2, extent=0.6, scale=0.12)
    arrays = [np.asarray(a, np.float32) for a in
              (*g.arrays(), scene.orbit(25.0, 15.0, 3.0), scene.intrinsics(w, h))]
    g_img = np.random.default_rng(3).normal(size=(h, w, 3)).astype(np.float32)
    payload = json.dumps([{"dtype": "f32", "shape": list(a.shape),
                           "values": a.reshape(-1).tolist()} for a in (*arrays, g_img)])
    res = run_python(page, f"SPLAT_SRC = {SPLAT_SRC!r}\nARGS = {payload!r}\n" + SPLAT_PAGE)
    bg = (0.1, 0.2, 0.3)
    rec = ref.project(*arrays, w, h)
    want = ref.rasterize(rec, w, h, bg)
    got = np.array(res["render"][0], np.float32).reshape(want.shape)
    np.testing.assert_allclose(got, want, atol=2e-5, err_msg="\n".join(CONSOLE[-30:]))
    assert (want != np.float32(bg)).any()  # Gaussians on screen, not only the background
    g_means = ref.project_vjp(*arrays, ref.rasterize_vjp(rec, g_img, w, h, bg), w, h)[:, :3]
    got_means = np.array(res["backward"][0], np.float32).reshape(g_means.shape)
    np.testing.assert_allclose(got_means, g_means, rtol=1e-3,
                               atol=1e-4 * np.abs(g_means).max())
    assert res["adapter"]


# int8 in the page (gpu_common/int8.py): an int_linear with parameter weights (prepacked when
# uploaded) and its requantize, and one with the weights a call input (packed while staging),
# on the packed-dot path where the browser's WGSL has dot4I8Packed and on the i32 path, bit
# for bit against numpy here
INT8_SRC = '''
import array
import rlx_core as rlx
from rlx_core import quant as Q
from rlx_core.frontend.ops import asarray
M, K, N = 20, 70, 40

def model(w, b, mult, shift):
    wm = memoryview(array.array("b", w)).cast("b", (N, K))
    bm = array.array("i", b)
    def f(x, wx):  # the bias lifted here: Q.int_linear's own lifting of it asks for numpy
        acc = Q.int_linear(x, wm, asarray(bm), 3, -2)
        return Q.requantize(acc, mult, shift, -1, "i8", axis=-1), Q.int_linear(x, wx, None, 3, 0)
    return f
'''

INT8_PAGE = '''
import dataclasses, json
import rlx_core as rlx
from rlx_core.targets.gpu_common.host_arrays import HostArray
from rlx_core.targets.webgpu.runtime_browser import init
from rlx_core.targets.webgpu.wgsl import PACKED_DOT
rt = await init()
ns = {}
exec(INT8_SRC, ns)
a = json.loads(ARGS)
f = ns["model"](a["w"], a["b"], a["mult"], a["shift"])
args = [HostArray("u8", (ns["M"], ns["K"]), tuple(a["x"])),
        HostArray("i8", (ns["N"], ns["K"]), tuple(a["wx"]))]
res = {"features": list(rt.info.features), "adapter": rt.info.name}
saved = rt.info
for path in ("packed-dot", "i32"):
    if path == "i32":
        rt.info = dataclasses.replace(saved, features=tuple(x for x in saved.features
                                                              if x != PACKED_DOT))
    elif PACKED_DOT not in saved.features:
        continue
    try:
        exe = rlx.compile(f, *[rlx.spec(x.shape, x.dtype) for x in args], target="webgpu")
        outs = await exe.program.info["runtime"].run_async(args)
    finally:
        rt.info = saved
    res[path] = {"outs": [list(o.values) for o in outs], "source": "\\n".join(exe.sources.values()),
                 "prepacked": len(exe.program.info["plan"].derived)}
json.dumps(res)
'''


def test_int8_linear_in_browser_bit_exact(page: Any) -> None:
    from rlx_core import quant as Q

    rng = np.random.default_rng(8)
    ns: dict[str, Any] = {}
    exec(INT8_SRC, ns)
    m, k, n = ns["M"], ns["K"], ns["N"]
    x = rng.integers(0, 255, (m, k), endpoint=True).astype(np.uint8)
    w = rng.integers(-128, 127, (n, k), endpoint=True).astype(np.int8)
    wx = rng.integers(-128, 127, (n, k), endpoint=True).astype(np.int8)
    b = rng.integers(-(2**16), 2**16, n).astype(np.int32)
    mult, shift = zip(*(Q.quantize_multiplier(r) for r in rng.uniform(1e-3, 2.0, n)),
                      strict=True)
    f = ns["model"](w.ravel().tolist(), b.tolist(), mult, shift)
    want = rlx.compile(f, x, wx, target="numpy")(x, wx)
    payload = json.dumps({"x": x.ravel().tolist(), "wx": wx.ravel().tolist(),
                          "w": w.ravel().tolist(), "b": b.tolist(), "mult": list(mult),
                          "shift": list(shift)})
    res = run_python(page, f"INT8_SRC = {INT8_SRC!r}\nARGS = {payload!r}\n" + INT8_PAGE)
    # Chromium's WGSL has the extension (SwiftShader here): the packed path must be taken
    packed = "packed_4x8_integer_dot_product" in page.evaluate(
        "() => [...(navigator.gpu.wgslLanguageFeatures || [])]")
    assert ("packed-dot" in res) == packed
    for path in ("packed-dot", "i32") if packed else ("i32",):
        got = res[path]
        assert ("dot4I8Packed(" in got["source"]) == (path == "packed-dot")
        assert got["prepacked"] == 1  # the parameter weights, packed when uploaded
        for g, wnt in zip(got["outs"], want, strict=True):
            assert g == wnt.ravel().tolist(), (path, "\n".join(CONSOLE[-30:]))
