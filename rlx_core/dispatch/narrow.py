"""i64 -> i32 narrowing for targets without 64-bit integers in kernels (WGSL), where provable.

A forward interval analysis gives each integer value a range [lo, hi] when it can be proven
(iota, constants, casts from narrower types, argmax, interval arithmetic through + - * max min
neg abs select div rem sign, bitwise ops, reductions and data movement). An i64 value whose
range fits i32 is retyped to i32 in place (same name); consumers that cannot take the narrower
type get it widened back. A graph output narrowed this way is widened back to i64 on the host
(``Executable``). Inputs and parameters without data have unknown ranges: they stay i64, and the
nodes touching them fail with RLX-L004 and say why - unless the caller promises a range for an
input (``rlx.compile(..., input_ranges={name: (lo, hi)})``, what the ONNX backend does from the
values it is given): such an input is retyped to i32 and ``Executable`` checks every call's
values against the promise (RLX-G002), so a value outside it is a typed error, never a wrap.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import NameGen, infer_type
from rlx_core.ir.graph import Graph, Node, TensorType, Value

Range = tuple[int, int] | None
I32 = (-(2 ** 31), 2 ** 31 - 1)
_BOUNDS = {"bool": (0, 1), "i8": (-128, 127), "i16": (-32768, 32767), "u8": (0, 255),
           "i4": (-8, 7), "i32": I32}
_MOVEMENT = ("reshape", "transpose", "slice", "broadcast_in_dim", "concat", "gather")


@dataclass(frozen=True)
class Narrowing:
    """What narrow_i64 did: the graph with its provably small i64 values retyped i32, the
    nodes and inputs it narrowed, every integer value's proven range, and why the others' are
    unknown."""

    graph: Graph
    narrowed: tuple[str, ...]  # node names retyped i64 -> i32
    narrowed_inputs: dict[str, tuple[int, int]]  # graph inputs retyped i64 -> i32: their range
    ranges: dict[str, Range]
    unknown_why: dict[str, str]


def _data_range(data: Any) -> Range:
    """min/max of parameter data without importing numpy (arrays have .min/.max)."""
    try:
        if getattr(data, "size", None) == 0:
            return (0, 0)  # an empty tensor holds nothing out of range
        if hasattr(data, "min") and hasattr(data, "max"):
            return (int(data.min()), int(data.max()))
        if isinstance(data, memoryview) and data.ndim > 1:  # list() takes 1-d views only
            data = data.cast("B").cast(data.format)
        flat = list(data)
        return (int(min(flat)), int(max(flat))) if flat else (0, 0)
    except (TypeError, ValueError, OverflowError):  # e.g. a float parameter holding inf
        return None


def _union(*rs: Range) -> Range:
    if any(r is None for r in rs):
        return None
    return (min(r[0] for r in rs), max(r[1] for r in rs))  # type: ignore[index]


def node_range(n: Node, ins: list[Range], in_types: list[TensorType]) -> Range:
    """The proven range of ``n``'s integer result, or None."""
    op = n.op
    if op == "iota":
        return (0, max(n.attr("shape")[n.attr("dim")] - 1, 0))
    if op == "argmax":
        return (0, max(in_types[0].shape[n.attr("axis")] - 1, 0))
    if op == "constant":
        v = n.attr("value")
        vals = v if isinstance(v, tuple) else (v,)
        try:
            return (int(min(vals)), int(max(vals))) if vals else (0, 0)
        except (TypeError, ValueError):
            return None
    if op == "cast":
        src = in_types[0].dtype.name
        if src in _BOUNDS:
            return ins[0] or _BOUNDS[src]
        return ins[0] if in_types[0].dtype.is_int else None
    if op in _MOVEMENT:
        return _union(*ins[:1]) if op == "gather" else _union(*ins)
    if op == "pad":
        return _union(ins[0], (0, 0)) if ins[0] else None
    if op == "select":
        return _union(ins[1], ins[2])
    if any(r is None for r in ins):
        return None
    if op in ("add", "sub", "mul", "max", "min"):
        (a0, a1), (b0, b1) = ins[0], ins[1]  # type: ignore[misc]
        if op == "add":
            return (a0 + b0, a1 + b1)
        if op == "sub":
            return (a0 - b1, a1 - b0)
        if op == "mul":
            c = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
            return (min(c), max(c))
        return (max(a0, b0), max(a1, b1)) if op == "max" else (min(a0, b0), min(a1, b1))
    if op == "div":  # integer division: |a / b| <= |a| (and x / 0 is 0)
        m = max(abs(ins[0][0]), abs(ins[0][1]))  # type: ignore[index]
        return (-m, m)
    if op == "rem":  # |a % b| <= |a| and < |b|, whichever sign convention
        m = min(max(abs(ins[0][0]), abs(ins[0][1])),  # type: ignore[index]
                max(abs(ins[1][0]), abs(ins[1][1])))  # type: ignore[index]
        return (0 if ins[0][0] >= 0 and ins[1][0] >= 0 else -m, m)  # type: ignore[index]
    if op in ("and", "or", "xor"):  # two's complement: k+1-bit operands give a k+1-bit result
        lo = min(ins[0][0], ins[1][0])  # type: ignore[index]
        hi = max(ins[0][1], ins[1][1])  # type: ignore[index]
        k = max(hi.bit_length(), (-lo - 1).bit_length() if lo < 0 else 0)
        return (-(2 ** k) if lo < 0 else 0, 2 ** k - 1)
    if op == "sign":
        return (-1, 1)
    if op in ("reduce_max", "reduce_min"):
        return ins[0]
    if op in ("reduce_sum", "reduce_prod"):  # k terms, each in [lo, hi]
        k = 1
        for ax in n.attr("axes"):
            k *= in_types[0].shape[ax]
        lo, hi = ins[0]  # type: ignore[misc]
        if op == "reduce_sum":
            return (min(0, k * lo), max(0, k * hi))
        m0 = max(abs(lo), abs(hi), 1)
        if k * m0.bit_length() > 64:
            return None  # far beyond i32 anyway; don't build huge integers
        m = m0 ** k
        return (-m if lo < 0 else min(0, lo), m)
    if op == "neg":
        return (-ins[0][1], -ins[0][0])  # type: ignore[index]
    if op == "abs":
        lo, hi = ins[0]  # type: ignore[misc]
        return (0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
    return None


def analyse(g: Graph, input_ranges: dict[str, tuple[int, int]] | None = None,
            ) -> tuple[dict[str, Range], dict[str, str]]:
    ranges: dict[str, Range] = {}
    why: dict[str, str] = {}
    for v in g.inputs:
        given = (input_ranges or {}).get(v.name)
        ranges[v.name] = (int(given[0]), int(given[1])) if given is not None else None
        if given is None:
            why[v.name] = ("it is a function input, so its values are only known at run time "
                           "(rlx.compile(..., input_ranges=...) can promise a range)")
    for p in g.params:
        data = g.param_data.get(p.name)
        ranges[p.name] = _data_range(data) if data is not None else None
        if ranges[p.name] is None:
            why[p.name] = "it is a parameter without bound data"
    types = g.values()
    for n in g.nodes:
        if not (n.out.type.dtype.is_int or n.out.type.dtype == dt.bool_):
            continue
        ins = [ranges.get(i) for i in n.inputs]
        in_types = [types[i].type for i in n.inputs]
        r = node_range(n, ins, in_types)
        ranges[n.out.name] = r
        if r is None:
            src = next((i for i, x in zip(n.inputs, ins, strict=True) if x is None), "")
            why[n.out.name] = (f"it depends on %{src}, whose range is unknown" if src else
                               f"{n.op} has no range rule")
    return ranges, why


def _fits(r: Range) -> bool:
    return r is not None and I32[0] <= r[0] and r[1] <= I32[1]


def narrow_i64(g: Graph, input_ranges: dict[str, tuple[int, int]] | None = None) -> Narrowing:
    """Retype every provably-in-range i64 node result (and every i64 input with a promised range
    that fits) to i32 (see the module docstring)."""
    ranges, why = analyse(g, input_ranges)
    for name, r in ranges.items():
        if r is not None and not _fits(r):
            why[name] = f"its range [{r[0]}, {r[1]}] does not fit i32"
    inputs = tuple(replace(v, type=replace(v.type, dtype=dt.i32))
                   if v.type.dtype == dt.i64 and _fits(ranges.get(v.name)) else v
                   for v in g.inputs)
    narrowed_inputs = {v.name: ranges[v.name] for v, w in zip(g.inputs, inputs, strict=True)
                       if v is not w}
    # parameters whose bound data fits i32 are uploaded as i32 (the data is known: no guard)
    params = tuple(replace(v, type=replace(v.type, dtype=dt.i32))
                   if v.type.dtype == dt.i64 and _fits(ranges.get(v.name)) else v
                   for v in g.params)
    original = g.values()  # the types before narrowing: what a widening goes back to
    if narrowed_inputs or params != g.params:
        g = replace(g, inputs=inputs, params=params)
    types: dict[str, Value] = dict(g.values())
    names = NameGen(types)
    narrowed: list[str] = []
    out: list[Node] = []
    for n in g.nodes:
        retype = n.out.type.dtype == dt.i64 and _fits(ranges.get(n.out.name))
        attrs = dict(n.attrs)
        if retype:
            for key in ("dtype", "index_dtype"):
                if attrs.get(key) in (dt.i64, "i64"):
                    attrs[key] = dt.i32
        in_vals = [types[i] for i in n.inputs]
        try:
            full, t = infer_type(n.op, [v.type for v in in_vals], attrs)
            ok = t == (replace(n.out.type, dtype=dt.i32) if retype else n.out.type)
        except RlxError:
            ok = False
        if not ok:
            # widen narrowed operands back for this consumer, keep the node as it was
            ins = []
            for i, v in zip(n.inputs, in_vals, strict=True):
                if v.type.dtype == dt.i32 and original[i].type.dtype == dt.i64:
                    w = Value(names.fresh(), replace(v.type, dtype=dt.i64))
                    out.append(Node(w, "cast", (i,), (("dtype", dt.i64),), n.loc))
                    why[w.name] = (f"%{i} is widened back to i64 for %{n.out.name} = {n.op}, "
                                   f"because {why.get(n.out.name, 'that op needs i64')}")
                    types[w.name] = w
                    ins.append(w.name)
                else:
                    ins.append(i)
            n = replace(n, inputs=tuple(ins))
            retype = False
            full, t = dict(n.attrs), n.out.type
        new = replace(n, out=replace(n.out, type=t), attrs=tuple(sorted(full.items())))
        if retype:
            narrowed.append(n.out.name)
        types[n.out.name] = new.out
        out.append(new)
    graph = g.with_nodes(out)
    return Narrowing(graph, tuple(narrowed), narrowed_inputs, ranges, why)

