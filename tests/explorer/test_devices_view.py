"""Every device side by side (issue 30): a column per registered target headed by its real
verification level, "what would it take" from the grouped legalization failures, and the
same LIR kernel in every target's language, rendered without any device."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.registry import TARGETS, get_target, target_names
from rlx_explorer.device_sources import emit_target
from rlx_explorer.session import Session
from rlx_explorer.views.devices import problem_groups, split_kernels

from .conftest import MODELS


@pytest.fixture(scope="module")
def mlp_cpu() -> dict[str, Any]:
    from rlx_core.cli import load_model_file

    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    return Session(fn, ins, ("cpu",), run=False).bundle()


def test_a_column_per_registered_target_with_its_verification(mlp_cpu: dict) -> None:
    cols = {c["name"]: c for c in mlp_cpu["devices"]["targets"]}
    assert set(cols) == set(target_names())  # all fifteen, numpy included
    for name, c in cols.items():
        assert c["verification"] == get_target(name).caps.verification or \
            c["verification"] == get_target(name).verification, name
    assert cols["metal"]["verification"] == "syntax-checked"
    assert cols["cuda"]["verification"] == "compile-check"
    assert cols["fpga"]["verification"] == "simulated"
    assert cols["hexagon"]["verification"] == "executes (emulated)"
    # the dispatch matrix covers them too (each header carries the same label)
    matrix = mlp_cpu["dispatch"]["matrices"][mlp_cpu["dispatch"]["current"]]
    assert {t["name"] for t in matrix["targets"]} >= set(target_names())
    # a float MLP: every float target is ready; the int8 firmware targets say what it takes,
    # in their own terms (quantize), with the nodes each fix covers
    assert cols["cpu"]["compile_ready"] and cols["webgpu"]["compile_ready"]
    for name in ("cortex-m", "fpga"):
        c = cols[name]
        assert not c["compile_ready"] and c["failing_nodes"] > 0
        first = c["takes"][0]
        assert "quantize the model first" in first["fix_line"] and first["count"] >= 1
        assert re.search(r"fixes \d+ nodes?$", first["fix_line"])


def test_what_it_takes_groups_the_real_failures_by_root_cause() -> None:
    from rlx_core.cli import load_model_file

    fn, ins, _ = load_model_file(MODELS / "illegal_f64.py")
    b = Session(fn, ins, ("numpy",), run=False).bundle()
    cols = {c["name"]: c for c in b["devices"]["targets"]}
    assert cols["numpy"]["compile_ready"] and cols["cpu"]["compile_ready"]
    web = cols["webgpu"]
    assert not web["compile_ready"]
    lines = [t["fix_line"] for t in web["takes"]]
    # one fix at the source of each illegal dtype, not one card per poisoned node
    assert any(re.match(r"cast `table` to f32 at line 12\b.*: fixes \d+ nodes?", ln) for ln in lines), lines
    assert any(ln.startswith("pass input `ids` as i32") for ln in lines), lines
    assert sum(t["count"] for t in web["takes"]) >= web["failing_nodes"]
    assert all(t["code"].startswith("RLX-") for t in web["takes"])
    # the same failure on every WGSL/GLSL-class target that lacks f64, each its own column
    for name in ("opengl", "metal", "webgpu-browser"):
        assert not cols[name]["compile_ready"], name


def test_the_same_kernel_in_every_language_with_node_links(mlp_cpu: dict) -> None:
    sbs = mlp_cpu["devices"]["side_by_side"]
    k = sbs["kernels"][0]
    assert k["kind"] == "matmul"
    cols = {c["target"]: c for c in k["targets"]}
    sources = {t: "\n".join(ln["text"] for ln in c["lines"]) for t, c in cols.items()}
    assert "@compute" in sources["webgpu"] and "__global__" in sources["cuda"]
    assert "hip_runtime.h" in sources["rocm"] and "kernel void" in sources["metal"]
    assert "__kernel" in sources["opencl"] and "#version 430" in sources["opengl"]
    assert "stablehlo.dot_general" in sources["tpu"]
    assert "[numthreads(" in sources["directx"] and "#version 450" in sources["vulkan"]
    assert cols["webgpu-browser"]["same_as"] == "webgpu"  # the browser runs the same WGSL
    # lines link exactly to the nodes their '// %name' comment names
    for t in ("webgpu", "opencl", "opengl", "vulkan", "directx", "cuda", "rocm", "metal", "cpu",
              "hexagon"):  # the C renderers (c_common) write the same comments
        linked = [ln for ln in cols[t]["lines"] if ln["nodes"]]
        assert linked, t
        for ln in linked:
            assert set(ln["nodes"]) <= set(k["origins"]), (t, ln)
        assert any("%" in ln["text"].split("//", 1)[-1] for ln in linked), t
    # the int8 targets say why they have no such kernel instead of showing nothing
    assert cols["cortex-m"]["error"].startswith("[RLX-U001]")


def test_sources_render_without_any_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """No driver, no toolchain: the source of every renderer is still produced."""
    from rlx_core.targets.cuda.target import CudaTarget
    from rlx_core.targets.webgpu.target import WebGpuTarget

    def gone(self: Any) -> Any:
        raise TargetUnavailableError("no device in this test")

    monkeypatch.setattr(WebGpuTarget, "runtime", gone)
    monkeypatch.setattr(CudaTarget, "checker", lambda self: (None, "no nvcc in this test"))
    get_target.cache_clear()
    try:
        def f(x, w):  # noqa: ANN001, ANN202 - traced
            return rlx.nn.softmax(x @ w)

        args = (np.ones((4, 8), np.float32), np.ones((8, 16), np.float32))
        for name in ("webgpu", "cuda"):
            assert not get_target(name).available()[0]
            e = emit_target(f, args, name, None, None)
            assert e["error"] == "" and e["how"] == "rendered without the device", e
            assert len(e["sources"]) == len([k for k in e["lir"].kernels
                                             if any(n.op != "constant" for n in k.nodes)])
    finally:
        get_target.cache_clear()
    # every registered target but the interpreter can render source
    for name in TARGETS:
        if name != "numpy":
            assert callable(getattr(get_target(name), "render_sources", None)), name


def test_whole_module_sources_are_cut_per_kernel() -> None:
    def f(x):  # noqa: ANN001, ANN202 - traced
        return rlx.nn.softmax(x * 2.0)

    _, _, lir, _ = rlx.lower(f, np.ones((2, 4), np.float32), target="tpu", record=False)
    text = get_target("tpu").render_sources(lir)["main"]
    cut = split_kernels(text, [k.name for k in lir.kernels])
    assert set(cut) == {k.name for k in lir.kernels}
    assert all(v.lstrip().startswith(f"// kernel {k}") for k, v in cut.items())


def test_strict_check_problems_group_by_fix() -> None:
    lines = ["RLX-U001 %fc1 dot_general (m.py:3): computes in floating point; fix: quantize it",
             "RLX-U001 %fc2 dot_general (m.py:4): computes in floating point; fix: quantize it",
             "RLX-U002 %s sort: no int8 kernel for sort; fix: run it on the host"]
    groups = problem_groups(lines)
    assert [g["count"] for g in groups] == [2, 1]
    assert groups[0]["fix_line"] == "quantize it: fixes 2 nodes"
    assert groups[0]["nodes"] == ["fc1", "fc2"] and groups[1]["code"] == "RLX-U002"


def test_the_devices_view_is_built_by_default_only_for_small_graphs(monkeypatch) -> None:
    """It lowers the model once per registered target: MiniLM-sized graphs ask for it."""
    import numpy as np

    from rlx_explorer import session as S

    x = np.ones((2, 3), np.float32)
    small = S.Session(lambda a: a * 2.0 + 1.0, (x,), ("numpy",), run=False).bundle()
    assert small["devices"]
    monkeypatch.setattr(S, "DEVICES_AUTO_NODES", 1)
    assert S.Session(lambda a: a * 2.0 + 1.0, (x,), ("numpy",), run=False).bundle()["devices"] == {}
    forced = S.Session(lambda a: a * 2.0 + 1.0, (x,), ("numpy",), run=False, devices=True)
    assert forced.bundle()["devices"]
