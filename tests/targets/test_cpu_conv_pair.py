"""A 1x1 conv added to another 1x1 conv (ResNet's projection shortcut) as one conv2d_pair on
the CPU's blocked direct kernel (passes/conv_epilogue.py's pair rule, cpu/conv_pair.py): the
rule fires where both are 1x1 with a bias and parameter filters, is in the trace, and gives
the unfused graph's values; RLX_CONV_PAIR=0 keeps the two apart."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.simd import skip_unless_simd

cpu_ok, cpu_why = CpuTarget().available()
# slow: each test compiles programs with the blocked conv kernels (tens of seconds of C
# compile apiece on a cold cache); tests/conftest.py runs slow tests first
pytestmark = [pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}"),
              pytest.mark.slow]


def _block(rng: np.random.Generator, cin: int, mid: int, cout: int, stride: int,
           shortcut: str = "1x1", tail: str = "conv"):
    """A bottleneck block: relu(conv1x1(relu(conv3x3/stride(relu(conv1x1(a))))) + skip(a)),
    skip a conv of ``shortcut`` ("1x1", "3x3" or "nobias") at the stride; then ``tail``:
    "conv" (a blocked 3x3 conv reads the sum) or "mean" (a reduction: NCHW)."""
    k = 3 if shortcut == "3x3" else 1
    ws = {n: (rng.standard_normal(s) * 0.2).astype(np.float32) for n, s in (
        ("w1", (mid, cin, 1, 1)), ("w2", (mid, mid, 3, 3)), ("w3", (cout, mid, 1, 1)),
        ("ws", (cout, cin, k, k)), ("w4", (cout, cout, 3, 3)))}
    bs = {n: rng.standard_normal(c).astype(np.float32)
          for n, c in (("b1", mid), ("b2", mid), ("b3", cout), ("bs", cout))}

    def p(n: str):
        return rlx.param(ws[n] if n in ws else bs[n], n)

    def f(a):
        z = nn.relu(nn.conv2d(a, p("w1"), p("b1")))
        z = nn.relu(nn.conv2d(z, p("w2"), p("b2"), stride=stride, padding=1))
        skip = nn.conv2d(a, p("ws"), None if shortcut == "nobias" else p("bs"), stride=stride,
                         padding=k // 2)
        r = nn.relu(nn.conv2d(z, p("w3"), p("b3")) + skip)
        if tail == "mean":
            return rlx.mean(r, axis=(2, 3))
        return nn.conv2d(r, p("w4"), None, padding=1)

    return f


def _compile(f, x, monkeypatch: pytest.MonkeyPatch, on: bool, record: bool = False):
    monkeypatch.setenv("RLX_CONV_PAIR", "all" if on else "0")
    return rlx.compile(f, x, target="cpu", record=record)


def _ops(lir) -> list[str]:
    return [n.op for n in lir.nodes if n.op.startswith("conv2d")]


@pytest.mark.parametrize(("batch", "cin", "cout", "stride", "tail"), [
    (1, 16, 32, 1, "conv"),   # stage 1: stride 1
    (2, 32, 64, 2, "conv"),   # later stages: the shortcut at stride 2
    (3, 24, 40, 2, "mean"),   # 40 outputs (a last panel of 8), NCHW output
    (2, 13, 33, 2, "conv"),   # odd channels: 13 inputs to both filters, a last panel of 1
])
def test_a_projection_shortcut_joins_the_last_1x1(monkeypatch: pytest.MonkeyPatch, batch: int,
                                                  cin: int, cout: int, stride: int,
                                                  tail: str) -> None:
    skip_unless_simd()
    rng = np.random.default_rng(batch)
    f = _block(rng, cin, 16, cout, stride, tail=tail)
    x = rng.standard_normal((batch, cin, 9, 10)).astype(np.float32)
    exe = _compile(f, x, monkeypatch, True, record=True)
    (pair,) = (n for n in exe.lir.nodes if n.op == "conv2d_pair")
    assert [n.op for n in exe.lir.nodes if "ws" in n.inputs or "w3" in n.inputs] == ["conv2d_pair"]
    assert pair.attr("act") == "max" and tuple(pair.attr("stride2")) == (stride, stride)
    rules = [r for s in exe.trace.steps if s.name == "conv_epilogue" for r in s.rules]
    assert any("conv_pair" in str(r) for r in rules)
    got = exe(x)
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    off = _compile(f, x, monkeypatch, False)
    assert "conv2d_pair" not in _ops(off.lir)
    np.testing.assert_allclose(off(x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shortcut", ["3x3", "nobias"])
def test_no_pair_unless_both_are_1x1_with_a_bias(monkeypatch: pytest.MonkeyPatch,
                                                 shortcut: str) -> None:
    rng = np.random.default_rng(7)
    f = _block(rng, 16, 16, 32, 2, shortcut)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    monkeypatch.setenv("RLX_CONV_PAIR", "all")
    # the rule's decision is in the LIR: lowered only (no C build of the blocked convs)
    _, _, lir, _ = rlx.lower(f, x, target="cpu", record=False)
    assert "conv2d_pair" not in _ops(lir)


def test_a_graphs_own_pair_runs_as_its_two_convolutions() -> None:
    """A conv2d_pair written in the graph (not made by conv_epilogue from prepacked filters:
    here its filters are inputs) is not native on the cpu: the claim holds only for packed
    pairs, so legalization takes the decomposition, with the reason, and the values match."""
    from rlx_core.dispatch.legalize import legalize_graph
    from rlx_core.targets.numpy_ref.executor import interpret
    from tests.dispatch.graphs import random_inputs, single
    from tests.dispatch.test_decompositions import CASES

    op, specs, attrs = next(c for c in CASES if c[0] == "conv2d_pair")
    g = single(op, specs, **attrs)
    d = legalize_graph(g, CpuTarget()).top_level()[0]
    assert (d.op, d.route) == ("conv2d_pair", "common-IR")
    assert any("packed" in r.message for rej in d.rejected for r in rej.reasons)
    inputs = random_inputs(g, np.random.default_rng(0))
    got = rlx.compile(g, target="cpu", record=False)(*inputs)
    got = got[0] if isinstance(got, (list, tuple)) else got
    want = interpret(g, inputs)
    want = want[0] if isinstance(want, (list, tuple)) else want
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
