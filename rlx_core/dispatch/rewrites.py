"""Named rewrite rules: structural changes of one node into a form a target can run.

A rule is data: a name, a ``when`` test (does it apply to this node on this target), a
function building the replacement with a Builder, and a one-line doc. The builder function
raises ``NotApplicable`` with a coded Reason when the rule matches the node but cannot produce
a legal form (an approximation that is not allowed, a range that cannot be proven). What a
rule produces is legalized again, so a rule may emit HIR ops (attention -> softmax block).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlx_core.dispatch.capabilities import Capabilities, Reason
from rlx_core.dispatch.decompositions import (
    along,
    const,
    heads_back,
    heads_first,
    mask_scores,
    pad_hw,
    windows,
)
from rlx_core.dispatch.no_kernel import NO_KERNEL_OPS, host_kernel_only
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Node, TensorType, Value


class NotApplicable(Exception):
    """The rule matched but cannot rewrite this node; ``reason`` says why (with a code)."""

    def __init__(self, reason: Reason):
        super().__init__(reason.message)
        self.reason = reason


@dataclass(frozen=True)
class RewriteEnv:
    """What a rule may consult: the target's table, the compile options, i64 range facts."""

    caps: Capabilities
    allow_approximate: bool = False
    ranges: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    unknown_why: dict[str, str] = field(default_factory=dict)  # value -> why its range is unknown


RewriteFn = Callable[[Node, list[Value], Builder, RewriteEnv], Value]
WhenFn = Callable[[Node, list[TensorType], Capabilities], bool]


@dataclass(frozen=True)
class Rewrite:
    """One named rewrite rule (the module docstring): ``when`` it applies, ``fn`` building the
    replacement, a one-line ``doc``; an ``approximate`` rule runs only with allow_approximate."""

    name: str
    when: WhenFn
    fn: RewriteFn
    doc: str
    approximate: bool = False


def _touches(types: list[TensorType], node: Node, name: str) -> bool:
    return any(t.dtype.name == name for t in (*types, node.out.type))


def _lacks(caps: Capabilities, name: str) -> bool:
    rule = caps.dtype_rule(name)
    return rule is None or rule.status not in ("native", "storage", "emulated")


# ---- erf -> polynomial ----------------------------------------------------------------------

# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7 on the whole real line.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf_polynomial(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """erf(x) = sign(x) (1 - t (a1 + t (a2 + ... + t a5)) exp(-x^2)), t = 1 / (1 + p |x|)."""
    x = ins[0]
    ax = b.emit("abs", [x])
    t = b.emit("div", [const(b, 1.0, x), b.emit("add", [const(b, 1.0, x),
                                                         b.emit("mul", [ax, const(b, _AS_P, x)])])])
    poly = const(b, _AS_A[4], x)
    for a in reversed(_AS_A[:4]):  # Horner: ((a5 t + a4) t + a3) t ...
        poly = b.emit("add", [b.emit("mul", [poly, t]), const(b, a, x)])
    poly = b.emit("mul", [poly, t])
    gauss = b.emit("exp", [b.emit("neg", [b.emit("mul", [x, x])])])
    y = b.emit("sub", [const(b, 1.0, x), b.emit("mul", [poly, gauss])])
    return b.emit("mul", [b.emit("sign", [x]), y])


# ---- gelu(erf) -> gelu(tanh) ----------------------------------------------------------------


def gelu_erf_to_tanh(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """The tanh form differs from exact gelu by up to ~1e-3: only with allow_approximate."""
    if not env.allow_approximate:
        raise NotApplicable(Reason(
            "RLX-L008", "gelu(approximate='none') -> tanh form changes results (up to ~1e-3) "
            "and allow_approximate is off", "compile with allow_approximate=True, or use "
            "rlx.nn.gelu(x, approximate='tanh') in the model"))
    return b.emit("gelu", [ins[0]], {"approximate": "tanh"})


# ---- conv2d -> im2col + matmul --------------------------------------------------------------


def conv2d_im2col_matmul(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """im2col, then one canonical batched matmul [G, O/G, K] @ [G, K, N*OH*OW] per group.

    Unlike the common-IR decomposition (a general dot_general over 5-D operands), both
    operands are brought to plain matmul layout first, the form matmul kernels and BLAS take.
    """
    x, w = ins[0], ins[1]
    n = x.type.shape[0]
    o, cg, kh, kw = w.type.shape
    g = int(node.attr("groups"))
    oh, ow = node.out.type.shape[2:]
    k = cg * kh * kw
    xp = pad_hw(b, x, tuple(node.attr("padding")), 0.0)
    cols = windows(b, xp, (kh, kw), tuple(node.attr("stride")), tuple(node.attr("dilation")),
                   (oh, ow))
    cols = b.emit("reshape", [cols], {"shape": (n, g, k, oh, ow)})
    cols = b.emit("transpose", [cols], {"perm": (1, 2, 0, 3, 4)})
    cols = b.emit("reshape", [cols], {"shape": (g, k, n * oh * ow)})
    wm = b.emit("reshape", [w], {"shape": (g, o // g, k)})
    y = b.emit("dot_general", [wm, cols], {"contract": ((2,), (1,)), "batch": ((0,), (0,))})
    y = b.emit("reshape", [y], {"shape": (g, o // g, n, oh, ow)})
    y = b.emit("transpose", [y], {"perm": (2, 0, 1, 3, 4)})
    y = b.emit("reshape", [y], {"shape": (n, o, oh, ow)})
    if len(ins) == 3:
        y = b.emit("add", [y, along(b, ins[2], y, 1)])
    return y


# ---- attention -> matmul / softmax / matmul -------------------------------------------------


def attention_matmul_softmax(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """q @ k^T * scale (+ mask) -> softmax block -> @ v: keeps softmax as one HIR op, so a target
    that claims softmax (but not attention) runs it natively."""
    q, k, v = heads_first(node, ins[:3], b)
    scale = float(node.attr("scale")) or 1.0 / math.sqrt(q.type.shape[3])
    kt = b.emit("transpose", [k], {"perm": (0, 1, 3, 2)})
    s = b.emit("dot_general", [q, kt], {"contract": ((3,), (2,)), "batch": ((0, 1), (0, 1))})
    s = b.emit("mul", [s, const(b, scale, s)])
    s = mask_scores(b, node.attr("mask"), s, ins[3] if len(ins) == 4 else None)
    p = b.emit("softmax", [s], {"axis": 3})
    out = b.emit("dot_general", [p, v], {"contract": ((3,), (2,)), "batch": ((0, 1), (0, 1))})
    return heads_back(node, out, b)


# ---- dtypes the target lacks ----------------------------------------------------------------


def f64_unsupported(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """No rewrite makes f64 exact on an f32 device: explain instead of silently demoting."""
    raise NotApplicable(Reason(
        "RLX-L002", f"{env.caps.target} has no f64; demoting to f32 would silently change "
        "results, so no rewrite does it", "cast to f32 before this op (x.astype('f32')), or use "
        "target cpu for f64"))


def i64_to_i32(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """Values proven to fit i32 were already narrowed (rlx_core/dispatch/narrow.py); what is
    left here is an i64 value whose range is not known."""
    unknown = [v for v in ins if v.type.dtype == dt.i64 and env.ranges.get(v.name) is None]
    who = unknown[0].name if unknown else node.out.name
    why = env.unknown_why.get(who, "its range is not known at compile time")
    raise NotApplicable(Reason(
        "RLX-L004", f"i64 %{who} cannot be narrowed to i32: {why}",
        "pass i32 values (ids.astype('int32')) or use an i32 index_dtype; or use target cpu"))


def c64_matmul_to_real(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """(a + bi)(c + di) = (ac - bd) + (ad + bc)i with four real dot_generals."""
    lhs, rhs = ins
    attrs = {"contract": node.attr("contract"), "batch": node.attr("batch")}

    def parts(z: Value) -> tuple[Value, Value]:
        re = b.emit("cast", [z], {"dtype": dt.f32})  # complex -> real keeps the real part
        im = b.emit("cast", [b.emit("mul", [z, const(b, -1j, z)])], {"dtype": dt.f32})
        return re, im

    (a, bi), (c, di) = parts(lhs), parts(rhs)
    re = b.emit("sub", [b.emit("dot_general", [a, c], attrs),
                        b.emit("dot_general", [bi, di], attrs)])
    im = b.emit("add", [b.emit("dot_general", [a, di], attrs),
                        b.emit("dot_general", [bi, c], attrs)])
    re_c = b.emit("cast", [re], {"dtype": dt.c64})
    im_c = b.emit("cast", [im], {"dtype": dt.c64})
    return b.emit("add", [re_c, b.emit("mul", [im_c, const(b, 1j, im_c)])])


def int4_matmul_unpack(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """Unpack i4 to i8, widen to i32 (dequantize with unit scale), matmul in i32, wrap back to i4.

    i4 arithmetic wraps (reference semantics), and wrapping commutes with exact integer sums,
    so the i32 accumulation followed by one wrap gives the same bits.
    """
    attrs = {"contract": node.attr("contract"), "batch": node.attr("batch")}
    wide = [b.emit("cast", [b.emit("cast", [v], {"dtype": dt.i8})], {"dtype": dt.i32})
            for v in ins]
    y = b.emit("dot_general", wide, attrs)
    return b.emit("cast", [y], {"dtype": dt.i4})


def splat_no_kernel(node: Node, ins: list[Value], b: Builder, env: RewriteEnv) -> Value:
    """The splatting ops (ir/ops/splat.py) have no common-IR form: only a target with their
    kernels runs them, so on any other this rule says where they do run."""
    raise NotApplicable(Reason(
        "RLX-S020", f"{node.op} has no kernel on {env.caps.target} and no common-IR form "
        "(per-tile depth sorting and compositing are not MIR)",
        "compile the splatting part for target cpu or webgpu (or numpy, the oracle)"))


# The registry: tried in this order for a node when the policy reaches the rewritten route.
REWRITES: tuple[Rewrite, ...] = (
    Rewrite("f64_unsupported", lambda n, ts, caps: _touches(ts, n, "f64") and _lacks(caps, "f64"),
            f64_unsupported, "f64 on a target without f64: error with a fix hint"),
    Rewrite("i64_to_i32", lambda n, ts, caps: _touches(ts, n, "i64") and
            getattr(caps.dtype_rule("i64"), "status", "") == "narrow",
            i64_to_i32, "i64 values -> i32 where provably in range (else an error)"),
    Rewrite("erf_polynomial", lambda n, ts, caps: n.op == "erf", erf_polynomial,
            "erf -> Abramowitz-Stegun 7.1.26 polynomial (|err| <= 1.5e-7)"),
    Rewrite("gelu_erf_to_tanh", lambda n, ts, caps: n.op == "gelu" and
            n.attr("approximate") == "none", gelu_erf_to_tanh,
            "exact gelu -> tanh approximation, only with allow_approximate", approximate=True),
    Rewrite("conv2d_im2col_matmul", lambda n, ts, caps: n.op == "conv2d", conv2d_im2col_matmul,
            "conv2d -> im2col + canonical batched matmul"),
    Rewrite("attention_matmul_softmax", lambda n, ts, caps: n.op == "attention",
            attention_matmul_softmax, "attention -> matmul, softmax block, matmul"),
    Rewrite("c64_matmul_to_real", lambda n, ts, caps: n.op == "dot_general" and
            _touches(ts, n, "c64"), c64_matmul_to_real, "c64 matmul -> four real matmuls"),
    Rewrite("int4_matmul_unpack", lambda n, ts, caps: n.op == "dot_general" and
            _touches(ts, n, "i4"), int4_matmul_unpack,
            "i4 matmul -> unpack to i8, widen to i32, matmul, wrap to i4"),
    Rewrite("splat_no_kernel", lambda n, ts, caps: n.op.startswith("splat_"), splat_no_kernel,
            "splatting op on a target without its kernels: error naming the ones with"),
    Rewrite("linalg_no_kernel", lambda n, ts, caps: n.op in NO_KERNEL_OPS, host_kernel_only,
            "dense linear algebra / sparse op on a target without it: RLX-S002 with a fix"),
)


def rewrites_for(node: Node, types: list[TensorType], caps: Capabilities) -> list[Rewrite]:
    return [r for r in REWRITES if r.when(node, types, caps)]


def rewrite_names() -> tuple[str, ...]:
    return tuple(r.name for r in REWRITES)


def describe() -> list[dict[str, Any]]:
    return [{"name": r.name, "doc": r.doc, "approximate": r.approximate} for r in REWRITES]
