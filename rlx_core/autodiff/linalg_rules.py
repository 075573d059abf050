"""VJP rules of the dense linear algebra and sparse ops (ir/ops/linalg.py, ir/ops/sparse.py).

These ops have no decomposition, so they stay whole through ``autodiff.to_mir`` and their
backward is written with MIR primitives plus the same ops (a solve's cotangent is another
solve; SpMV's is a transposed SpMV and an SDDMM). Matrices are in the last two axes.

- solve:  X = A^-1 B;  B_bar = A^-T X_bar,  A_bar = -B_bar X^T.
- triangular_solve: the same with op(A), masked to the triangle that is read.
- cholesky (Murray 2016): S = L^-T Phi(L^T L_bar) L^-1 with Phi the lower triangle, diagonal
  halved; A is read through its lower triangle, so A_bar = tril(S + S^T, -1) + diag(S).
- eigh (distinct eigenvalues): G = V (diag(w_bar) + F o (V^T V_bar)) V^T with
  F_ij = 1 / (w_j - w_i) off the diagonal; read through the lower triangle as cholesky. Equal
  eigenvalues make F infinite, as in every framework: the gradient is then inf/NaN.
- det: A_bar = g det(A) A^-T;  slogdet: A_bar = g_logabsdet A^-T;  inv: A_bar = -Y^T Y_bar Y^T.
- spmv / spmm: x_bar = A^T y_bar (the transposed op), values_bar = sddmm(y_bar, x) (the
  operands swapped for the transposed op); sddmm: X_bar = spmm(g, Y), Y_bar = spmm^T(g, X).
  The structure (indptr, indices) gets no cotangent.
"""

from __future__ import annotations

from rlx_core.dispatch.decompositions import const
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Node, Value

Cotangents = tuple[Value | None, ...]


def _t(b: Builder, x: Value) -> Value:
    """Swap the last two axes."""
    r = x.type.rank
    return b.emit("transpose", [x], {"perm": tuple(range(r - 2)) + (r - 1, r - 2)})


def _mm(b: Builder, x: Value, y: Value) -> Value:
    """Batched x @ y over the leading axes."""
    r = x.type.rank
    batch = tuple(range(r - 2))
    return b.emit("dot_general", [x, y], {"contract": ((r - 1,), (r - 2,)),
                                          "batch": (batch, batch)})


def _tri_mask(b: Builder, like: Value, keep: str) -> Value:
    """bool mask over ``like``'s shape: row > col ("strict_lower"), row >= col ("lower"),
    row <= col ("upper"), row < col ("strict_upper") or row == col ("diag")."""
    shape, r = like.type.shape, like.type.rank
    row = b.emit("iota", [], {"shape": shape, "dim": r - 2, "dtype": "i32"})
    col = b.emit("iota", [], {"shape": shape, "dim": r - 1, "dtype": "i32"})
    op = {"strict_lower": "gt", "lower": "ge", "upper": "le", "strict_upper": "lt",
          "diag": "eq"}[keep]
    return b.emit(op, [row, col])


def _keep(b: Builder, x: Value, keep: str) -> Value:
    return b.emit("select", [_tri_mask(b, x, keep), x, const(b, 0.0, x)])


def _lower_read(b: Builder, s: Value) -> Value:
    """The gradient on A of a function of the symmetric matrix tril(A) + tril(A, -1)^T,
    given the gradient ``s`` on that symmetric matrix: tril(S + S^T, -1) + diag(S)."""
    both = b.emit("add", [s, _t(b, s)])
    return b.emit("add", [_keep(b, both, "strict_lower"), _keep(b, s, "diag")])


def _bcast_scalar(b: Builder, x: Value, like: Value) -> Value:
    """A (batch,) value broadcast over the matrices of ``like``."""
    return b.emit("broadcast_in_dim", [x], {"shape": like.type.shape,
                                            "dims": tuple(range(x.type.rank))})


def _part(b: Builder, packed: Value, start: int, shape: tuple[int, ...]) -> Value:
    """A slice of a packed trailing axis, reshaped to batch + shape."""
    batch = packed.type.shape[:-1]
    size = 1
    for d in shape:
        size *= d
    s = b.emit("slice", [packed], {"start": (0,) * len(batch) + (start,),
                                   "limit": batch + (start + size,),
                                   "stride": (1,) * (len(batch) + 1)})
    return b.emit("reshape", [s], {"shape": batch + shape})


def _solve(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    a, _ = ins
    gb = b.emit("solve", [_t(b, a), g])
    ga = b.emit("neg", [_mm(b, gb, _t(b, out))])
    return ga, gb


def _triangular_solve(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    a, _ = ins
    lower, trans, unit = (bool(n.attr(k)) for k in ("lower", "transpose_a", "unit_diagonal"))
    gb = b.emit("triangular_solve", [a, g], {"lower": lower, "transpose_a": not trans,
                                             "unit_diagonal": unit})
    full = _mm(b, gb, _t(b, out)) if not trans else _mm(b, out, _t(b, gb))
    ga = b.emit("neg", [full])
    tri = ("strict_lower" if lower else "strict_upper") if unit else \
        ("lower" if lower else "upper")
    return _keep(b, ga, tri), gb


def _cholesky(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    lt_g = _mm(b, _t(b, out), g)
    half = b.emit("mul", [_keep(b, lt_g, "diag"), const(b, 0.5, lt_g)])
    phi = b.emit("add", [_keep(b, lt_g, "strict_lower"), half])
    y = b.emit("triangular_solve", [out, phi], {"lower": True, "transpose_a": True})
    st = b.emit("triangular_solve", [out, _t(b, y)], {"lower": True, "transpose_a": True})
    return (_lower_read(b, _t(b, st)),)


def _eigh(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    a = ins[0]
    m = a.type.shape[-1]
    w, v = _part(b, out, 0, (m,)), _part(b, out, m, (m, m))
    gw, gv = _part(b, g, 0, (m,)), _part(b, g, m, (m, m))
    r = a.type.rank
    shape = a.type.shape
    lead = tuple(range(r - 2))
    wi = b.emit("broadcast_in_dim", [w], {"shape": shape, "dims": lead + (r - 2,)})
    wj = b.emit("broadcast_in_dim", [w], {"shape": shape, "dims": lead + (r - 1,)})
    diff = b.emit("sub", [wj, wi])
    off = b.emit("ne", [diff, const(b, 0.0, diff)])
    safe = b.emit("select", [off, diff, const(b, 1.0, diff)])
    f = b.emit("div", [const(b, 1.0, diff), safe])
    f = b.emit("select", [_tri_mask(b, f, "diag"), const(b, 0.0, f), f])
    inner = b.emit("mul", [f, _mm(b, _t(b, v), gv)])
    diag_gw = b.emit("select", [_tri_mask(b, inner, "diag"),
                                b.emit("broadcast_in_dim", [gw], {
                                    "shape": shape, "dims": lead + (r - 1,)}),
                                const(b, 0.0, inner)])
    core = b.emit("add", [inner, diag_gw])
    full = _mm(b, _mm(b, v, core), _t(b, v))
    return (_lower_read(b, full),)


def _det(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    a = ins[0]
    scale = _bcast_scalar(b, b.emit("mul", [g, out]), a)
    return (b.emit("mul", [scale, _t(b, b.emit("inv", [a]))]),)


def _slogdet(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    a = ins[0]
    batch = g.type.shape[:-1]
    g_log = b.emit("reshape", [_part(b, g, 1, ())], {"shape": batch})
    return (b.emit("mul", [_bcast_scalar(b, g_log, a), _t(b, b.emit("inv", [a]))]),)


def _inv(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    yt = _t(b, out)
    return (b.emit("neg", [_mm(b, _mm(b, yt, g), yt)]),)


def _as_matrix(b: Builder, x: Value) -> Value:
    return x if x.type.rank == 2 else b.emit("reshape", [x], {"shape": x.type.shape + (1,)})


def _sp_apply(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    ip, ix, vals, x = ins
    shape, trans = n.attr("shape"), bool(n.attr("transpose"))
    gx = b.emit(n.op, [ip, ix, vals, g], {"shape": shape, "transpose": not trans})
    gm, xm = _as_matrix(b, g), _as_matrix(b, x)
    rows_side, cols_side = (xm, gm) if trans else (gm, xm)
    gv = b.emit("sddmm", [ip, ix, rows_side, cols_side], {"shape": shape})
    return None, None, gv, gx


def _sddmm(n: Node, ins: list[Value], out: Value, g: Value, b: Builder) -> Cotangents:
    ip, ix, x, y = ins
    shape = n.attr("shape")
    gx = b.emit("spmm", [ip, ix, g, y], {"shape": shape, "transpose": False})
    gy = b.emit("spmm", [ip, ix, g, x], {"shape": shape, "transpose": True})
    return None, None, gx, gy


LINALG_VJP_RULES = {
    "solve": _solve, "triangular_solve": _triangular_solve, "cholesky": _cholesky,
    "eigh": _eigh, "det": _det, "slogdet": _slogdet, "inv": _inv,
    "spmv": _sp_apply, "spmm": _sp_apply, "sddmm": _sddmm,
}
