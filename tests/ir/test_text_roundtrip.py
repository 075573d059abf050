"""Round trip of the text form: print -> parse -> print is identical and parse rebuilds the graph."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import (
    ArenaPlan,
    BufferSlot,
    Graph,
    Kernel,
    Level,
    Loc,
    TensorType,
    Value,
    ValueKind,
)
from rlx_core.ir.lexer import Tok, tokenize
from rlx_core.ir.ops import HIR_OPS, MIR_OPS
from rlx_core.ir.ops.mir import BINARY, COMPARE, REDUCE, UNARY
from rlx_core.ir.parser import parse, parse_attr, parse_type
from rlx_core.ir.printer import fmt_attr, print_graph

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ir-text-format.md"


def inp(name: str, dtype: dt.DType, shape: tuple[int, ...], kind: ValueKind = ValueKind.INPUT):
    return Value(name, TensorType(dtype, shape), kind)


def roundtrip(g: Graph) -> Graph:
    """Print, parse, print again; both texts must be identical and the graphs equal."""
    text = print_graph(g)
    back = parse(text)
    assert print_graph(back) == text
    assert back == g
    return back


# ---- graphs covering every op ---------------------------------------------------------------


def mir_all_ops() -> Graph:
    b = Builder(loc=Loc("model.py", 10, "blk"))
    x = inp("x", dt.f32, (2, 3))
    y = inp("y", dt.f32, (2, 3))
    p = inp("p", dt.bool_, (2, 3))
    n = inp("n", dt.i32, (2, 3))
    ids = inp("ids", dt.i64, (4,))
    w = inp("w", dt.f32, (3, 5), ValueKind.PARAM)
    outs = []
    for op in UNARY:
        outs.append(b.emit(op, [p if op == "logical_not" else x]))
    for op in BINARY:
        outs.append(b.emit(op, [n, n] if op in ("and", "or", "xor") else [x, y]))
    for op in COMPARE:
        outs.append(b.emit(op, [x, y]))
    outs.append(b.emit("select", [p, x, y]))
    outs.append(b.emit("cast", [x], {"dtype": dt.bf16}))
    for op in REDUCE:
        outs.append(b.emit(op, [x], {"axes": (1,)}))
    outs.append(b.emit("argmax", [x], {"axis": 1, "index_dtype": dt.i64}))
    outs.append(b.emit("broadcast_in_dim", [x], {"shape": (4, 2, 3), "dims": (1, 2)}))
    outs.append(b.emit("reshape", [x], {"shape": (3, 2)}))
    outs.append(b.emit("transpose", [x], {"perm": (1, 0)}))
    outs.append(b.emit("slice", [x], {"start": (0, 1), "limit": (2, 3), "stride": (1, 2)}))
    outs.append(b.emit("pad", [x], {"low": (1, 0), "high": (0, 2), "value": -math.inf}))
    outs.append(b.emit("concat", [x, y, x], {"axis": 0}))
    outs.append(b.emit("gather", [x, ids], {"axis": 1}))
    upd = b.emit("constant", [], {"value": 0.5, "shape": (2, 4), "dtype": dt.f32})
    outs.append(b.emit("scatter_add", [x, ids, upd], {"axis": 1}))
    outs.append(b.emit("dot_general", [x, w], {"contract": ((1,), (0,))}))
    outs.append(b.emit("iota", [], {"shape": (2, 3), "dim": 1}))
    outs.append(
        b.emit("constant", [], {"value": (1, 2, 3, 4, 5, 6), "shape": (2, 3), "dtype": dt.i8})
    )
    outs.append(b.emit("constant", [], {"value": complex(1.5, -2.0), "dtype": dt.c64}))
    used = {nd.op for nd in b.nodes}
    assert used == set(MIR_OPS), set(MIR_OPS) - used
    return Graph(
        "all_mir", Level.MIR, (x, y, p, n, ids), (w,), tuple(b.nodes), tuple(o.name for o in outs)
    )


def hir_all_ops() -> Graph:
    b = Builder()
    x = inp("x", dt.f32, (2, 8))
    w = inp("fc.weight", dt.f32, (4, 8), ValueKind.PARAM)
    bias = inp("fc.bias", dt.f32, (4,), ValueKind.PARAM)
    g8 = inp("ln.weight", dt.f32, (8,), ValueKind.PARAM)
    q = inp("q", dt.f16, (1, 2, 3, 4))
    mask = inp("mask", dt.f16, (1, 3))
    ids = inp("ids", dt.i32, (5,))
    table = inp("table", dt.f32, (10, 6), ValueKind.PARAM)
    img = inp("img", dt.f32, (1, 2, 6, 6))
    k = inp("conv.weight", dt.f32, (4, 1, 3, 3), ValueKind.PARAM)
    kb = inp("conv.bias", dt.f32, (4,), ValueKind.PARAM)
    pw = inp("pair.weight", dt.f32, (4, 2, 1, 1), ValueKind.PARAM)
    sc = inp("scale", dt.f32, (8,))
    zp = inp("zero_point", dt.i32, (8,))
    w8 = inp("fc.weight_q", dt.i8, (4, 8), ValueKind.PARAM)
    p4 = inp("fc.weight_q4", dt.u8, (4, 4), ValueKind.PARAM)
    s4 = inp("fc.weight_q4_scale", dt.f32, (4, 2), ValueKind.PARAM)
    bq = inp("fc.bias_q", dt.i32, (4,), ValueKind.PARAM)
    outs = [
        b.emit("linear", [x, w, bias], loc=Loc("net.py", 4, "fc")),
        b.emit("layer_norm", [x, g8, g8], {"eps": 1e-6}),
        b.emit("rms_norm", [x, g8]),
        b.emit("softmax", [x], {"axis": 0}),
        b.emit("log_softmax", [x]),
        b.emit("gelu", [x], {"approximate": "tanh"}),
        b.emit("silu", [x]),
        b.emit("attention", [q, q, q], {"mask": "causal", "scale": 0.125}),
        b.emit("attention", [q, q, q, mask], {"mask": "padding"}),
        b.emit("embedding", [ids, table]),
        b.emit("conv2d", [img, k], {"stride": (2, 2), "padding": (1, 1), "groups": 2}),
        b.emit("conv2d_fused", [img, k, kb],
               {"padding": (1, 1), "groups": 2, "act": "clip", "lo": 0.0, "hi": 6.0}),
        b.emit("conv2d_pair", [b.emit("max_pool2d", [img], {"kernel": (2, 2), "stride": (2, 2)}),
                               pw, kb, img, pw, kb], {"stride2": (2, 2), "act": "max"}),
        b.emit("max_pool2d", [img], {"kernel": (2, 2), "stride": (2, 2)}),
        b.emit("avg_pool2d", [img], {"kernel": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
        b.emit("add", [x, x], name="x.sum"),
    ]
    x8 = b.emit("quantize", [x, sc, zp], {"axis": 1, "dtype": dt.u8})
    acc = b.emit("int_linear", [x8, w8], {"a_zero_point": 128})
    outs += [
        b.emit("dequantize", [x8, sc, zp], {"axis": 1}),
        b.emit("requantize", [acc], {"multiplier": (1 << 30, 1234567890, 1 << 30, 5),
                                     "shift": (-3, 0, 1, -31), "zero_point": -2, "axis": 1}),
        b.emit("fake_quantize", [x, sc, sc], {"qmin": -8, "qmax": 7, "axis": 1}),
        b.emit("int4_linear", [x, p4, s4], {"group": 4}),
        b.emit("dynamic_int_linear", [x, w8, bias, bias]),
        b.emit("static_int_linear", [x, w8, bias, bq], {"a_scale": 0.1, "a_zero_point": 130,
                                                        "a_qmin": 0, "a_qmax": 255}),
        b.emit("requantized_int_linear", [x8, w8, bq], {
            "a_zero_point": 128, "multiplier": (1 << 30, 5, 7, 9), "shift": (-3, 0, 1, -31),
            "zero_point": 3, "dtype": dt.u8, "qmin": 3, "qmax": 127}),
        b.emit("int_conv2d", [b.emit("cast", [img], {"dtype": dt.i8}),
                              b.emit("cast", [k], {"dtype": dt.i8})],
               {"stride": (2, 2), "padding": (1, 1), "groups": 2, "a_zero_point": -3}),
    ]
    gs = [inp(nm, dt.f32, sh) for nm, sh in (("means", (5, 3)), ("quats", (5, 4)),
                                             ("scales", (5, 3)), ("opac", (5,)),
                                             ("sh", (5, 4, 3)), ("view", (4, 4)), ("K", (3, 3)))]
    rec = b.emit("splat_project", gs, {"width": 24, "height": 16})
    gimg = inp("g_img", dt.f32, (16, 24, 3))
    outs += [
        b.emit("splat_rasterize", [rec], {"width": 24, "height": 16,
                                          "background": (0.0, 0.5, 1.0)}),
        b.emit("splat_project_vjp", [*gs, rec], {"width": 24, "height": 16}),
        b.emit("splat_rasterize_vjp", [rec, gimg], {"width": 24, "height": 16}),
    ]
    # dense linear algebra (batched f64 matrices) and CSR ops
    am = inp("am", dt.f64, (2, 3, 3))
    bm = inp("bm", dt.f64, (2, 3, 2))
    ip = inp("indptr", dt.i32, (4,))
    ix = inp("indices", dt.i32, (5,))
    vals = inp("vals", dt.f64, (5,))
    outs += [b.emit(op, [am]) for op in ("cholesky", "inv", "det", "slogdet", "lu", "qr",
                                          "eigh", "svd")]
    outs += [b.emit("solve", [am, bm]),
             b.emit("triangular_solve", [am, bm], {"lower": False, "transpose_a": True}),
             b.emit("spmv", [ip, ix, vals, b.emit("slice", [vals], {
                 "start": (0,), "limit": (3,), "stride": (1,)})], {"shape": (3, 3)}),
             b.emit("spmm", [ip, ix, vals, b.emit("reshape", [am], {"shape": (3, 6)})],
                    {"shape": (3, 3), "transpose": True}),
             b.emit("sddmm", [ip, ix, b.emit("reshape", [bm], {"shape": (3, 4)}),
                              b.emit("reshape", [bm], {"shape": (3, 4)})], {"shape": (3, 3)}),
             b.emit("krylov_solve", [ip, ix, vals, b.emit("slice", [vals], {
                 "start": (2,), "limit": (5,), "stride": (1,)})],
                    {"shape": (3, 3), "method": "gmres", "precond": "jacobi", "tol": 1e-10,
                     "maxiter": 50, "restart": 5})]
    used = {nd.op for nd in b.nodes}
    assert set(HIR_OPS) <= used, set(HIR_OPS) - used
    return Graph(
        "all_hir",
        Level.HIR,
        (x, q, mask, ids, img, sc, zp, *gs, gimg, am, bm, ip, ix, vals),
        (w, bias, g8, table, k, kb, pw, w8, p4, s4, bq),
        tuple(b.nodes),
        tuple(o.name for o in outs),
    )


def every_dtype() -> Graph:
    b = Builder()
    ins = tuple(inp(f"in_{d.name}", d, (2,)) for d in dt.ALL)
    src = inp("s", dt.f32, ())
    outs = [b.emit("cast", [src], {"dtype": d}) for d in dt.ALL]
    outs += [b.emit("iota", [], {"shape": (3,), "dim": 0, "dtype": d}) for d in dt.INTS]
    return Graph(
        "dtypes",
        Level.MIR,
        (*ins, src),
        (),
        tuple(b.nodes),
        tuple(o.name for o in outs) + tuple(v.name for v in ins),
    )


def lir_graph() -> Graph:
    """Two kernels (a matmul with a bias epilogue, then a reduction) and their arena plan."""
    b = Builder(loc=Loc("mlp.py", 7, "fc1", origin="h0", origin_op="linear"))
    x = inp("x", dt.f32, (2, 4))
    w = inp("w", dt.f32, (4, 3), ValueKind.PARAM)
    bias = inp("b", dt.f32, (2, 3), ValueKind.PARAM)
    mm = b.emit("dot_general", [x, w], {"contract": ((1,), (0,)), "batch": ((), ())})
    y = b.emit("add", [mm, bias])
    k0 = Kernel("k0", "matmul", tuple(b.nodes), ("x", "w", "b"), (y.name,))
    b2 = Builder(names=b.names, loc=Loc("mlp.py", 8))
    e = b2.emit("exp", [y])
    s = b2.emit("reduce_max", [e], {"axes": (0, 1)})
    k1 = Kernel("k1", "reduce", tuple(b2.nodes), (y.name,), (e.name, s.name))
    plan = ArenaPlan(
        (
            BufferSlot(y.name, 0, 64, 0, 1),
            BufferSlot(e.name, 64, 24, 1, 1),
            BufferSlot(s.name, 128, 4, 1, 1),
        ),
        peak_bytes=192,
        naive_bytes=256,
    )
    return Graph(
        "mlp", Level.LIR, (x,), (w, bias), k0.nodes + k1.nodes, (s.name, e.name), (k0, k1), plan
    )


@pytest.mark.parametrize("make", [mir_all_ops, hir_all_ops, every_dtype, lir_graph])
def test_roundtrip_builder_graphs(make) -> None:
    roundtrip(make())


def test_lir_structure_is_rebuilt() -> None:
    g = roundtrip(lir_graph())
    assert [k.name for k in g.kernels] == ["k0", "k1"]
    assert g.nodes == tuple(n for k in g.kernels for n in k.nodes)
    assert g.plan is not None and g.plan.slot("3") == BufferSlot("3", 128, 4, 1, 1)
    assert g.plan.alignment == 64
    # a LIR origin survives: the kernel nodes point back at the HIR linear
    assert {n.loc.origin_op for n in g.kernels[0].nodes} == {"linear"}


def test_mir_with_a_native_composite() -> None:
    b = Builder()
    x = inp("x", dt.f32, (2, 4))
    s = b.emit("softmax", [x])  # a composite a target claimed natively stays in MIR
    roundtrip(Graph("f", Level.MIR, (x,), (), tuple(b.nodes), (s.name,)))


def test_values_kinds_and_provenance() -> None:
    g = roundtrip(hir_all_ops())
    kinds = {v.name: v.kind for v in (*g.inputs, *g.params)}
    assert kinds["x"] is ValueKind.INPUT and kinds["fc.weight"] is ValueKind.PARAM
    assert all(n.out.kind is ValueKind.NODE for n in g.nodes)
    first = g.nodes[0]
    assert first.loc == Loc("net.py", 4, "fc", first.name, "linear")
    assert g.nodes[1].loc == Loc(origin=g.nodes[1].name, origin_op="layer_norm")


def test_loc_variants() -> None:
    x = inp("x", dt.f32, (3,))
    locs = [
        Loc(),
        Loc("a.py", 0),
        Loc("", 5),
        Loc(scope="s"),
        Loc('f "q".py', 9, "a/b"),
        Loc(origin="h1", origin_op="gelu"),
        Loc("m.py", 2, origin="orig.x", origin_op=""),
    ]
    b = Builder()
    for loc in locs:
        b.emit("neg", [x], loc=loc)
    g = roundtrip(Graph("locs", Level.MIR, (x,), (), tuple(b.nodes), (b.nodes[-1].name,)))
    assert g.nodes[5].loc.origin == "h1" and g.nodes[0].loc.origin == g.nodes[0].name


def test_numeric_attrs_and_numpy_oracle() -> None:
    """Attribute values parse to what numpy would read from the same literal."""
    for text in ("1e-05", "-2.5e+20", "0.1", "-0.0", "123456789012345678901234567890"):
        v = parse_attr(text)
        assert type(v) is (int if text.isdigit() else float)
        assert v == (int(text) if text.isdigit() else np.float64(text))
    assert math.copysign(1.0, parse_attr("-0.0")) == -1.0
    assert parse_attr("inf") == np.inf and parse_attr("-inf") == -np.inf
    assert math.isnan(parse_attr("nan"))
    assert parse_attr("complex(nan, -inf)").imag == -np.inf
    assert parse_attr("(((1,),), (), true, none, bf16)") == (((1,),), (), True, None, dt.bf16)
    assert parse_attr('"tab\\t\\u00e9\\ud83d\\ude00"') == "tab\t\u00e9\U0001f600"
    assert parse_type("c64[]") == TensorType(dt.c64, ())


def test_doc_examples_parse_and_roundtrip() -> None:
    """Every ```rlx block in docs/ir-text-format.md is a graph the parser accepts verbatim."""
    blocks = re.findall(r"```rlx\n(.*?)```", DOC.read_text(), re.S)
    assert {b.split(" ", 1)[0] for b in blocks} >= {"hir", "mir", "lir"}
    for block in blocks:
        assert print_graph(parse(block)) == block


# ---- hypothesis: random attribute values, names and locs ------------------------------------

NAME = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.",
    min_size=1,
    max_size=12,
)
SCALAR = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=20),
    st.sampled_from(dt.ALL),
    st.complex_numbers(allow_nan=False),
)
ATTR = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4).map(tuple), max_leaves=12)


def same(a: object, b: object) -> bool:
    """Equality that counts nan equal to nan and keeps int, bool and float apart."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b))
    return a == b


@settings(max_examples=150, deadline=None)
@given(ATTR)
def test_attr_value_roundtrip(v: object) -> None:
    text = fmt_attr(v)
    back = parse_attr(text)
    assert same(back, v), (text, back)
    assert fmt_attr(back) == text


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.lists(st.integers(min_value=-(2**70), max_value=2**70), min_size=2),
                 st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2)))
def test_homogeneous_tuples_print_as_their_elements(values: list) -> None:
    """A tuple of only ints or only floats (a constant's value) is printed in one pass: the
    same text as each element's, and it parses back."""
    v = tuple(values)
    text = fmt_attr(v)
    assert text == "(" + ", ".join(fmt_attr(x) for x in v) + ")"
    assert same(parse_attr(text), v), text


def test_tuples_of_special_floats_and_of_bools_keep_their_forms() -> None:
    assert fmt_attr((math.nan, -math.inf, math.inf, -0.0, 1e-300)) == \
        "(nan, -inf, inf, -0.0, 1e-300)"
    assert fmt_attr((True, False, 1)) == "(true, false, 1)"  # bools are not ints here
    assert fmt_attr((2.5, 3)) == "(2.5, 3)" and fmt_attr((7,)) == "(7,)" and fmt_attr(()) == "()"


LOC = st.builds(
    Loc,
    st.text(max_size=10),
    st.integers(0, 10**6),
    st.text(max_size=10),
    st.one_of(st.just(""), NAME),
    st.sampled_from(["", "linear", "gelu"]),
)


# a constant's value must be a literal of its dtype (RLX-V003); every other attribute value
# round-trips through test_attr_value_roundtrip above
F32_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                       st.integers(min_value=-(2**70), max_value=2**70))
I32_VALUES = st.one_of(st.integers(min_value=-(2**31), max_value=2**31 - 1), st.booleans(),
                       st.integers(-1000, 1000).map(float))


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(NAME, min_size=3, max_size=3, unique=True),
    gname=NAME,
    value=st.one_of(F32_VALUES, st.lists(F32_VALUES, min_size=1, max_size=4).map(tuple)),
    loc=LOC,
    scalar=I32_VALUES,
)
def test_random_graph_roundtrip(
    names: list[str], gname: str, value: object, loc: Loc, scalar: object
) -> None:
    x = inp(names[0], dt.f32, (2,))
    b = Builder(NameGen(names), loc=loc)
    n = len(value) if isinstance(value, tuple) else 1
    c = b.emit(
        "constant",
        [],
        {"value": value if isinstance(value, tuple) else (value,), "shape": (n,), "dtype": dt.f32},
        name=names[1],
    )
    s = b.emit("constant", [], {"value": scalar, "dtype": dt.i32})
    y = b.emit("neg", [x], name=names[2])
    g = Graph(gname, Level.MIR, (x,), (), tuple(b.nodes), (y.name, c.name, s.name))
    text = print_graph(g)
    back = parse(text)
    assert print_graph(back) == text
    assert [nd.loc for nd in back.nodes] == [nd.loc for nd in g.nodes]
    assert [nd.out for nd in back.nodes] == [nd.out for nd in g.nodes]
    assert same(back.nodes[0].attr("value"), g.nodes[0].attr("value"))


def test_tokens_comments_and_line_endings() -> None:
    toks = tokenize('  %0.a : f32[2] = exp(%x) {k="s"} # comment\n  arena 0..1')
    assert [(t.kind, t.text, t.line, t.col) for t in toks[:4]] == [
        (Tok.VALUE, "0.a", 1, 3),
        (Tok.PUNCT, ":", 1, 8),
        (Tok.IDENT, "f32", 1, 10),
        (Tok.PUNCT, "[", 1, 13),
    ]
    kinds = [t.kind for t in toks]
    assert Tok.STRING in kinds and kinds.count(Tok.NEWLINE) == 2 and kinds[-1] is Tok.EOF
    assert [t.text for t in toks if t.line == 2][:4] == ["arena", "0", "..", "1"]
    # hand-written text: CRLF line endings, comments, blank lines and default attributes
    g = lir_graph()
    text = print_graph(g)
    noisy = "# golden file\n\n" + text.replace("\n", "  # note\r\n").replace(" {}", "")
    assert parse(noisy) == g
    b = Builder()
    x = inp("x", dt.f32, (2, 3))
    s = b.emit("softmax", [x])
    short = "hir @f {\n  input %x : f32[2,3]\n  %0 : f32[2,3] = softmax(%x)\n  return %0\n}\n"
    assert parse(short) == Graph("f", Level.HIR, (x,), (), tuple(b.nodes), (s.name,))


def test_printing_without_locations_drops_file_and_line_and_keeps_scope() -> None:
    """``print_graph(g, locations=False)`` (build keys, rank signatures) leaves out where the
    code sits, not the model scope a tensor-parallel plan matches; the text still parses."""
    from rlx_core.ir.parser import parse

    text = ('hir @mlp {\n'
            '  input %x : f32[2,4]\n'
            '  param %fc1.weight : f32[3,4]\n'
            '  %0 : f32[2,3] = linear(%x, %fc1.weight) {} loc("mlp.py":8 scope="fc1")\n'
            '  %1 : f32[2,3] = tanh(%0) {} loc("mlp.py":9)\n'
            '  return %1\n'
            '}\n')
    g = parse(text)
    assert print_graph(g) == text
    bare = print_graph(g, locations=False)
    assert "mlp.py" not in bare and 'loc(scope="fc1")' in bare
    assert "tanh(%0) {}\n" in bare  # a loc with nothing but file:line goes whole
    moved = parse(text.replace('"mlp.py":8', '"mlp.py":18').replace('"mlp.py":9', '"mlp.py":19'))
    assert print_graph(moved, locations=False) == bare
    assert print_graph(parse(bare), locations=False) == bare
