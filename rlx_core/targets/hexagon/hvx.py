"""HVX (128-byte vector) kernels for the elementwise ops Hexagon's integer vector unit has.

A kernel of one binary node over contiguous operands of equal shape becomes a loop over whole
128-byte vectors with one HVX intrinsic each (unaligned ``vmemu`` loads and stores), then a
scalar tail written by the shared C expression rules. Integer lanes wrap like the reference
(HVX ``vadd``/``vsub`` are modular). f32 uses HVX's qf32 arithmetic, which exists from v68 on:
those loops are guarded by ``__HVX_ARCH__ >= 68`` and fall back to the scalar loop below.
Matmuls whose rhs rows are contiguous get HVX tiles (``hvx_gemm``): i16 and i32/u32 lanes from
v62, f32 in qf32 from v68.
"""

from __future__ import annotations

from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.expr import render as c_expr

VECTOR_BYTES = 128

# (op, dtype) -> intrinsic call with {a} and {b}; integer ops are HVX v60+
_INT = {
    ("add", "i8"): "Q6_Vb_vadd_VbVb({a}, {b})", ("add", "u8"): "Q6_Vb_vadd_VbVb({a}, {b})",
    ("add", "i16"): "Q6_Vh_vadd_VhVh({a}, {b})", ("add", "i32"): "Q6_Vw_vadd_VwVw({a}, {b})",
    ("add", "u32"): "Q6_Vw_vadd_VwVw({a}, {b})",
    ("sub", "i8"): "Q6_Vb_vsub_VbVb({a}, {b})", ("sub", "u8"): "Q6_Vb_vsub_VbVb({a}, {b})",
    ("sub", "i16"): "Q6_Vh_vsub_VhVh({a}, {b})", ("sub", "i32"): "Q6_Vw_vsub_VwVw({a}, {b})",
    ("sub", "u32"): "Q6_Vw_vsub_VwVw({a}, {b})",
    ("max", "i8"): "Q6_Vb_vmax_VbVb({a}, {b})", ("max", "u8"): "Q6_Vub_vmax_VubVub({a}, {b})",
    ("max", "i16"): "Q6_Vh_vmax_VhVh({a}, {b})", ("max", "i32"): "Q6_Vw_vmax_VwVw({a}, {b})",
    ("min", "i8"): "Q6_Vb_vmin_VbVb({a}, {b})", ("min", "u8"): "Q6_Vub_vmin_VubVub({a}, {b})",
    ("min", "i16"): "Q6_Vh_vmin_VhVh({a}, {b})", ("min", "i32"): "Q6_Vw_vmin_VwVw({a}, {b})",
    ("mul", "i16"): "Q6_Vh_vmpyi_VhVh({a}, {b})",
}
for _d in ("i8", "u8", "i16", "i32", "u32", "bool"):
    for _op, _fn in (("and", "Q6_V_vand_VV"), ("or", "Q6_V_vor_VV"), ("xor", "Q6_V_vxor_VV")):
        _INT[(_op, _d)] = _fn + "({a}, {b})"
# f32 through qf32 (v68+): the sum is formed in qf32 and converted back to IEEE f32
_F32 = {
    "add": "Q6_Vsf_equals_Vqf32(Q6_Vqf32_vadd_VsfVsf({a}, {b}))",
    "sub": "Q6_Vsf_equals_Vqf32(Q6_Vqf32_vsub_VsfVsf({a}, {b}))",
    "mul": "Q6_Vsf_equals_Vqf32(Q6_Vqf32_vmpy_VsfVsf({a}, {b}))",
}

HEADER = r"""
/* HVX: 128-byte vectors; unaligned loads/stores through a 1-byte-aligned vector type */
#include <hvx_hexagon_protos.h>
typedef long HVX_Vector __attribute__((__vector_size__(128))) __attribute__((aligned(128)));
typedef long HVX_UVector __attribute__((__vector_size__(128))) __attribute__((aligned(1)));
#define RLX_VLD(p) (*(const HVX_UVector*)(const void*)(p))
#define RLX_VST(p, v) (*(HVX_UVector*)(void*)(p) = (v))
static inline int32_t rlx_f2bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
"""


def intrinsic(op: str, dtype: str) -> tuple[str, bool] | None:
    """(intrinsic template, needs v68) for ``op`` on ``dtype`` lanes, or None (scalar only)."""
    if (op, dtype) in _INT:
        return _INT[(op, dtype)], False
    if dtype == "f32" and op in _F32:
        return _F32[op], True
    return None


def hvx_kernel(k: Kernel, types: dict[str, TensorType]) -> tuple[str, str, int] | None:
    """(op, dtype, lanes) when ``k`` is one binary node HVX runs lane-wise, else None."""
    if k.kind != "elementwise" or len(k.nodes) != 1 or len(k.outputs) != 1:
        return None
    n = k.nodes[0]
    if len(n.inputs) != 2 or any(i not in k.inputs for i in n.inputs):
        return None
    t = n.type
    if any(types[i] != t for i in n.inputs) or intrinsic(n.op, t.dtype.name) is None:
        return None
    lanes = VECTOR_BYTES * 8 // max(8, t.dtype.bits)
    return n.op, t.dtype.name, lanes


def render_body(k: Kernel, types: dict[str, TensorType]) -> list[str]:
    """The statements of an HVX kernel (see the module docstring); call hvx_kernel first."""
    op, dtype, lanes = hvx_kernel(k, types)  # type: ignore[misc]
    n = k.nodes[0]
    a, b = (f"in{k.inputs.index(i)}" for i in n.inputs)
    d = n.type.dtype
    size = n.type.size
    template, v68 = intrinsic(op, dtype)  # type: ignore[misc]
    scalar = c_expr(op, n.a, [ct.load(d, f"{a}[i]"), ct.load(d, f"{b}[i]")], [d, d], d)
    lines = [f"const int64_t n = {size};", "int64_t i = 0;"]
    if v68:
        lines.append("#if defined(__HVX_ARCH__) && __HVX_ARCH__ >= 68")
    lines += [f"for (; i + {lanes} <= n; i += {lanes}) {{  /* {lanes} lanes per vector */",
              f"    RLX_VST(out0 + i, {template.format(a=f'RLX_VLD({a} + i)', b=f'RLX_VLD({b} + i)')});",
              "}"]
    if v68:
        lines.append("#endif")
    lines += ["for (; i < n; ++i) {  /* the tail (and every lane without HVX) */",
              f"    out0[i] = {ct.store(d, scalar)};", "}"]
    return ["    " + x if not x.startswith("#") else x for x in lines]


# integer lane sums: the vector add of each lane width (wrapping, as the reference's sums do)
_LANE_ADD = {"i8": "Q6_Vb_vadd_VbVb", "u8": "Q6_Vb_vadd_VbVb", "i16": "Q6_Vh_vadd_VhVh",
             "i32": "Q6_Vw_vadd_VwVw", "u32": "Q6_Vw_vadd_VwVw"}
_UNSIGNED = {"i8": "uint8_t", "u8": "uint8_t", "i16": "uint16_t", "i32": "uint32_t",
             "u32": "uint32_t"}


def hvx_row_sum(k: Kernel, types: dict[str, TensorType]) -> tuple[int, int, int] | None:
    """(rows, row length, lanes) when ``k`` is one integer reduce_sum over the trailing axes of
    a kernel input (each row contiguous), else None."""
    if k.kind != "reduce" or len(k.nodes) != 1 or len(k.outputs) != 1:
        return None
    n = k.nodes[0]
    if n.op != "reduce_sum" or n.inputs[0] not in k.inputs:
        return None
    x = types[n.inputs[0]]
    axes = tuple(n.attr("axes"))
    d = x.dtype.name
    if d not in _LANE_ADD or not axes or axes != tuple(range(x.rank - len(axes), x.rank)):
        return None
    inner = 1
    for a in axes:
        inner *= x.shape[a]
    lanes = VECTOR_BYTES * 8 // x.dtype.bits
    if inner < lanes:
        return None
    return x.size // inner if inner else 0, inner, lanes


def render_row_sum(k: Kernel, types: dict[str, TensorType]) -> list[str]:
    """Per row: whole vectors summed lane-wise into one HVX accumulator, its lanes and the
    tail added in the unsigned type (sums wrap like the reference's), one store."""
    rows, inner, lanes = hvx_row_sum(k, types)  # type: ignore[misc]
    d = types[k.nodes[0].inputs[0]].dtype.name
    u, t = _UNSIGNED[d], ct.storage(types[k.nodes[0].inputs[0]].dtype)
    body = [
        f"HVX_Vector lanes_buf[1];  /* one 128-byte vector of {lanes} partial sums */",
        f"for (int64_t r = 0; r < {rows}; ++r) {{",
        f"    const {t}* row = in0 + r * {inner};",
        "    HVX_Vector acc = Q6_V_vzero();",
        "    int64_t j = 0;",
        f"    for (; j + {lanes} <= {inner}; j += {lanes}) acc = {_LANE_ADD[d]}(acc, "
        f"RLX_VLD(row + j));",
        "    lanes_buf[0] = acc;",
        f"    const {t}* part = (const {t}*)(const void*)lanes_buf;",
        f"    {u} s = 0;",
        f"    for (int l = 0; l < {lanes}; ++l) s = ({u})(s + ({u})part[l]);",
        f"    for (; j < {inner}; ++j) s = ({u})(s + ({u})row[j]);",
        f"    out0[r] = ({t})s;",
        "}",
    ]
    return ["    " + x for x in body]


# matmul tiles: (splat of one lhs element, multiply lane-wise, add into the accumulator, the
# vector stored); i32 products are the low 32 bits (even x odd halves << 16, plus the word
# times its low unsigned half: modular, like the reference's wrapping matmul)
_GEMM = {
    "i16": ("Q6_Vh_vsplat_R({a})", "Q6_Vh_vadd_VhVh({acc}, Q6_Vh_vmpyi_VhVh({s}, {b}))", "{acc}"),
    "i32": ("Q6_V_vsplat_R({a})",
            "Q6_Vw_vadd_VwVw({acc}, Q6_Vw_vmpyieacc_VwVwVuh(Q6_Vw_vmpyieo_VhVh({b}, {s}), "
            "{b}, {s}))", "{acc}"),
    # qf32 (v68+): products and sums in qf32, converted to IEEE f32 once per tile
    "f32": ("Q6_V_vsplat_R(rlx_f2bits({a}))",
            "Q6_Vqf32_vadd_Vqf32Vqf32({acc}, Q6_Vqf32_vmpy_VsfVsf({s}, {b}))",
            "Q6_Vsf_equals_Vqf32({acc})"),
}
_GEMM["u32"] = _GEMM["i32"]

def hvx_gemm(w: Any, spec: Any) -> str | None:
    """HVX tiles of a GEMM whose B is [K, N] (rows contiguous in n): for each row of C, one
    128-byte vector of columns at a time, acc += splat(A[m, k]) * B[k, n0:n0+L] over k; the
    columns past the last whole vector (and, without v68, every f32 column) in scalar C.
    Returns the impl label, or None (the generated loop) for other dtypes and layouts."""
    d = spec.dtype
    if d.name not in _GEMM or spec.sb.col != 1:
        return None
    splat, mac, fin = _GEMM[d.name]
    lanes = VECTOR_BYTES * 8 // d.bits
    sa, sb = spec.sa, spec.sb
    t = ct.storage(d)
    acc_t = "float" if d.is_float else "uint64_t"

    def widen(x: str) -> str:
        return x if d.is_float else (f"(uint64_t)(int64_t){x}" if d.kind is dt.Kind.INT
                                     else f"(uint64_t){x}")

    a_at = f"{spec.a}[{sa.offset('bb')} + m * {sa.row} + k * {sa.col}]"
    brow = f"{spec.b} + {sb.offset('bb')} + k * {sb.row}"
    w.open(f"for (int64_t bb = 0; bb < {spec.batch}; ++bb)")
    w.open(f"for (int64_t m = 0; m < {spec.m}; ++m)")
    w.line(f"{t}* crow = {spec.c} + bb * {spec.m * spec.n} + m * {spec.n};")
    w.line("int64_t n0 = 0;")
    if d.is_float:
        w.line("#if defined(__HVX_ARCH__) && __HVX_ARCH__ >= 68")
    w.open(f"for (; n0 + {lanes} <= {spec.n}; n0 += {lanes})")
    w.line("HVX_Vector acc = Q6_V_vzero();")
    w.open(f"for (int64_t k = 0; k < {spec.k}; ++k)")
    w.line(f"const HVX_Vector s = {splat.format(a=a_at)};")
    w.line(f"acc = {mac.format(acc='acc', s='s', b=f'RLX_VLD({brow} + n0)')};")
    w.close()
    w.line(f"RLX_VST(crow + n0, {fin.format(acc='acc')});")
    w.close()
    if d.is_float:
        w.line("#endif")
    w.open(f"for (int64_t n = n0; n < {spec.n}; ++n)  /* the columns past the last vector */")
    w.line(f"{acc_t} acc = 0;")
    w.open(f"for (int64_t k = 0; k < {spec.k}; ++k)")
    w.line(f"acc += {widen(a_at)} * {widen(f'({brow})[n]')};")
    w.close()
    w.line(f"crow[n] = ({t})acc;")
    w.close()
    w.close()
    w.close()
    return f"hvx-matmul-{d.name}"
