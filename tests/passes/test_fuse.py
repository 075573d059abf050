"""Fuse: which nodes end up in which kernel, and that the LIR it makes verifies and runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlx_core.compile_trace import CompileTrace
from rlx_core.errors import VerifyError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Graph, Kernel, Level, TensorType, Value, ValueKind
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import PassContext
from rlx_core.passes.fuse import Fuse
from rlx_core.targets.numpy_ref.executor import build_program, interpret

F32 = dt.f32


def inp(name: str, *shape: int, dtype: dt.DType = F32) -> Value:
    return Value(name, TensorType(dtype, shape), ValueKind.INPUT)


def par(name: str, *shape: int) -> Value:
    return Value(name, TensorType(F32, shape), ValueKind.PARAM)


def graph(b: Builder, inputs: list[Value], outs: list[Value], params: list[Value] = ()) -> Graph:
    g = Graph("g", Level.MIR, tuple(inputs), tuple(params), tuple(b.nodes),
              tuple(o.name for o in outs))
    return verify(g)


def fuse(g: Graph, trace: CompileTrace | None = None) -> Graph:
    lir = Fuse().run(g, PassContext(trace=trace))
    return verify(lir)


def kinds(lir: Graph) -> list[str]:
    return [k.kind for k in lir.kernels]


def kernel_of(lir: Graph, value: str) -> Kernel:
    return next(k for k in lir.kernels if any(n.name == value for n in k.nodes))


def splat(b: Builder, value: Any, shape: tuple[int, ...], dtype: dt.DType = F32) -> Value:
    return b.emit("constant", [], {"value": value, "shape": shape, "dtype": dtype})


def bcast(b: Builder, x: Value, shape: tuple[int, ...], dims: tuple[int, ...]) -> Value:
    return b.emit("broadcast_in_dim", [x], {"shape": shape, "dims": dims})


def same_results(g: Graph, lir: Graph, inputs: list[np.ndarray], params: dict | None = None):
    want = interpret(g, inputs, params)
    got = build_program(lir).run(inputs, params or {})
    for w, o in zip(want, got, strict=True):
        np.testing.assert_array_equal(o, w)


def mlp_layer() -> tuple[Graph, Value]:
    x, w, bias = inp("x", 4, 8), par("w", 16, 8), par("b", 16)
    b = Builder()
    d = b.emit("dot_general", [x, w], {"contract": ((1,), (1,))})
    s = b.emit("add", [d, bcast(b, bias, (4, 16), (1,))])
    y = b.emit("max", [s, splat(b, 0.0, (4, 16))])
    return graph(b, [x], [y], [w, bias]), y


def softmax_graph() -> tuple[Graph, dict[str, Value]]:
    x = inp("x", 3, 5)
    b = Builder()
    m = b.emit("reduce_max", [x], {"axes": (1,)})
    sub = b.emit("sub", [x, bcast(b, m, (3, 5), (0,))])
    e = b.emit("exp", [sub])
    s = b.emit("reduce_sum", [e], {"axes": (1,)})
    y = b.emit("div", [e, bcast(b, s, (3, 5), (0,))])
    return graph(b, [x], [y]), {"max": m, "sub": sub, "exp": e, "sum": s, "out": y}


def test_matmul_bias_relu_is_one_matmul_kernel() -> None:
    g, y = mlp_layer()
    lir = fuse(g)
    assert kinds(lir) == ["matmul"]
    (k,) = lir.kernels
    assert [n.op for n in k.nodes] == ["dot_general", "broadcast_in_dim", "add", "constant", "max"]
    assert k.inputs == ("x", "w", "b") and k.outputs == (y.name,)
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((16, 8), dtype=np.float32),
              "b": rng.standard_normal(16, dtype=np.float32)}
    xs = rng.standard_normal((4, 8), dtype=np.float32)
    same_results(g, lir, [xs], params)
    out = build_program(lir).run([xs], params)[0]
    np.testing.assert_allclose(out, np.maximum(xs @ params["w"].T + params["b"], 0), rtol=1e-5)


def test_softmax_decomposition_forms_reduce_kernels() -> None:
    g, v = softmax_graph()
    lir = fuse(g)
    assert kinds(lir) == ["reduce", "elementwise", "reduce", "elementwise"]
    # exp is read by reduce_sum and by div: used twice, so it is materialised
    assert v["exp"].name in kernel_of(lir, v["exp"].name).outputs
    # sub is only read by exp: it stays inside its kernel, never a buffer
    assert all(v["sub"].name not in k.outputs for k in lir.kernels)
    # the broadcasts of the reductions ride inside their consumers as index maps
    assert kernel_of(lir, v["out"].name).inputs == (v["sum"].name, v["exp"].name)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    same_results(g, lir, [x])


def test_single_use_producers_join_the_reduction_and_consumers_follow() -> None:
    x = inp("x", 6, 7)
    b = Builder()
    sq = b.emit("mul", [x, x])
    s = b.emit("reduce_sum", [sq], {"axes": (1,)})
    n = b.emit("sqrt", [s])
    y = b.emit("mul", [n, splat(b, 2.0, (6,))])
    g = graph(b, [x], [y])
    lir = fuse(g)
    assert kinds(lir) == ["reduce"]
    assert [nd.op for nd in lir.kernels[0].nodes] == ["mul", "reduce_sum", "sqrt", "constant",
                                                       "mul"]
    same_results(g, lir, [np.random.default_rng(2).standard_normal((6, 7)).astype(np.float32)])


def test_value_used_by_two_kernels_is_materialised() -> None:
    x = inp("x", 3, 4)
    b = Builder()
    a = b.emit("exp", [x])
    t = b.emit("transpose", [a], {"perm": (1, 0)})  # opaque: reads a from another kernel
    c = b.emit("neg", [a])  # elementwise: joins a's kernel
    g = graph(b, [x], [t, c])
    lir = fuse(g)
    assert kinds(lir) == ["elementwise", "opaque"]
    assert lir.kernels[0].outputs == (a.name, c.name)
    assert lir.kernels[1].inputs == (a.name,)
    same_results(g, lir, [np.arange(12, dtype=np.float32).reshape(3, 4) / 7])


def test_elementwise_chain_keeps_intermediates_inside() -> None:
    x, y = inp("x", 5), inp("y", 5)
    b = Builder()
    a = b.emit("add", [x, y])
    t = b.emit("tanh", [a])
    c = b.emit("mul", [t, a])
    g = graph(b, [x, y], [c])
    lir = fuse(g)
    assert kinds(lir) == ["elementwise"]
    assert lir.kernels[0].outputs == (c.name,) and lir.kernels[0].inputs == ("x", "y")


def test_shape_change_starts_a_new_kernel() -> None:
    x = inp("x", 2, 3)
    b = Builder()
    a = b.emit("exp", [x])
    r = b.emit("reshape", [a], {"shape": (6,)})
    c = b.emit("neg", [r])
    g = graph(b, [x], [c])
    assert kinds(fuse(g)) == ["elementwise", "opaque", "elementwise"]


def test_shared_splat_constant_is_copied_into_each_kernel() -> None:
    x = inp("x", 4)
    b = Builder()
    zero = splat(b, 0.0, (4,))
    r1 = b.emit("max", [x, zero])
    t = b.emit("reshape", [r1], {"shape": (2, 2)})
    f = b.emit("reshape", [t], {"shape": (4,)})
    r2 = b.emit("min", [f, zero])
    g = graph(b, [x], [r2])
    lir = fuse(g)
    assert kinds(lir) == ["elementwise", "opaque", "opaque", "elementwise"]
    first, last = lir.kernels[0], lir.kernels[-1]
    assert first.nodes[0].name == zero.name  # the first reader keeps the name
    copy = last.nodes[0]
    assert copy.op == "constant" and copy.name != zero.name and copy.loc == zero_loc(g, zero)
    assert last.inputs == (f.name,)  # the constant is not read across kernels
    assert "constant" not in [k.nodes[0].op for k in lir.kernels if k.kind == "opaque"]
    same_results(g, lir, [np.array([-2.0, -0.5, 0.5, 3.0], dtype=np.float32)])


def zero_loc(g: Graph, v: Value):
    return g.producers()[v.name].loc


def test_broadcast_returned_or_read_by_matmul_is_materialised() -> None:
    x, v = inp("x", 3), inp("v", 3, 2)
    b = Builder()
    bx = bcast(b, x, (2, 3), (1,))
    d = b.emit("dot_general", [bx, v], {"contract": ((1,), (0,))})
    g = graph(b, [x, v], [d, bx])
    lir = fuse(g)
    assert kinds(lir) == ["elementwise", "matmul"]
    assert lir.kernels[0].outputs == (bx.name,) and lir.kernels[1].inputs == (bx.name, "v")
    same_results(g, lir, [np.array([1, 2, 3], np.float32), np.ones((3, 2), np.float32)])


def test_virtual_chains_ride_into_elementwise_and_reduce_kernels() -> None:
    x, v = inp("x", 3), inp("v", 2, 3)
    b = Builder()
    half = bcast(b, splat(b, 0.5, ()), (2, 3), ())  # scalar splat -> broadcast: both virtual
    s = b.emit("reduce_sum", [bcast(b, x, (2, 3), (1,))], {"axes": (0,)})  # reduction of a bcast
    y = b.emit("mul", [v, half])
    g = graph(b, [x, v], [s, y])
    lir = fuse(g)
    assert kinds(lir) == ["reduce", "elementwise"]
    assert lir.kernels[0].inputs == ("x",) and lir.kernels[1].inputs == ("v",)
    assert [n.op for n in lir.kernels[1].nodes] == ["constant", "broadcast_in_dim", "mul"]
    same_results(g, lir, [np.array([1, 2, 3], np.float32), np.ones((2, 3), np.float32)])


def test_join_that_would_create_a_cycle_is_refused() -> None:
    # a -> reduce -> broadcast -> c, and c also reads a: c cannot join a's kernel, because that
    # kernel would both feed the reduction and wait for it
    x = inp("x", 3, 4)
    b = Builder()
    a = b.emit("exp", [x])
    s = b.emit("reduce_sum", [a], {"axes": (1,)})
    c = b.emit("div", [a, bcast(b, s, (3, 4), (0,))])
    g = graph(b, [x], [c])
    lir = fuse(g)
    assert kinds(lir) == ["elementwise", "reduce", "elementwise"]
    same_results(g, lir, [np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)])


def test_opaque_ops_stay_alone_and_native_composites_pass_through() -> None:
    x, idx = inp("x", 4, 3), inp("i", 2, dtype=dt.i32)
    b = Builder()
    gth = b.emit("gather", [x, idx], {"axis": 0})
    sm = b.emit("softmax", [gth], {"axis": -1})
    io = b.emit("iota", [], {"shape": (2, 3), "dim": 1, "dtype": F32})
    y = b.emit("add", [sm, io])
    g = Graph("g", Level.MIR, (x, idx), (), tuple(b.nodes), (y.name,))
    lir = Fuse().run(g, PassContext())
    verify(lir, native_composites={"softmax"})
    assert kinds(lir) == ["opaque", "opaque", "opaque", "elementwise"]
    same_results(g, lir, [np.arange(12, dtype=np.float32).reshape(4, 3),
                          np.array([3, 1], np.int32)])


def test_trace_records_one_rule_per_kernel() -> None:
    g, _ = softmax_graph()
    trace = CompileTrace()
    lir = fuse(g, trace)
    rules = trace.take_rules()
    assert [r.rule for r in rules] == [f"fuse-{k.kind}" for k in lir.kernels]
    assert all(r.file.endswith("passes/fuse.py") and r.line > 0 for r in rules)
    assert sum(len(r.after) for r in rules) == len(lir.nodes)


def test_fusion_is_deterministic_and_keeps_graph_io() -> None:
    g, _ = softmax_graph()
    a, b = fuse(g), fuse(g)
    assert print_graph(a) == print_graph(b)
    assert a.inputs == g.inputs and a.outputs == g.outputs and a.level is Level.LIR
    assert [k.name for k in a.kernels] == [f"k{i}" for i in range(len(a.kernels))]


def test_graph_output_that_is_internal_becomes_a_kernel_output() -> None:
    x = inp("x", 4)
    b = Builder()
    a = b.emit("exp", [x])
    c = b.emit("neg", [a])
    g = graph(b, [x], [a, c])
    lir = fuse(g)
    assert kinds(lir) == ["elementwise"] and lir.kernels[0].outputs == (a.name, c.name)


def test_fuse_rejects_non_mir() -> None:
    g, _ = mlp_layer()
    lir = fuse(g)
    with pytest.raises(VerifyError, match="fuse expects a MIR graph"):
        Fuse().run(lir, PassContext())
