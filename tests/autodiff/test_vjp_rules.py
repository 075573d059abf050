"""Every differentiable MIR primitive: the VJP rule against central finite differences (f64).

Each case emits the primitive directly (with the exact attributes under test), contracts its
result with a fixed random cotangent to get a scalar, and compares rlx's gradient for every
float operand with (f(x + h) - f(x - h)) / 2h computed by running the compiled forward graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.autodiff import NO_GRAD, VJP_RULES, ZERO_GRAD, to_mir, value_and_grad
from rlx_core.autodiff.linalg_rules import LINALG_VJP_RULES
from rlx_core.autodiff.rules import HIR_VJP_RULES
from rlx_core.frontend.tensor import Tensor
from rlx_core.frontend.tracer import current
from rlx_core.ir.graph import Level
from rlx_core.ir.ops.collective import COLLECTIVE_OPS
from rlx_core.ir.ops.mir import MIR_OPS
from rlx_core.ir.ops.splat import SPLAT_OPS

RNG = np.random.default_rng(7)
H = 1e-6


def prim(op: str, *xs: Any, **attrs: Any) -> Tensor:
    """Emit one MIR primitive as it is (no frontend promotion or broadcasting)."""
    vals = [rlx.asarray(x).value for x in xs]
    return Tensor(current().emit(op, vals, attrs))


def rand(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, size=shape)


def pos(*shape: int) -> np.ndarray:
    return rand(*shape, lo=0.5, hi=2.0)


IDX = np.array([2, 0, 2, 1], dtype=np.int32)  # a repeated index: gather grads must accumulate
_M = rand(3, 3)
SPD = _M @ _M.T + 3 * np.eye(3)  # distinct eigenvalues (almost surely)
CSR_PATTERN = (np.array([0, 2, 2, 4, 5], np.int32), np.array([2, 0, 1, 1, 0], np.int32))

# name -> (function of the float operands, operands). Integer data is closed over.
CASES: dict[str, tuple[Callable[..., Tensor], list[np.ndarray]]] = {
    "neg": (lambda x: prim("neg", x), [rand(3, 4)]),
    "abs": (lambda x: prim("abs", x), [rand(3, 4)]),
    "exp": (lambda x: prim("exp", x), [rand(3, 4)]),
    "log": (lambda x: prim("log", x), [pos(3, 4)]),
    "sqrt": (lambda x: prim("sqrt", x), [pos(3, 4)]),
    "rsqrt": (lambda x: prim("rsqrt", x), [pos(3, 4)]),
    "tanh": (lambda x: prim("tanh", x), [rand(3, 4)]),
    "erf": (lambda x: prim("erf", x), [rand(3, 4)]),
    "logistic": (lambda x: prim("logistic", x), [rand(3, 4)]),
    "sin": (lambda x: prim("sin", x), [rand(3, 4)]),
    "cos": (lambda x: prim("cos", x), [rand(3, 4)]),
    "reciprocal": (lambda x: prim("reciprocal", x), [pos(3, 4)]),
    "floor": (lambda x: prim("floor", x), [rand(3, 4) * 3.3 + 0.37]),
    "ceil": (lambda x: prim("ceil", x), [rand(3, 4) * 3.3 + 0.37]),
    "round": (lambda x: prim("round", x), [rand(3, 4) * 3.3 + 0.37]),
    "sign": (lambda x: prim("sign", x), [rand(3, 4) + 0.05]),
    "add": (lambda x, y: prim("add", x, y), [rand(3, 4), rand(3, 4)]),
    "sub": (lambda x, y: prim("sub", x, y), [rand(3, 4), rand(3, 4)]),
    "mul": (lambda x, y: prim("mul", x, y), [rand(3, 4), rand(3, 4)]),
    "div": (lambda x, y: prim("div", x, y), [rand(3, 4), pos(3, 4)]),
    "pow": (lambda x, y: prim("pow", x, y), [pos(3, 4), rand(3, 4)]),
    "max": (lambda x, y: prim("max", x, y), [rand(3, 4), rand(3, 4)]),
    "min": (lambda x, y: prim("min", x, y), [rand(3, 4), rand(3, 4)]),
    "rem": (lambda x, y: prim("rem", x, y), [rand(3, 4) * 5 + 0.13, pos(3, 4)]),
    "select": (lambda x, y: prim("select", prim("gt", x, y), x * y, x - y),
               [rand(3, 4), rand(3, 4)]),
    "cast": (lambda x: prim("cast", prim("cast", x, dtype=rlx.f32), dtype=rlx.f64) * 1.0,
             [rand(3, 4)]),
    "reduce_sum": (lambda x: prim("reduce_sum", x, axes=(0, 2)), [rand(2, 3, 4)]),
    "reduce_max": (lambda x: prim("reduce_max", x, axes=(1,)), [rand(2, 3, 4)]),
    "reduce_min": (lambda x: prim("reduce_min", x, axes=(0, 2)), [rand(2, 3, 4)]),
    "reduce_prod": (lambda x: prim("reduce_prod", x, axes=(1,)), [pos(2, 3, 4)]),
    "broadcast_in_dim": (lambda x: prim("broadcast_in_dim", x, shape=(2, 3, 5, 4),
                                        dims=(1, 3)), [rand(3, 1)]),
    "reshape": (lambda x: prim("reshape", x, shape=(4, 6)), [rand(2, 3, 4)]),
    "transpose": (lambda x: prim("transpose", x, perm=(2, 0, 1)), [rand(2, 3, 4)]),
    "slice": (lambda x: prim("slice", x, start=(1, 0, 1), limit=(5, 3, 7), stride=(2, 1, 3)),
              [rand(6, 3, 8)]),
    "pad": (lambda x: prim("pad", x, low=(1, 0), high=(2, 3), value=0.5), [rand(3, 4)]),
    "concat": (lambda x, y: prim("concat", x, y, x, axis=1), [rand(2, 3), rand(2, 5)]),
    "gather": (lambda x: prim("gather", x, IDX.reshape(2, 2), axis=1), [rand(2, 3, 4)]),
    "scatter_add": (lambda x, u: prim("scatter_add", x, IDX, u, axis=0),
                    [rand(3, 2), rand(4, 2)]),
    "dot_general": (lambda x, y: prim("dot_general", x, y, contract=((2, 0), (0, 3)),
                                      batch=((1,), (2,))), [rand(2, 3, 4, 5), rand(4, 6, 3, 2)]),
    # HIR ops kept whole through differentiation (rules.HIR_VJP_RULES)
    "softmax": (lambda x: rlx.nn.softmax(x, axis=1), [rand(2, 3, 4) * 3]),
    "log_softmax": (lambda x: rlx.nn.log_softmax(x, axis=-1), [rand(3, 5) * 3]),
    # every value clipped (|x| > 1 with scale 0.1 and codes in [-8, 7]), where the
    # straight-through gradient and the true one agree (0); tests/quant/test_qat.py checks the
    # in-range STE and the scale's LSQ gradient
    "fake_quantize": (lambda x: rlx.quant.fake_quantize(x, 0.1, 0.5, -8, 7),
                      [np.sign(rand(3, 4)) * (1.0 + np.abs(rand(3, 4)))]),
    # dense linear algebra (autodiff/linalg_rules.py); symmetric inputs read their lower
    # triangle, so the perturbed upper entries get 0, which the finite differences confirm
    "solve": (lambda a, b: rlx.linalg.solve(a, b), [rand(3, 3) + 3 * np.eye(3), rand(3, 2)]),
    "triangular_solve": (lambda a, b: rlx.linalg.triangular_solve(a, b, lower=False),
                         [rand(3, 3) + 3 * np.eye(3), rand(3, 2)]),
    "cholesky": (lambda a: rlx.linalg.cholesky(a), [SPD]),
    "eigh": (lambda a: rlx.linalg.eigh(a)[1] * 2.0 + rlx.linalg.eigh(a)[0], [SPD]),
    "det": (lambda a: rlx.linalg.det(a), [rand(2, 3, 3) + 2 * np.eye(3)]),
    "slogdet": (lambda a: rlx.linalg.slogdet(a)[1], [rand(3, 3) + 2 * np.eye(3)]),
    "inv": (lambda a: rlx.linalg.inv(a), [rand(3, 3) + 3 * np.eye(3)]),
    # sparse: a 4 x 3 CSR pattern with an empty row and a duplicate entry, closed over
    "spmv": (lambda v, x: rlx.sparse.spmv(rlx.sparse.csr(*CSR_PATTERN, v, (4, 3)), x),
             [rand(5), rand(3)]),
    "spmm": (lambda v, x: rlx.sparse.spmm(rlx.sparse.csr(*CSR_PATTERN, v, (4, 3)).T, x),
             [rand(5), rand(4, 2)]),
    "sddmm": (lambda x, y: rlx.sparse.sddmm(rlx.sparse.csr(*CSR_PATTERN, rand(5), (4, 3)),
                                            x, y).data, [rand(4, 2), rand(3, 2)]),
    # collectives, in a singleton world of one rank (where each is an identity): this checks
    # the rules' shapes and wiring; tests/distributed/workers/ir_collectives.py checks their
    # values on 2 ranks (send's too: a send needs a peer)
    **{name: (lambda x, name=name, a=a: Tensor(current().emit(
        name, [rlx.asarray(x).value], {**a, "ranks": 1})), [rand(2, 4)])
       for name, a in (("all_reduce", {"op": "mean"}), ("replicate", {}),
                       ("all_gather", {"axis": 1}), ("reduce_scatter", {"axis": 0}),
                       ("broadcast", {}))},
}


# the f32 round trip of the cast case makes h = 1e-6 meaningless; it is linear, so a wide step
# is exact up to f32 rounding
STEP = {"cast": (1e-2, 1e-4)}


def _scalarized(fn: Callable[..., Tensor], cot: np.ndarray) -> Callable[..., Tensor]:
    def loss(*xs: Tensor) -> Tensor:
        y = fn(*xs)
        return (y * cot).sum()

    return loss


def _cotangent_for(fn: Callable[..., Tensor], args: list[np.ndarray]) -> np.ndarray:
    g = rlx.trace(fn, *args)
    shape = g.output_types()[0].shape
    return RNG.uniform(-1, 1, size=shape)


@pytest.mark.parametrize("op", sorted(CASES))
def test_vjp_matches_finite_differences(op: str) -> None:
    if op in COLLECTIVE_OPS:
        pytest.importorskip("mpi4py", reason="collectives run through mpi4py")
    fn, args = CASES[op]
    cot = _cotangent_for(fn, args)
    loss = _scalarized(fn, cot)
    nums = tuple(range(len(args)))
    value, grads = value_and_grad(loss, argnums=nums)(*args)
    forward = rlx.compile(loss, *args)
    assert np.isclose(value, forward(*args))
    h, tol = STEP.get(op, (H, 1e-6))
    for k, (x, gx) in enumerate(zip(args, grads, strict=False)):
        want = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[k][i] += h
            minus[k][i] -= h
            want[i] = (float(forward(*plus)) - float(forward(*minus))) / (2 * h)
        np.testing.assert_allclose(gx, want, rtol=tol, atol=tol / 10,
                                   err_msg=f"{op}: gradient of operand {k}")


def test_every_float_primitive_has_a_rule_and_a_check() -> None:
    for op in (*MIR_OPS, *COLLECTIVE_OPS):
        assert op in VJP_RULES or op in ZERO_GRAD or op in NO_GRAD, f"{op} is unclassified"
    # the splatting rules are checked by finite differences in tests/splat/test_ops.py; send's
    # on 2 ranks (tests/distributed/workers/ir_collectives.py)
    assert set(VJP_RULES) | set(ZERO_GRAD) | set(HIR_VJP_RULES) - set(SPLAT_OPS) <= (
        set(CASES) | {"send"})


# the splatting and linear algebra ops have no decomposition at all (tests/linalg checks the
# latter stay whole)
@pytest.mark.parametrize("op", sorted(set(HIR_VJP_RULES) - set(SPLAT_OPS) - set(LINALG_VJP_RULES)))
def test_hir_ops_with_rules_stay_whole_through_differentiation(op: str) -> None:
    """to_mir lowers every other composite, but keeps softmax and log_softmax: the gradient
    graph holds the op itself (a target can keep its kernel), none of its max / exp / log
    decomposition, and its backward is the rule's short expression of the output."""
    fn, (x,) = CASES[op]
    g = rlx.autodiff.grad_graph(lambda a: (fn(a) * rlx.asarray(_cotangent_for(fn, [x]))).sum(), x)
    ops = [n.op for n in g.nodes]
    assert ops.count(op) == 1 and "reduce_max" not in ops, ops
    mir = to_mir(rlx.trace(lambda a: fn(a).sum(), x))
    assert [n.op for n in mir.nodes].count(op) == 1 and mir.level is Level.HIR
    plain = to_mir(rlx.trace(lambda a: rlx.nn.gelu(a).sum(), x))
    assert plain.level is Level.MIR and "gelu" not in [n.op for n in plain.nodes]
