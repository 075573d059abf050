"""Legalization failures grouped by root cause (issue 30): illegal_f64.py's three failing nodes
have three causes — the input `a` (f64), the closed-over `table` (f64), the input `ids` (i64) —
each with one fix at its source line, every node listed under the cause that poisons it."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.cli import main
from rlx_explorer import explore
from rlx_explorer.fallback import fallback_html
from rlx_explorer.mime import mimebundle

from .conftest import MODELS


@pytest.fixture(scope="module")
def webgpu_failure() -> dict:
    from rlx_core.cli import load_model_file

    fn, ins, _ = load_model_file(MODELS / "illegal_f64.py")
    bundle = explore(fn, *ins, targets=("webgpu", "numpy"), run=False).bundle
    return next(f for f in bundle["failures"] if f["target"] == "webgpu")


def test_three_causes_not_six_cards(webgpu_failure: dict) -> None:
    groups = {g["cause"]: g for g in webgpu_failure["groups"]}
    assert set(groups) == {"a", "table", "ids"}
    table = groups["table"]
    assert table["kind"] == "param" and table["dtype"] == "f64" and table["code"] == "RLX-L002"
    assert groups["ids"]["code"] == "RLX-L004"
    assert table["line"] == 12 and table["source_line"].startswith("table = ")
    assert table["fix_line"].startswith("cast `table` to f32 at line 12")
    assert table["fix_line"].endswith("fixes 1 node")
    assert groups["a"]["kind"] == "input" and groups["a"]["count"] == 1
    assert "pass input `ids` as i32" in groups["ids"]["fix"]
    # every failing node is listed under at least one cause (f64 arithmetic is emulated on
    # webgpu, so what fails is tanh of each f64 source and the i64 gather)
    listed = {n for g in groups.values() for n in g["nodes"]}
    assert listed == {i["node"] for i in webgpu_failure["failures"]}
    tanh = {i["node"] for i in webgpu_failure["failures"] if i["op"] == "tanh"}
    assert tanh == set(groups["a"]["nodes"]) | set(groups["table"]["nodes"])


def test_an_op_the_target_lacks_is_its_own_cause() -> None:
    from rlx_explorer.views.root_causes import group_by_root
    from rlx_explorer.views.sources import SourceIndex

    item = {"node": "3", "op": "fft", "origin": "3", "code": "RLX-L001", "message": "no fft",
            "hint": "use target cpu", "file": "m.py", "line": 4, "source_line": "y = fft(x)",
            "hir_id": "h3", "rejected": []}
    [g] = group_by_root([item], {"nodes": []}, SourceIndex())
    assert g["kind"] == "node" and g["fix_line"] == "use target cpu: fixes 1 node"


def test_a_cast_to_an_illegal_dtype_is_the_cause() -> None:
    def model(x):
        y = x.astype("f64")
        return np.tanh(y * 2).sum()  # webgpu emulates f64 arithmetic, not tanh

    with pytest.raises(rlx.LegalizationError):
        rlx.compile(model, np.ones(4, np.float32), target="webgpu")
    bundle = explore(model, np.ones(4, np.float32), targets=("webgpu",), run=False).bundle
    causes = bundle["failures"][0]["groups"]
    assert any("f32" in g["fix"] for g in causes)


def test_error_codes_link_to_their_docs_entry(webgpu_failure: dict) -> None:
    link = webgpu_failure["code_links"]["RLX-L002"]
    path, anchor = link.split("#")
    assert anchor == "rlx-l002--dtype-not-supported-by-the-target"
    assert Path(path.removeprefix("file://")).name == "errors.md"


def test_explore_html_of_a_failing_model_opens_on_failures(tmp_path: Path) -> None:
    out = tmp_path / "illegal.html"
    assert main(["explore", str(MODELS / "illegal_f64.py"), "--target", "webgpu,numpy",
                 "--html", str(out)]) == 0
    blob = re.search(r'id="rlx-data">"([A-Za-z0-9+/=]+)"<', out.read_text()).group(1)
    assert json.loads(gzip.decompress(base64.b64decode(blob)))["view"] == "failures"


def test_outputs_carry_a_static_html_fallback(webgpu_failure: dict) -> None:
    from rlx_core.cli import load_model_file

    fn, ins, _ = load_model_file(MODELS / "illegal_f64.py")
    bundle = explore(fn, *ins, targets=("webgpu", "numpy"), run=False).bundle
    data = mimebundle(bundle)
    assert set(data) == {"application/vnd.rlx.trace+json", "text/html", "text/plain"}
    page = data["text/html"]
    assert "cast `table` to f32 at line 12" in page
    assert ("<svg" in page) == bool(bundle["svg"].get("hir"))  # the server-side layout, if any
    assert "webgpu ✗" in data["text/plain"] and "legalization failures" in data["text/plain"]
    # two outputs in one notebook never share element ids
    assert re.search(r"id='(rlx-\w+)'", page).group(1) not in fallback_html(bundle)


@pytest.mark.parametrize("host", ["numpy", "memoryview", "array", "host"])
def test_the_cast_hint_is_spelled_for_the_kind_of_host_array(host: str) -> None:
    """A weight given as a memoryview (Pyodide has no numpy) gets a stdlib cast, not
    ``.astype``; each hint's code runs here and makes the weight f32."""
    import math
    from array import array

    from rlx_core.targets.gpu_common.host_arrays import HostArray

    vals = array("d", [math.sin(0.7 * i) for i in range(800)])  # big enough to be a parameter
    made = {"numpy": lambda: np.array(vals).reshape(100, 8),
            "memoryview": lambda: memoryview(vals).cast("B").cast("d", (100, 8)),
            "array": lambda: vals,
            "host": lambda: HostArray("f64", (100, 8), tuple(vals))}
    table = made[host]()
    rows = (100, 8) if host in ("numpy", "memoryview", "host") else (800,)

    def model(ids):
        return rlx.tanh(rlx.take(table, ids, axis=0)).sum(axis=0)

    bundle = explore(model, rlx.spec((3,), "i32"), targets=("webgpu",), run=False,
                     devices=False).bundle
    (g,) = [g for g in bundle["failures"][0]["groups"] if g["cause"] == "table"]
    code = re.search(r"\(e\.g\. `(.*)`\)", g["fix"]).group(1)  # type: ignore[union-attr]
    assert (".astype(" in code) == (host == "numpy")
    scope = {"table": table, "array": array, "np": np, "HostArray": HostArray}
    exec(code, scope)
    cast = scope["table"]
    hir = rlx.trace(lambda ids: rlx.take(cast, ids, axis=0), rlx.spec((3,), "i32"))
    (p,) = hir.params
    assert str(p.type.dtype) == "f32" and p.type.shape == rows
