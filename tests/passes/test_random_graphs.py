"""Property: on random MIR graphs, constant_fold + algebraic_simplify + cse + dce change no
result bit (numpy reference semantics), keep the graph valid, and reach a fixpoint."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlx_core.ir.graph import Graph, Value
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify
from rlx_core.passes.algebraic_simplify import AlgebraicSimplify
from rlx_core.passes.base import PassContext
from rlx_core.passes.constant_fold import ConstantFold
from rlx_core.passes.cse import CSE
from rlx_core.passes.dce import DCE
from tests.passes.helpers import G, run_numpy, same_bits

PASSES = (ConstantFold(), AlgebraicSimplify(), CSE(), DCE())
# identities (0, -0.0, 1) come first and are drawn half of the time: they are what rules match
FLOAT_SPLATS = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, float("nan"), float("inf"), 3e38]
INT_SPLATS = [0, 1, -1, 2, 7, 2**31 - 1, -(2**31)]
FLOAT_IDS, INT_IDS = FLOAT_SPLATS[:3], INT_SPLATS[:2]
BINARY = ["add", "sub", "mul", "div", "max", "min"]
UNARY = ["neg", "abs", "sign"]
SHAPE = (4,)


@st.composite
def programs(draw: st.DrawFn) -> tuple[Graph, dict[str, np.ndarray]]:
    is_float = draw(st.booleans())
    dtype = "f32" if is_float else "i32"
    splats = FLOAT_SPLATS if is_float else INT_SPLATS
    ids = FLOAT_IDS if is_float else INT_IDS
    g = G()
    pool: list[Value] = [g.input("x", dtype, SHAPE), g.input("y", dtype, SHAPE)]
    for _ in range(draw(st.integers(1, 4))):
        v = draw(st.sampled_from(ids if draw(st.booleans()) else splats))
        if draw(st.booleans()):
            pool.append(g.op("broadcast_in_dim", g.const(v, dtype), shape=SHAPE, dims=()))
        else:
            vals = draw(st.lists(st.sampled_from(splats), min_size=4, max_size=4))
            pool.append(g.const(tuple(vals), dtype, SHAPE))
    consts = pool[2:]
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["binary"] * 4 + ["unary", "select", "reshape"]))
        a = draw(st.sampled_from(pool[:1] if draw(st.booleans()) else pool))
        # identities need a constant operand: pick one half of the time
        b = draw(st.sampled_from(consts if draw(st.booleans()) else pool))
        if kind == "binary":
            pool.append(g.op(draw(st.sampled_from(BINARY)), a, b))
        elif kind == "unary":
            pool.append(g.op(draw(st.sampled_from(UNARY)), a))
        elif kind == "select":
            pool.append(g.op("select", g.op(draw(st.sampled_from(["lt", "eq"])), a, b), a, b))
        else:
            pool.append(g.op("reshape", g.op("reshape", a, shape=(2, 2)), shape=SHAPE))
    outs = [pool[-1], *draw(st.lists(st.sampled_from(pool[2:]), max_size=2))]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    # %x always holds the awkward values (signed zero, NaN, inf / the integer extremes)
    if is_float:
        x = rng.permutation(np.array([-0.0, np.nan, -np.inf, 1.25], np.float32))
        y = rng.choice(np.array(FLOAT_SPLATS + [1.25, -3.5], np.float32), SHAPE)
    else:
        x = rng.permutation(np.array([-(2**31), -1, 0, 2**31 - 1], np.int32))
        y = rng.choice(np.array(INT_SPLATS + [12345], np.int32), SHAPE)
    args = {"x": x, "y": y}
    return g.graph(*outs), args


@settings(
    max_examples=80, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(programs())
def test_optimisations_preserve_every_bit(case: tuple[Graph, dict[str, np.ndarray]]) -> None:
    g, args = case
    ctx = PassContext()
    out = g
    for p in PASSES:
        out = verify(p.run(out, ctx))
    with np.errstate(all="ignore"):
        want, got = run_numpy(g, args), run_numpy(out, args)
    for w, v in zip(want, got, strict=True):
        assert same_bits(v, w), (print_graph(g), print_graph(out), w, v)
    # a second round finds nothing left to do
    again = out
    for p in PASSES:
        again = p.run(again, ctx)
    assert print_graph(again) == print_graph(out)
