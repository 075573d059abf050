"""The CPU's pooling kernels (cpu/pool.py) against the numpy reference target, and ONNX
MaxPool / AveragePool imported as HIR pooling where the window allows it."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.toolchain import find_compiler
from tests.targets.simd import skip_unless_simd

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C compiler for the cpu target")

# (op, x shape, kernel, stride, padding): strides 1, 2, 3, odd and 7- / 14-wide planes
CASES = [
    ("max", (2, 3, 9, 11), (3, 3), (1, 1), (1, 1)),
    ("max", (1, 4, 14, 14), (3, 3), (2, 2), (1, 1)),  # a stem pool
    ("max", (1, 2, 7, 7), (2, 2), (2, 2), (0, 0)),  # VGG's pool, an odd plane
    ("max", (1, 3, 8, 19), (5, 5), (1, 1), (2, 2)),
    ("max", (1, 2, 10, 23), (3, 2), (3, 2), (1, 1)),  # uneven window, stride 3 rows
    ("avg", (1, 2, 10, 9), (3, 2), (2, 3), (1, 1)),
    ("avg", (2, 3, 8, 8), (2, 2), (2, 2), (0, 0)),
    ("avg", (1, 5, 14, 17), (3, 3), (1, 1), (1, 1)),
]


def test_pool_kernels_match_the_reference() -> None:
    """Every case in one program (one C compile), with NaNs in the inputs: a max keeps them
    wherever the window holds one, as the reference does."""
    rng = np.random.default_rng(0)
    args = []
    for _, xs, *_ in CASES:
        x = rng.standard_normal(xs).astype(np.float32)
        x.flat[rng.choice(x.size, 2, replace=False)] = np.nan
        args.append(x)

    def f(*xs):
        return tuple((nn.max_pool2d if op == "max" else nn.avg_pool2d)(x, k, s, p)
                     for x, (op, _, k, s, p) in zip(xs, CASES, strict=True))

    exe = rlx.compile(f, *args, target="cpu")
    assert {k["impl"] for k in exe.program.info["kernels"].values()} == {"rlx-pool"}
    got = exe(*args)
    want = rlx.compile(f, *args, target="numpy")(*args)
    for case, g_, w_ in zip(CASES, got, want, strict=True):
        g_, w_ = np.asarray(g_), np.asarray(w_)
        assert g_.shape == w_.shape, case
        np.testing.assert_array_equal(np.isnan(g_), np.isnan(w_), err_msg=str(case))
        np.testing.assert_allclose(g_, w_, rtol=1e-6, atol=1e-6, err_msg=str(case))


def test_onnx_pools_import_as_hir_pooling() -> None:
    """MaxPool / AveragePool windows that max_pool2d / avg_pool2d express import as them (the
    cpu runs its kernel, every target agrees with ONNX Runtime's answer); a ceil_mode window
    or an average excluding the padding keeps the MIR taps."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    cases = [  # (op, attrs, hir op or None)
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
         "max_pool2d"),
        ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, "max_pool2d"),
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, None),
        ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, "avg_pool2d"),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                         "count_include_pad": 1}, "avg_pool2d"),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, None),
    ]
    x = np.random.default_rng(1).standard_normal((1, 3, 10, 10)).astype(np.float32)
    for op, attrs, hir in cases:
        node = helper.make_node(op, ["x"], ["y"], **attrs)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
            "x", TensorProto.FLOAT, x.shape)], [helper.make_tensor_value_info(
                "y", TensorProto.FLOAT, None)])
        data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        data.ir_version = 8
        blob = data.SerializeToString()
        g = rlx.from_onnx(blob)
        ops = {n.op for n in g.nodes}
        assert (hir in ops) if hir else not ops & {"max_pool2d", "avg_pool2d"}, (op, attrs, ops)
        want = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        exe = rlx.compile(g, x, target="cpu")
        if hir:
            assert "rlx-pool" in {k["impl"] for k in exe.program.info["kernels"].values()}
        np.testing.assert_allclose(np.asarray(exe(x)), want, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{op} {attrs}")


@pytest.mark.slow  # compiles a blocked CNN's training step: run first (tests/conftest.py)
def test_blocked_pools_run_backward_over_a_large_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """NCHW8c pooling of an input above conv_blocked.L3_BYTES (0 here) reads its (image,
    block) items from the last to the first, where the conv before it left them cached;
    same results (a max and an average, 3 images)."""
    skip_unless_simd()
    from rlx_core.targets.cpu import conv_blocked
    from rlx_core.targets.cpu.renderer import render_program

    monkeypatch.setattr(conv_blocked, "L3_BYTES", 0)
    rng = np.random.default_rng(2)
    w1, w2 = ((rng.standard_normal(s) * 0.3).astype(np.float32)
              for s in ((16, 16, 3, 3), (16, 32, 1, 1)))

    def f(x):
        y = nn.relu(nn.conv2d(x, rlx.param(w1, "w1"), None, padding=1))
        m = nn.max_pool2d(y, (3, 3), (2, 2), (1, 1))
        a = nn.avg_pool2d(y, (2, 2), (2, 2), (0, 0))
        return nn.conv2d(rlx.concat([m, a], axis=1), rlx.param(w2, "w2"))

    x = rng.standard_normal((3, 16, 10, 10)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    info = exe.program.info
    pools = [n.name for n in exe.lir.nodes if n.op in ("max_pool2d", "avg_pool2d")]
    assert len(pools) == 2 and set(pools) <= set(info["nchw8c"])
    assert render_program(exe.lir).source.count(f"const int64_t it = {3 * 2 - 1} - ir;") == 2
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    got = exe(x)
    assert float(np.abs(got - want).max() / np.abs(want).max()) < 1e-5


@pytest.mark.parametrize("family", ["native", "avx2"])
def test_blocked_pools_match_the_reference(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case of CASES in NCHW8c (between two blocked 3x3 convs), on this
    CPU's own ISA path and on the AVX2 one (AVX-512 puts two pixels in a vector, the last
    one masked on an odd row): NaNs stay where the window holds one."""
    from rlx_core.targets.cpu import isa

    if family != "native" and family not in isa.forced_paths():
        pytest.skip(f"this CPU does not run the {family} path")
    monkeypatch.setenv("RLX_CPU_ISA", family)
    monkeypatch.setenv("RLX_WINOGRAD", "0")  # its tiles would spread a NaN over 6 x 6 pixels
    skip_unless_simd()
    rng = np.random.default_rng(3)
    w1, w2 = ((rng.standard_normal(s) * 0.3).astype(np.float32)
              for s in ((16, 16, 3, 3), (16, 16, 3, 3)))
    args = []
    for _, xs, *_ in CASES:
        x = rng.standard_normal((xs[0], 16, *xs[2:])).astype(np.float32)
        x.flat[rng.choice(x.size, 2, replace=False)] = np.nan
        args.append(x)

    def f(*xs):
        outs = []
        for x, (op, _, k, s, p) in zip(xs, CASES, strict=True):
            y = nn.conv2d(x, rlx.param(w1, "w1"), None, padding=1)
            y = (nn.max_pool2d if op == "max" else nn.avg_pool2d)(y, k, s, p)
            outs.append(nn.conv2d(y, rlx.param(w2, "w2"), None, padding=1))
        return tuple(outs)

    exe = rlx.compile(f, *args, target="cpu", record=False)
    pools = [n.name for n in exe.lir.nodes if n.op in ("max_pool2d", "avg_pool2d")]
    assert len(pools) == len(CASES) and set(pools) <= set(exe.program.info["nchw8c"])
    got = exe(*args)
    want = rlx.compile(f, *args, target="numpy", record=False)(*args)
    for case, g_, w_ in zip(CASES, got, want, strict=True):
        g_, w_ = np.asarray(g_), np.asarray(w_)
        np.testing.assert_array_equal(np.isnan(g_), np.isnan(w_), err_msg=str(case))
        np.testing.assert_allclose(g_, w_, rtol=1e-5, atol=1e-4, err_msg=str(case))
