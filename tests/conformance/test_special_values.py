"""IEEE special values (0, -0, inf, -inf, NaN, huge) through every float op, on every target.

The reference is numpy: x / 0 is +-inf (NaN for 0/0), inf * 0 is NaN, maximum/minimum and the
max/min reductions propagate NaN, sign(NaN) is NaN, pow follows C99. GPU drivers that compile
floats as if inf and NaN did not exist (lavapipe) must still give these answers. Constant
operands are tested too: a driver folds ``x * 0.0`` at compile time.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.ir.ops.mir import BINARY, COMPARE
from tests.conformance.harness import TARGETS, check_mir, claimed_ops, claims, executable_target
from tests.dispatch.graphs import GraphMaker

SPECIAL = [0.0, -0.0, 1.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 1e30, -1e-30]
_UNARY = ("neg", "abs", "sign", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "logistic",
          "floor", "ceil", "round", "reciprocal", "sin", "cos")
# sin/cos of huge arguments need a range reduction GPU drivers do not do (docs/webgpu.md)
_HUGE_OK = ("sin", "cos")
FLOATS = ("f32", "f64")
_NP = {"f32": np.float32, "f64": np.float64}
# Known and open deviations, (target, dtype) -> reason; marked, not hidden: an XPASS shows a
# fix. (hexagon f32 was here: clang's Hexagon backend selected sfmax/sfmin for NaN-propagating
# max/min and minirt's pow(-inf, y) was NaN; both fixed, see hexagon/renderer.py.)
KNOWN: dict[tuple[str, str], str] = {}


def _known(request, target: str, d: str) -> None:
    if (target, d) in KNOWN:
        request.applymarker(pytest.mark.xfail(reason=KNOWN[target, d]))


@pytest.mark.parametrize("d", FLOATS)
@pytest.mark.parametrize("target", TARGETS)
def test_binary_special_values(target: str, d: str, request) -> None:
    _known(request, target, d)
    ops = claimed_ops(target, d, (*BINARY, *COMPARE))
    ops = [op for op in ops if op not in ("and", "or", "xor")]
    n = len(SPECIAL)
    a = np.repeat(np.array(SPECIAL, _NP[d]), n)
    b = np.tile(np.array(SPECIAL, _NP[d]), n)
    m = GraphMaker()
    x, y = m.input("a", d, a.shape), m.input("b", d, b.shape)
    outs = [m.op(op, [x, y]) for op in ops]
    check_mir(target, m.graph(*outs), [a, b], ops)


@pytest.mark.parametrize("d", FLOATS)
@pytest.mark.parametrize("target", TARGETS)
def test_constant_operands(target: str, d: str, request) -> None:
    """x / 0.0, x * 0.0, max(x, 0.0) (relu) with the zero a constant the compiler can see."""
    _known(request, target, d)
    ops = claimed_ops(target, d, ("div", "mul", "max", "min", "add"))
    x_host = np.array(SPECIAL, _NP[d])
    m = GraphMaker()
    x = m.input("x", d, x_host.shape)
    zero = m.op("constant", [], value=0.0, dtype=d, shape=())
    zeros = m.op("broadcast_in_dim", [zero], shape=x_host.shape, dims=())
    outs = [m.op(op, [x, zeros]) for op in ops]
    check_mir(target, m.graph(*outs), [x_host], [f"{op}(x, 0.0)" for op in ops])


@pytest.mark.parametrize("target", TARGETS)
def test_same_operand_on_both_sides(target: str) -> None:
    """x - x, x / x, x * x, x + x: Mesa's shader compilers fold x - x to 0 and x / x to 1 for
    any float op not marked exact, but inf - inf and NaN - NaN are NaN (layer_norm's
    ``var - var`` flags an overflowed variance with it)."""
    ops = claimed_ops(target, "f32", ("sub", "div", "mul", "add"))
    x_host = np.array(SPECIAL, np.float32)
    m = GraphMaker()
    x = m.input("x", "f32", x_host.shape)
    check_mir(target, m.graph(*(m.op(op, [x, x]) for op in ops)), [x_host],
              [f"{op}(x, x)" for op in ops])


@pytest.mark.parametrize("d", FLOATS)
@pytest.mark.parametrize("target", TARGETS)
def test_unary_special_values(target: str, d: str) -> None:
    ops = claimed_ops(target, d, _UNARY)
    x_host = np.array(SPECIAL, _NP[d])
    moderate = np.array([v for v in SPECIAL if not (np.isfinite(v) and abs(v) > 1e6)], _NP[d])
    m = GraphMaker()
    x, xm = m.input("x", d, x_host.shape), m.input("xm", d, moderate.shape)
    outs = [m.op(op, [xm if op in _HUGE_OK else x]) for op in ops]
    with np.errstate(all="ignore"):
        check_mir(target, m.graph(*outs), [x_host, moderate], ops)


@pytest.mark.parametrize("d", FLOATS)
@pytest.mark.parametrize("target", TARGETS)
def test_reductions_and_casts_of_special_values(target: str, d: str) -> None:
    reds = claimed_ops(target, d,
                       ("reduce_max", "reduce_min", "reduce_sum", "reduce_prod", "argmax"))
    tgt = executable_target(target)
    casts = [c for c in ("i32", "u32", "i8", "u8", "bool") if claims(tgt, "cast", d, c)]
    rows = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 0.0], [-np.inf] * 3,
                     [np.nan, 2.0, np.inf], [-0.0, 0.0, -0.0], [1e30, 1e30, -2.0]], _NP[d])
    m = GraphMaker()
    x = m.input("x", d, rows.shape)
    outs, labels = [], []
    for op in reds:
        attrs = {"axis": 1} if op == "argmax" else {"axes": (1,)}
        outs.append(m.op(op, [x], **attrs))
        labels.append(op)
    for c in casts:
        outs.append(m.op("cast", [x], dtype=c))
        labels.append(f"cast->{c}")
    with np.errstate(all="ignore"):
        check_mir(target, m.graph(*outs), [rows], labels)


# XLA's CPU backend runs with subnormals flushed (the fuzzer's tpu-subnormals entry)
_FLUSHES_SUBNORMALS = {"tpu": "XLA's CPU backend flushes subnormals to zero (tpu-subnormals)"}


@pytest.mark.parametrize("target", TARGETS)
def test_pow_of_subnormal_bases(target: str, request) -> None:
    """pow(-1.4e-45, -1) is -inf (the f32 value is -7.1e44): the GPU helper handed subnormal
    bases to the drivers' pow, whose log2 reads the exponent field as -127, and opengl, vulkan,
    directx and webgpu answered -2^127 (found by the vulkan fuzz shard, case 3 of seed
    20261220). Every exponent class: negative/positive, integer (odd, even) or not."""
    if target in _FLUSHES_SUBNORMALS:
        request.applymarker(pytest.mark.xfail(reason=_FLUSHES_SUBNORMALS[target]))
    claimed_ops(target, "f32", ("pow",))
    tiny = np.float32(1.4e-45)
    bases = [tiny, -tiny, np.float32(1e-40), np.float32(-1e-40), np.float32(1.1754942e-38),
             np.float32(-3e-39)]
    exps = [-1.0, -2.0, -0.5, 0.5, 1.0, 2.0, 3.0, 0.25]
    a = np.repeat(np.array(bases, np.float32), len(exps))
    b = np.tile(np.array(exps, np.float32), len(bases))
    m = GraphMaker()
    x, y = m.input("a", "f32", a.shape), m.input("b", "f32", b.shape)
    check_mir(target, m.graph(m.op("pow", [x, y])), [a, b], ["pow"])
