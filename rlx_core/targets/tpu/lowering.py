"""One StableHLO lowering rule per MIR primitive, with the numpy reference's semantics.

Each rule takes the writer, the MIR node and its operands (StableHLO values) and returns the
value holding the node's result. Where StableHLO leaves a choice open the rule pins the
reference's answer: f16/bf16 arithmetic is done in f32 and rounded once, bool arithmetic in
i8 read back as ``!= 0``, ``cast`` to bool is ``!= 0``, negative gather indices count from the
end, argmax takes the first maximum with NaN as the largest value, dot products ask for
``HIGHEST`` precision (a TPU would otherwise multiply f32 in bf16 passes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Node, TensorType
from rlx_core.targets.tpu.hlo_types import dense, scalar_literal, tensor
from rlx_core.targets.tpu.writer import V, Writer


class HloRenderError(RlxError):
    """A MIR node reached the StableHLO renderer without a rule for its op or dtype."""

    code = "RLX-H001"


Rule = Callable[[Writer, Node, list[V]], V]
_HALF = (dt.f16, dt.bf16)

# MIR unary op -> StableHLO op on floats (rsqrt, logistic and erf have their own ops too)
_FLOAT_UNARY = {
    "neg": "stablehlo.negate", "abs": "stablehlo.abs", "exp": "stablehlo.exponential",
    "log": "stablehlo.log", "sqrt": "stablehlo.sqrt", "rsqrt": "stablehlo.rsqrt",
    "tanh": "stablehlo.tanh", "erf": "chlo.erf", "logistic": "stablehlo.logistic",
    "sin": "stablehlo.sine", "cos": "stablehlo.cosine", "floor": "stablehlo.floor",
    "ceil": "stablehlo.ceil", "round": "stablehlo.round_nearest_even", "sign": "stablehlo.sign",
}
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide",
           "pow": "power", "max": "maximum", "min": "minimum", "rem": "remainder",
           "and": "and", "or": "or", "xor": "xor"}
_COMPARE = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}


def _fail(node: Node, why: str) -> HloRenderError:
    return HloRenderError(f"%{node.name} = {node.op}: {why}",
                          hint="the tpu capability table claims more than its renderer has; "
                               "use target cpu meanwhile and report it")


def _wide(w: Writer, x: V) -> V:
    """f16/bf16 operands are computed in f32 (the reference's rule)."""
    return w.convert(x, dt.f32) if x.type.dtype in _HALF else x


def _ne_zero(w: Writer, x: V) -> V:
    return w.compare("NE", x, w.like(0, x))


# ---- elementwise ----------------------------------------------------------------------------


def unary(w: Writer, node: Node, args: list[V]) -> V:
    x = args[0]
    d = x.type.dtype
    op = node.op
    if op == "logical_not":
        return w.unary("stablehlo.not", x)
    if d == dt.bool_ and op in ("neg", "abs", "sign"):
        return x  # computed in i8 and read back as != 0: the operand itself
    if d.is_int:
        if op == "neg":
            return w.binary("subtract", w.like(0, x), x)  # also wraps unsigned values
        if op == "abs":
            return x if d.kind is dt.Kind.UINT else w.unary("stablehlo.abs", x)
        if op == "sign":
            if d.kind is dt.Kind.UINT:
                return w.convert(_ne_zero(w, x), d)
            return w.unary("stablehlo.sign", x)
        raise _fail(node, f"{op} of integers is not defined")
    if not d.is_float:
        raise _fail(node, f"no rule for {op} of {d.name}")
    y = _wide(w, x)
    if op == "reciprocal":
        r = w.binary("divide", w.like(1.0, y), y)
    elif op == "erf":
        r = w.op(f"chlo.erf {y.name} : {y.ty} -> {y.ty}", y.type)
    elif op in _FLOAT_UNARY:
        r = w.unary(_FLOAT_UNARY[op], y)
    else:
        raise _fail(node, f"no rule for {op}")
    return w.convert(r, d)


def binary(w: Writer, node: Node, args: list[V]) -> V:
    a, b = args
    d = a.type.dtype
    if node.op in ("and", "or", "xor"):
        return w.binary(_BINARY[node.op], a, b)
    if d == dt.bool_:  # arithmetic on bool: in i8, read back as != 0
        return _ne_zero(w, _arith(w, node.op, w.convert(a, dt.i8), w.convert(b, dt.i8)))
    if not (d.is_int or d.is_float):
        raise _fail(node, f"no rule for {d.name}")
    return _arith(w, node.op, a, b)


def _arith(w: Writer, op: str, a: V, b: V) -> V:
    d = a.type.dtype
    if d.is_int and op == "pow":
        return _int_pow(w, a, b)
    if d.is_int and op in ("div", "rem"):
        # the reference's x / 0 == x % 0 == 0 (XLA gives -1 and x)
        r = w.binary(_BINARY[op], a, b)
        return w.select(w.compare("EQ", b, w.like(0, b)), w.like(0, a), r)
    return w.convert(w.binary(_BINARY[op], _wide(w, a), _wide(w, b)), d)


def _int_pow(w: Writer, a: V, b: V) -> V:
    """Integer power; a negative exponent truncates 1/a^n toward zero (0 unless |a| == 1)."""
    d = a.type.dtype
    if d.kind is dt.Kind.UINT:
        return w.binary("power", a, b)
    zero = w.like(0, b)
    neg = w.compare("LT", b, zero)
    base = w.binary("power", a, w.select(neg, zero, b))
    one, minus_one = w.like(1, a), w.like(-1, a)
    odd = _ne_zero(w, w.binary("remainder", b, w.like(2, b)))
    frac = w.select(w.compare("EQ", a, one), one,
                    w.select(w.compare("EQ", a, minus_one),
                             w.select(odd, minus_one, one), w.like(0, a)))
    return w.select(neg, frac, base)


def compare(w: Writer, node: Node, args: list[V]) -> V:
    return w.compare(_COMPARE[node.op], args[0], args[1])


def select(w: Writer, node: Node, args: list[V]) -> V:
    return w.select(*args)


def cast(w: Writer, node: Node, args: list[V]) -> V:
    """XLA's convert truncates and saturates float -> int with NaN -> 0, and wraps int -> int."""
    x, d = args[0], node.type.dtype
    if d == x.type.dtype:
        return x
    if d == dt.bool_:
        return _ne_zero(w, x)
    return w.convert(x, d)


# ---- reductions -----------------------------------------------------------------------------


def _lowest(d: DType) -> Any:
    if d.is_float:
        return float("-inf")
    if d == dt.bool_:
        return False
    return -(2 ** (d.bits - 1)) if d.kind is dt.Kind.INT else 0


def _highest(d: DType) -> Any:
    if d.is_float:
        return float("inf")
    if d == dt.bool_:
        return True
    return 2 ** (d.bits - 1) - 1 if d.kind is dt.Kind.INT else 2 ** d.bits - 1


def reduce(w: Writer, node: Node, args: list[V]) -> V:
    """``stablehlo.reduce`` over ``axes`` with the body and init of the op (bool: or / and)."""
    x, d = args[0], node.type.dtype
    axes = tuple(node.attr("axes"))
    if not axes:
        return x
    boolean = d == dt.bool_
    body, init = {
        "reduce_sum": ("or" if boolean else "add", False if boolean else 0),
        "reduce_prod": ("and" if boolean else "multiply", True if boolean else 1),
        "reduce_max": ("or" if boolean else "maximum", _lowest(d)),
        "reduce_min": ("and" if boolean else "minimum", _highest(d)),
    }[node.op]
    y = _wide(w, x)
    scalar = TensorType(y.type.dtype, ())
    c = w.const(init, scalar)
    out = TensorType(y.type.dtype, node.type.shape)
    r = w.op(f"stablehlo.reduce({y.name} init: {c.name}) applies stablehlo.{body} across "
             f"dimensions = [{', '.join(map(str, axes))}] : ({y.ty}, {tensor(scalar)}) -> "
             f"{tensor(out)}", out)
    return w.convert(r, d)


def argmax(w: Writer, node: Node, args: list[V]) -> V:
    """A two-operand reduce of (value, index): the first maximum, NaN counting as largest."""
    x = args[0]
    d = x.type.dtype
    ax = node.attr("axis")
    idx_d = node.type.dtype
    it = TensorType(idx_d, x.type.shape)
    iota = w.op(f"stablehlo.iota dim = {ax} : {tensor(it)}", it)
    sv, si = TensorType(d, ()), TensorType(idx_d, ())
    cv, ci = w.const(_lowest(d), sv), w.const(0, si)
    vt, ot = tensor(TensorType(d, node.type.shape)), tensor(node.type)
    res = w.fresh()
    w.line(f"{res}:2 = stablehlo.reduce({x.name} init: {cv.name}), ({iota.name} init: "
           f"{ci.name}) across dimensions = [{ax}] : ({x.ty}, {tensor(it)}, {tensor(sv)}, "
           f"{tensor(si)}) -> ({vt}, {ot})")
    b = Writer(indent=w.indent + "  ")
    b._n = w._n
    a1, i1, a2, i2 = V("%a1", sv), V("%i1", si), V("%a2", sv), V("%i2", si)
    b.lines.append(f"{w.indent} reducer({a1.name}: {tensor(sv)}, {a2.name}: {tensor(sv)}) "
                   f"({i1.name}: {tensor(si)}, {i2.name}: {tensor(si)}) {{")
    pick = b.compare("GT", a1, a2)
    tie = b.compare("EQ", a1, a2)
    if d.is_float:
        nan1, nan2 = b.compare("NE", a1, a1), b.compare("NE", a2, a2)
        pick = b.binary("or", pick, b.binary("and", nan1, b.unary("stablehlo.not", nan2)))
        tie = b.binary("or", tie, b.binary("and", nan1, nan2))
    pick = b.binary("or", pick, b.binary("and", tie, b.compare("LT", i1, i2)))
    rv, ri = b.select(pick, a1, a2), b.select(pick, i1, i2)
    b.line(f"stablehlo.return {rv.name}, {ri.name} : {tensor(sv)}, {tensor(si)}")
    b.lines.append(f"{w.indent} }}")
    w._n = b._n
    w.lines.extend(b.lines)
    return V(f"{res}#1", node.type)


# ---- data movement --------------------------------------------------------------------------


def _ints(xs: Any) -> str:
    return ", ".join(str(int(v)) for v in xs)


def broadcast_in_dim(w: Writer, node: Node, args: list[V]) -> V:
    x, t = args[0], node.type
    return w.op(f"stablehlo.broadcast_in_dim {x.name}, dims = [{_ints(node.attr('dims'))}] : "
                f"({x.ty}) -> {tensor(t)}", t)


def reshape(w: Writer, node: Node, args: list[V]) -> V:
    return w.reshape(args[0], node.type.shape)


def transpose(w: Writer, node: Node, args: list[V]) -> V:
    x, t = args[0], node.type
    return w.op(f"stablehlo.transpose {x.name}, dims = [{_ints(node.attr('perm'))}] : "
                f"({x.ty}) -> {tensor(t)}", t)


def slice_(w: Writer, node: Node, args: list[V]) -> V:
    x, t = args[0], node.type
    spans = ", ".join(f"{s}:{e}:{st}" for s, e, st in
                      zip(node.attr("start"), node.attr("limit"), node.attr("stride"),
                          strict=True))
    return w.op(f"stablehlo.slice {x.name} [{spans}] : ({x.ty}) -> {tensor(t)}", t)


def pad(w: Writer, node: Node, args: list[V]) -> V:
    import numpy as np

    from rlx_core.targets.numpy_ref.semantics import convert

    x, t = args[0], node.type
    fill = convert(np.asarray(node.attr("value", 0.0)), t.dtype).item()
    c = w.const(fill, TensorType(t.dtype, ()))
    zeros = _ints([0] * x.type.rank)
    return w.op(f"stablehlo.pad {x.name}, {c.name}, low = [{_ints(node.attr('low'))}], "
                f"high = [{_ints(node.attr('high'))}], interior = [{zeros}] : "
                f"({x.ty}, {c.ty}) -> {tensor(t)}", t)


def concat(w: Writer, node: Node, args: list[V]) -> V:
    t = node.type
    return w.op(f"stablehlo.concatenate {', '.join(a.name for a in args)}, "
                f"dim = {node.attr('axis')} : ({', '.join(a.ty for a in args)}) -> "
                f"{tensor(t)}", t)


def _index_column(w: Writer, idx: V, size: int) -> V:
    """Indices with negatives counted from the end, as a column (index_vector_dim last)."""
    if idx.type.dtype.kind is dt.Kind.INT:
        neg = w.compare("LT", idx, w.like(0, idx))
        idx = w.select(neg, w.binary("add", idx, w.like(size, idx)), idx)
    return w.reshape(idx, (*idx.type.shape, 1))


def _window_dims(rank: int, ax: int, k: int) -> str:
    """Positions of the operand's non-axis dims in a gather result / scatter update."""
    return _ints([i if i < ax else i - 1 + k for i in range(rank) if i != ax])


def gather(w: Writer, node: Node, args: list[V]) -> V:
    x, idx = args
    ax, t = node.attr("axis"), node.type
    k = idx.type.rank
    col = _index_column(w, idx, x.type.shape[ax])
    sizes = _ints(1 if i == ax else s for i, s in enumerate(x.type.shape))
    dims = (f"offset_dims = [{_window_dims(x.type.rank, ax, k)}], collapsed_slice_dims = "
            f"[{ax}], start_index_map = [{ax}], index_vector_dim = {k}")
    return w.op(f'"stablehlo.gather"({x.name}, {col.name}) <{{dimension_numbers = '
                f"#stablehlo.gather<{dims}>, indices_are_sorted = false, slice_sizes = "
                f"array<i64: {sizes}>}}> : ({x.ty}, {col.ty}) -> {tensor(t)}", t)


def scatter_add(w: Writer, node: Node, args: list[V]) -> V:
    x, idx, upd = args
    ax, d = node.attr("axis"), node.type.dtype
    k = idx.type.rank
    col = _index_column(w, idx, x.type.shape[ax])
    xw, uw = _wide(w, x), _wide(w, upd)
    s = tensor(TensorType(xw.type.dtype, ()))
    body = "or" if d == dt.bool_ else "add"
    dims = (f"update_window_dims = [{_window_dims(x.type.rank, ax, k)}], inserted_window_dims "
            f"= [{ax}], scatter_dims_to_operand_dims = [{ax}], index_vector_dim = {k}")
    r = w.fresh()
    w.line(f'{r} = "stablehlo.scatter"({xw.name}, {col.name}, {uw.name}) <{{indices_are_sorted '
           f"= false, scatter_dimension_numbers = #stablehlo.scatter<{dims}>, unique_indices = "
           f"false}}> ({{")
    w.line(f"^bb0(%s1: {s}, %s2: {s}):")
    w.line(f"  %s3 = stablehlo.{body} %s1, %s2 : {s}")
    w.line(f"  stablehlo.return %s3 : {s}")
    w.line(f"}}) : ({xw.ty}, {col.ty}, {uw.ty}) -> {xw.ty}")
    return w.convert(V(r, xw.type), d)


# ---- contraction and sources ----------------------------------------------------------------


def dot_general(w: Writer, node: Node, args: list[V]) -> V:
    (lc, rc), (lb, rb) = node.attr("contract"), node.attr("batch")
    a, b = (_wide(w, x) for x in args)
    d = node.type.dtype
    t = TensorType(a.type.dtype, node.type.shape)
    parts = []
    if lb:
        parts.append(f"batching_dims = [{_ints(lb)}] x [{_ints(rb)}]")
    parts.append(f"contracting_dims = [{_ints(lc)}] x [{_ints(rc)}]")
    if t.dtype.is_float:
        parts.append("precision = [HIGHEST, HIGHEST]")
    r = w.op(f"stablehlo.dot_general {a.name}, {b.name}, {', '.join(parts)} : "
             f"({a.ty}, {b.ty}) -> {tensor(t)}", t)
    return w.convert(r, d)


def iota(w: Writer, node: Node, args: list[V]) -> V:
    t = node.type
    it = TensorType(dt.i32, t.shape)
    r = w.op(f"stablehlo.iota dim = {node.attr('dim')} : {tensor(it)}", it)
    return _ne_zero(w, r) if t.dtype == dt.bool_ else w.convert(r, t.dtype)


def constant(w: Writer, node: Node, args: list[V]) -> V:
    import numpy as np

    from rlx_core.targets.numpy_ref.semantics import convert

    t, value = node.type, node.attr("value")
    if isinstance(value, tuple):
        host = convert(np.array(value).reshape(t.shape), t.dtype)
    else:
        host = convert(np.full(t.shape, value), t.dtype)
    if t.dtype == dt.bool_:
        if host.size and (host == host.reshape(-1)[0]).all():
            return w.const(bool(host.reshape(-1)[0]), t)
        u8 = TensorType(dt.u8, t.shape)
        raw = w.op(f"stablehlo.constant {dense(host.astype(np.uint8), u8)}", u8)
        return _ne_zero(w, raw)
    return w.op(f"stablehlo.constant {dense(host, t)}", t)


RULES: dict[str, Rule] = {
    **{op: unary for op in (*_FLOAT_UNARY, "reciprocal", "logical_not")},
    **{op: binary for op in _BINARY},
    **{op: compare for op in _COMPARE},
    "select": select, "cast": cast,
    **{op: reduce for op in ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")},
    "argmax": argmax, "broadcast_in_dim": broadcast_in_dim, "reshape": reshape,
    "transpose": transpose, "slice": slice_, "pad": pad, "concat": concat, "gather": gather,
    "scatter_add": scatter_add, "dot_general": dot_general, "iota": iota,
    "constant": constant,
}


def lower_node(w: Writer, node: Node, args: list[V]) -> V:
    """The value holding ``node``'s result, with ``node.type``."""
    rule = RULES.get(node.op)
    if rule is None:
        raise _fail(node, "no StableHLO rule for this op")
    for v in (*args, V("", node.type)):
        if v.type.dtype.name not in ("bool", "i8", "i16", "i32", "i64", "u8", "u32", "f16",
                                     "bf16", "f32", "f64"):
            raise _fail(node, f"no StableHLO rule for {v.type.dtype.name}")
    out = rule(w, node, args)
    if out.type != node.type:
        raise _fail(node, f"rule produced {out.type}, the node is {node.type}")
    return out


__all__ = ["HloRenderError", "RULES", "lower_node", "scalar_literal"]
