"""f64 on webgpu, emulated as double-float (webgpu/df64.py), against numpy's own doubles.

The point of the emulation is digits f32 cannot hold: every check here fails by orders of
magnitude if a kernel computed in f32 (relative error 6e-8), or if the driver folded away the
error terms of TwoSum / Dekker's product (then hi + lo is just hi).
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.targets.registry import get_target
from tests.dispatch.graphs import GraphMaker

OK, WHY = get_target("webgpu").available()
needs_adapter = pytest.mark.skipif(not OK, reason=f"no WebGPU adapter here: {WHY}")
REL = 2.0 ** -44  # the library's promise is ~2^-47 per op; a few ops compose


def _graph():
    m = GraphMaker()
    a, b = m.input("a", "f64", (64,)), m.input("b", "f64", (64,))
    w = m.input("w", "f64", (64, 8))
    outs = [m.op(op, [a, b]) for op in ("add", "sub", "mul", "div", "pow")]
    outs += [m.op(op, [a]) for op in ("exp", "log", "sqrt", "floor", "round")]
    outs.append(m.op("rem", [m.op("mul", [a, a]), b]))
    outs.append(m.op("reduce_sum", [a], axes=(0,)))
    outs.append(m.op("dot_general", [a, w], contract=((0,), (0,))))
    outs.append(m.op("cast", [m.op("mul", [a, b])], dtype="f32"))
    outs.append(m.op("cast", [m.op("mul", [a, m.op("constant", [], value=1.0e6, shape=(64,), dtype="f64")])], dtype="i32"))
    return m.graph(*outs)


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    # values with all 52 fraction bits in use (f32 keeps 23 of them)
    a = rng.uniform(0.5, 3.0, 64) + rng.uniform(0, 1, 64) * 2.0 ** -30
    b = rng.uniform(0.25, 2.0, 64) * np.where(rng.uniform(size=64) < 0.5, -1.0, 1.0)
    b = b.round(0)
    b[b == 0] = 1.0
    b = b + rng.uniform(0, 1, 64) * 2.0 ** -31  # integer-ish exponents for pow
    w = rng.standard_normal((64, 8))
    return [a, b, w]


@needs_adapter
def test_emulated_f64_keeps_digits_f32_cannot() -> None:
    g, xs = _graph(), _inputs()
    got = rlx.compile(g, *xs, target="webgpu")(*xs)
    want = rlx.compile(g, *xs, target="numpy")(*xs)
    names = ("add", "sub", "mul", "div", "pow", "exp", "log", "sqrt", "floor", "round", "rem",
             "reduce_sum", "dot_general")
    a, b, _ = xs
    for name, x, y in zip(names, got, want, strict=False):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == np.float64, name
        # a sum that cancels keeps the operands' absolute error, not its own relative one
        # (and log near 1, absolute: its condition number grows without bound there)
        scale = np.abs(a) + np.abs(b) if name in ("add", "sub") else np.abs(y)
        scale = np.maximum(scale, 1.0) if name == "log" else scale
        scale = a * a if name == "rem" else scale  # a remainder that cancels, likewise
        err = np.max(np.abs(x - y) / np.maximum(scale, 1e-300))
        tol = REL * 64 if name in ("dot_general", "reduce_sum", "exp", "log", "pow") else REL
        assert err < tol, (name, err)
    np.testing.assert_array_equal(np.asarray(got[13]), want[13])  # f64 -> f32: rounded once
    np.testing.assert_array_equal(np.asarray(got[14]), want[14])  # f64 -> i32: truncated


@needs_adapter
def test_emulated_f64_special_values_follow_numpy() -> None:
    m = GraphMaker()
    a, b = m.input("a", "f64", (6,)), m.input("b", "f64", (6,))
    g = m.graph(*(m.op(op, [a, b]) for op in ("add", "mul", "div", "max", "lt")))
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 1.0, -2.5])
    y = np.array([-np.inf, 0.0, 1.0, 0.0, np.inf, 0.0])
    with np.errstate(all="ignore"):
        want = rlx.compile(g, x, y, target="numpy")(x, y)
    got = rlx.compile(g, x, y, target="webgpu")(x, y)
    for u, v in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(u), v)


def test_f64_ops_outside_the_library_fail_with_rlx_l002() -> None:
    x = np.ones((3,), np.float64)
    with pytest.raises(LegalizationError) as err:
        rlx.lower(lambda a: np.sin(a), x, target="webgpu")
    assert "RLX-L002" in err.value.codes
