"""The CPU's dense linear algebra kernels: LAPACK from the scipy-openblas32 wheel, called from C.

The wheel's ``libscipy_openblas.so`` (already linked for the GEMMs, cpu/blas.py) carries the
whole of LAPACK with the ``scipy_`` prefix (``scipy_dpotrf_``), Fortran ABI: arguments by
pointer, hidden string lengths last, column-major matrices. rlx's matrices are row-major, and
a row-major A read as column-major is A^T. Each kernel uses that instead of transposing
where it can:

- cholesky: potrf('U') on A's bytes factors A^T's upper triangle, i.e. A's lower one, and
  leaves L in the row-major lower triangle.
- solve / inv / det: getrf on A^T (det A^T = det A), then getrs('T') solves A X = B; B is
  transposed into a column-major scratch only when it has several columns.
- triangular_solve: trsm from the right on X^T (A X = B  <=>  X^T A^T = B^T), in place in
  the output.
- svd: gesdd on A^T = U' S V'^T gives A = V' S U'^T, and the column-major V'^T and U' are
  exactly row-major U and Vt: written straight into the output.
- lu and qr need A itself column-major (row pivoting, Householder on columns): one
  transposed copy in, one out.

Failures follow the reference semantics (numpy_ref/linalg_semantics.py): a nonzero ``info``
fills that batch entry with NaN; the sign conventions of qr/eigh/svd are applied here too.
Each kernel runs on one thread (the team's thread 0) with OpenBLAS on one thread.
"""

from __future__ import annotations

import math
from functools import cache

from rlx_core.ir.graph import Node
from rlx_core.ir.ops.linalg import LINALG_DTYPES, LINALG_OPS
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer

IMPL = "lapack"
DTYPES = LINALG_DTYPES
OPS = LINALG_OPS

_PROTOTYPES = r"""
void @P@@X@potrf_(const char*, const int*, @T@*, const int*, int*, size_t);
void @P@@X@getrf_(const int*, const int*, @T@*, const int*, int*, int*);
void @P@@X@getrs_(const char*, const int*, const int*, const @T@*, const int*, const int*,
                  @T@*, const int*, int*, size_t);
void @P@@X@getri_(const int*, @T@*, const int*, const int*, @T@*, const int*, int*);
void @P@@X@trsm_(const char*, const char*, const char*, const char*, const int*, const int*,
                 const @T@*, const @T@*, const int*, @T@*, const int*, size_t, size_t, size_t,
                 size_t);
void @P@@X@geqrf_(const int*, const int*, @T@*, const int*, @T@*, @T@*, const int*, int*);
void @P@@X@orgqr_(const int*, const int*, const int*, @T@*, const int*, const @T@*, @T@*,
                  const int*, int*);
void @P@@X@syevd_(const char*, const char*, const int*, @T@*, const int*, @T@*, @T@*,
                  const int*, int*, const int*, int*, size_t, size_t);
void @P@@X@gesdd_(const char*, const int*, const int*, @T@*, const int*, @T@*, @T@*,
                  const int*, @T@*, const int*, @T@*, const int*, int*, int*, size_t);
"""

# one copy per element type: @T@ the C type, @X@ the LAPACK letter, @P@ the symbol prefix
_KERNELS = r"""
static void rlx_la_nan_@X@(@T@ *y, int64_t count) {
    for (int64_t i = 0; i < count; ++i) y[i] = (@T@)NAN;
}

/* +1/-1: the sign of the largest-magnitude of count entries at stride (first on a tie) */
static @T@ rlx_la_sign_@X@(const @T@ *v, int count, int stride) {
    @T@ best = 0, at = 1;
    for (int i = 0; i < count; ++i) {
        const @T@ a = v[(int64_t)i * stride] < 0 ? -v[(int64_t)i * stride] : v[(int64_t)i * stride];
        if (a > best) { best = a; at = v[(int64_t)i * stride]; }
    }
    return at < 0 ? (@T@)-1 : (@T@)1;
}

static void rlx_la_cholesky_@X@(int64_t batch, int n, const @T@ *a, @T@ *l) {
    const int64_t nn = (int64_t)n * n;
    for (int64_t b = 0; b < batch; ++b) {
        @T@ *lb = l + b * nn;
        memcpy(lb, a + b * nn, (size_t)nn * sizeof(@T@));
        int info = 0;
        if (n > 0) @P@@X@potrf_("U", &n, lb, &n, &info, 1);
        if (info != 0) { rlx_la_nan_@X@(lb, nn); continue; }
        for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j) lb[(int64_t)i * n + j] = 0;
    }
}

static void rlx_la_trsolve_@X@(int64_t batch, int n, int k, const @T@ *a, const @T@ *b,
                               @T@ *x, int lower, int trans, int unit) {
    const @T@ one = 1;
    const char uplo = lower ? 'U' : 'L', ta = trans ? 'T' : 'N', dg = unit ? 'U' : 'N';
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *xb = x + i * (int64_t)n * k;
        memcpy(xb, b + i * (int64_t)n * k, (size_t)n * k * sizeof(@T@));
        if (n > 0 && k > 0)
            @P@@X@trsm_("R", &uplo, &ta, &dg, &k, &n, &one, a + i * (int64_t)n * n, &n, xb, &k,
                        1, 1, 1, 1);
    }
}

static void rlx_la_solve_@X@(int64_t batch, int n, int k, const @T@ *a, const @T@ *b, @T@ *x) {
    const int64_t nn = (int64_t)n * n, nk = (int64_t)n * k;
    @T@ *lu = (@T@ *)malloc((size_t)(nn + (k > 1 ? nk : 0) + 1) * sizeof(@T@));
    int *piv = (int *)malloc((size_t)(n + 1) * sizeof(int));
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *xb = x + i * nk;
        const @T@ *bb = b + i * nk;
        int info = 0;
        if (!lu || !piv) { rlx_la_nan_@X@(xb, nk); continue; }
        if (n == 0 || k == 0) continue;
        memcpy(lu, a + i * nn, (size_t)nn * sizeof(@T@));
        @P@@X@getrf_(&n, &n, lu, &n, piv, &info);
        if (info != 0) { rlx_la_nan_@X@(xb, nk); continue; }
        @T@ *rhs = xb;
        if (k > 1) {
            rhs = lu + nn;
            for (int r = 0; r < n; ++r)
                for (int c = 0; c < k; ++c) rhs[(int64_t)c * n + r] = bb[(int64_t)r * k + c];
        } else {
            memcpy(xb, bb, (size_t)n * sizeof(@T@));
        }
        @P@@X@getrs_("T", &n, &k, lu, &n, piv, rhs, &n, &info, 1);
        if (k > 1)
            for (int r = 0; r < n; ++r)
                for (int c = 0; c < k; ++c) xb[(int64_t)r * k + c] = rhs[(int64_t)c * n + r];
    }
    free(lu);
    free(piv);
}

static void rlx_la_inv_@X@(int64_t batch, int n, const @T@ *a, @T@ *y) {
    const int64_t nn = (int64_t)n * n;
    int *piv = (int *)malloc((size_t)(n + 1) * sizeof(int));
    int lwork = -1, info = 0;
    @T@ query = 0;
    if (n > 0) @P@@X@getri_(&n, y, &n, piv, &query, &lwork, &info);
    lwork = (int)query > n ? (int)query : (n > 0 ? n : 1);
    @T@ *work = (@T@ *)malloc((size_t)lwork * sizeof(@T@));
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *yb = y + i * nn;
        if (!piv || !work) { rlx_la_nan_@X@(yb, nn); continue; }
        if (n == 0) continue;
        memcpy(yb, a + i * nn, (size_t)nn * sizeof(@T@));
        @P@@X@getrf_(&n, &n, yb, &n, piv, &info);
        if (info == 0) @P@@X@getri_(&n, yb, &n, piv, work, &lwork, &info);
        if (info != 0) rlx_la_nan_@X@(yb, nn);
    }
    free(piv);
    free(work);
}

/* det (logdet = 0) or (sign, log|det|) (logdet = 1) of every matrix, from getrf */
static void rlx_la_det_@X@(int64_t batch, int n, const @T@ *a, @T@ *y, int logdet) {
    const int64_t nn = (int64_t)n * n;
    @T@ *lu = (@T@ *)malloc((size_t)(nn + 1) * sizeof(@T@));
    int *piv = (int *)malloc((size_t)(n + 1) * sizeof(int));
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *yb = y + i * (logdet ? 2 : 1);
        if (!lu || !piv) { rlx_la_nan_@X@(yb, logdet ? 2 : 1); continue; }
        int info = 0;
        memcpy(lu, a + i * nn, (size_t)nn * sizeof(@T@));
        if (n > 0) @P@@X@getrf_(&n, &n, lu, &n, piv, &info);
        double sign = 1, logabs = 0, prod = 1;
        for (int r = 0; r < n; ++r) {
            const double d = lu[(int64_t)r * n + r];
            if (piv[r] != r + 1) sign = -sign;
            prod *= d;
            if (d < 0) sign = -sign;
            logabs += log(d < 0 ? -d : d);
        }
        if (logdet) {
            const int zero = logabs == -INFINITY;
            yb[0] = (@T@)(zero ? 0 : sign);
            yb[1] = (@T@)logabs;
        } else {
            double s = 1;
            for (int r = 0; r < n; ++r) if (piv[r] != r + 1) s = -s;
            yb[0] = (@T@)(s * prod);
        }
    }
    free(lu);
    free(piv);
}

/* packed (LU, perm) with a[perm] = L U: getrf on a column-major copy of A */
static void rlx_la_lu_@X@(int64_t batch, int n, const @T@ *a, @T@ *y) {
    const int64_t nn = (int64_t)n * n;
    @T@ *s = (@T@ *)malloc((size_t)(nn + 1) * sizeof(@T@));
    int *piv = (int *)malloc((size_t)(2 * n + 1) * sizeof(int));
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *yb = y + i * (nn + n);
        const @T@ *ab = a + i * nn;
        if (!s || !piv) { rlx_la_nan_@X@(yb, nn + n); continue; }
        if (n == 0) continue;
        for (int r = 0; r < n; ++r)
            for (int c = 0; c < n; ++c) s[(int64_t)c * n + r] = ab[(int64_t)r * n + c];
        int info = 0;
        @P@@X@getrf_(&n, &n, s, &n, piv, &info);  /* info > 0: U is singular, still valid */
        for (int r = 0; r < n; ++r)
            for (int c = 0; c < n; ++c) yb[(int64_t)r * n + c] = s[(int64_t)c * n + r];
        int *perm = piv + n;
        for (int r = 0; r < n; ++r) perm[r] = r;
        for (int r = 0; r < n; ++r) {
            const int p = piv[r] - 1, t = perm[r];
            perm[r] = perm[p];
            perm[p] = t;
        }
        for (int r = 0; r < n; ++r) yb[nn + r] = (@T@)perm[r];
    }
    free(s);
    free(piv);
}

/* packed (Q, R), reduced, diag(R) >= 0: geqrf + orgqr on a column-major copy of A */
static void rlx_la_qr_@X@(int64_t batch, int m, int n, const @T@ *a, @T@ *y) {
    const int k = m < n ? m : n;
    const int64_t mn = (int64_t)m * n, mk = (int64_t)m * k, kn = (int64_t)k * n;
    int lwork = -1, info = 0, one = 1;
    @T@ q1 = 0, q2 = 0;
    if (k > 0) {
        @P@@X@geqrf_(&m, &n, y, &m, y, &q1, &lwork, &info);
        @P@@X@orgqr_(&m, &k, &k, y, &m, y, &q2, &lwork, &info);
    }
    lwork = (int)(q1 > q2 ? q1 : q2);
    if (lwork < n) lwork = n > 0 ? n : one;
    @T@ *s = (@T@ *)malloc((size_t)(mn + k + lwork + 1) * sizeof(@T@));
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *yq = y + i * (mk + kn), *yr = yq + mk;
        const @T@ *ab = a + i * mn;
        if (!s) { rlx_la_nan_@X@(yq, mk + kn); continue; }
        if (k == 0) continue;
        @T@ *tau = s + mn, *work = tau + k;
        for (int r = 0; r < m; ++r)
            for (int c = 0; c < n; ++c) s[(int64_t)c * m + r] = ab[(int64_t)r * n + c];
        @P@@X@geqrf_(&m, &n, s, &m, tau, work, &lwork, &info);
        for (int r = 0; r < k; ++r)
            for (int c = 0; c < n; ++c) yr[(int64_t)r * n + c] = c >= r ? s[(int64_t)c * m + r] : 0;
        @P@@X@orgqr_(&m, &k, &k, s, &m, tau, work, &lwork, &info);
        for (int r = 0; r < m; ++r)
            for (int c = 0; c < k; ++c) yq[(int64_t)r * k + c] = s[(int64_t)c * m + r];
        for (int d = 0; d < k; ++d) {
            if (yr[(int64_t)d * n + d] >= 0) continue;
            for (int c = 0; c < n; ++c) yr[(int64_t)d * n + c] = -yr[(int64_t)d * n + c];
            for (int r = 0; r < m; ++r) yq[(int64_t)r * k + d] = -yq[(int64_t)r * k + d];
        }
    }
    free(s);
}

/* packed (w, V): syevd('V', 'U') on A's bytes (A^T's upper = A's lower triangle) */
static void rlx_la_eigh_@X@(int64_t batch, int n, const @T@ *a, @T@ *y) {
    const int64_t nn = (int64_t)n * n;
    int lwork = -1, liwork = -1, info = 0, iq = 0;
    @T@ wq = 0;
    if (n > 0) @P@@X@syevd_("V", "U", &n, y, &n, y, &wq, &lwork, &iq, &liwork, &info, 1, 1);
    lwork = (int)wq > 1 ? (int)wq : 1;
    liwork = iq > 1 ? iq : 1;
    @T@ *s = (@T@ *)malloc((size_t)(nn + lwork + 1) * sizeof(@T@));
    int *iwork = (int *)malloc((size_t)liwork * sizeof(int));
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *yw = y + i * (n + nn), *yv = yw + n;
        if (!s || !iwork) { rlx_la_nan_@X@(yw, n + nn); continue; }
        if (n == 0) continue;
        memcpy(s, a + i * nn, (size_t)nn * sizeof(@T@));
        @P@@X@syevd_("V", "U", &n, s, &n, yw, s + nn, &lwork, iwork, &liwork, &info, 1, 1);
        if (info != 0) { rlx_la_nan_@X@(yw, n + nn); continue; }
        for (int c = 0; c < n; ++c) {
            const @T@ *col = s + (int64_t)c * n;  /* eigenvector c, contiguous */
            const @T@ f = rlx_la_sign_@X@(col, n, 1);
            for (int r = 0; r < n; ++r) yv[(int64_t)r * n + c] = f * col[r];
        }
    }
    free(s);
    free(iwork);
}

/* packed (U, S, Vt), reduced: gesdd('S') on A^T, whose V'^T and U' are row-major U and Vt */
static void rlx_la_svd_@X@(int64_t batch, int m, int n, const @T@ *a, @T@ *y) {
    const int k = m < n ? m : n;
    const int64_t mn = (int64_t)m * n, mk = (int64_t)m * k, kn = (int64_t)k * n;
    int lwork = -1, info = 0;
    int *iwork = (int *)malloc((size_t)(8 * k + 1) * sizeof(int));
    @T@ wq = 0;
    if (k > 0 && iwork)
        @P@@X@gesdd_("S", &n, &m, y, &n, y, y, &n, y, &k, &wq, &lwork, iwork, &info, 1);
    lwork = (int)wq > 1 ? (int)wq : 1;
    @T@ *s = (@T@ *)malloc((size_t)(mn + lwork + 1) * sizeof(@T@));
    for (int64_t i = 0; i < batch; ++i) {
        @T@ *yu = y + i * (mk + k + kn), *ys = yu + mk, *yvt = ys + k;
        if (!s || !iwork) { rlx_la_nan_@X@(yu, mk + k + kn); continue; }
        if (k == 0) continue;
        memcpy(s, a + i * mn, (size_t)mn * sizeof(@T@));
        @P@@X@gesdd_("S", &n, &m, s, &n, ys, yvt, &n, yu, &k, s + mn, &lwork, iwork, &info, 1);
        if (info != 0) { rlx_la_nan_@X@(yu, mk + k + kn); continue; }
        for (int c = 0; c < k; ++c) {
            if (rlx_la_sign_@X@(yu + c, m, k) > 0) continue;
            for (int r = 0; r < m; ++r) yu[(int64_t)r * k + c] = -yu[(int64_t)r * k + c];
            for (int j = 0; j < n; ++j) yvt[(int64_t)c * n + j] = -yvt[(int64_t)c * n + j];
        }
    }
    free(s);
    free(iwork);
}
"""


@cache
def source(prefix: str) -> str:
    """The LAPACK prototypes and kernels, f32 and f64, for symbols spelled ``prefix``."""
    parts = ["\n#ifndef RLX_LAPACK_H\n#define RLX_LAPACK_H\n#include <math.h>\n"
             "#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n"
             "/* LAPACK of the BLAS library (Fortran ABI), and rlx's row-major kernels on it */"]
    for ctype, letter in (("float", "s"), ("double", "d")):
        text = _PROTOTYPES + _KERNELS
        parts.append(text.replace("@T@", ctype).replace("@X@", letter).replace("@P@", prefix))
    parts.append("#endif\n")
    return "\n".join(parts)


def emit_linalg(env: KernelEnv, w: Writer, node: Node) -> str:
    """Write the call of ``node``'s kernel; returns its impl label (``lapack-<routine>``)."""
    a = env.inputs[node.inputs[0]]
    out = env.outputs[node.name]
    t = a.type
    if t.dtype.name not in DTYPES:
        raise RenderError(f"{node.op}: no LAPACK kernel for {t.dtype}")
    x = "s" if t.dtype.name == "f32" else "d"
    m, n = t.shape[-2:]
    batch = math.prod(t.shape[:-2])
    if max(m, n) >= 2**31 // max(min(m, n), 1):
        raise RenderError(f"{node.op}: a {m} x {n} matrix overflows LAPACK's 32-bit indices")
    op = node.op
    if op in ("solve", "triangular_solve"):
        b = env.inputs[node.inputs[1]]
        k = b.type.shape[-1]
        if op == "solve":
            w.line(f"rlx_la_solve_{x}({batch}, {n}, {k}, {a.ptr}, {b.ptr}, {out.ptr});")
            return f"{IMPL}-{x}getrf"
        flags = ", ".join(str(int(bool(node.attr(f)))) for f in
                          ("lower", "transpose_a", "unit_diagonal"))
        w.line(f"rlx_la_trsolve_{x}({batch}, {n}, {k}, {a.ptr}, {b.ptr}, {out.ptr}, {flags});")
        return f"{IMPL}-{x}trsm"
    calls = {
        "cholesky": (f"rlx_la_cholesky_{x}({batch}, {n}, {a.ptr}, {out.ptr});", "potrf"),
        "inv": (f"rlx_la_inv_{x}({batch}, {n}, {a.ptr}, {out.ptr});", "getri"),
        "det": (f"rlx_la_det_{x}({batch}, {n}, {a.ptr}, {out.ptr}, 0);", "getrf"),
        "slogdet": (f"rlx_la_det_{x}({batch}, {n}, {a.ptr}, {out.ptr}, 1);", "getrf"),
        "lu": (f"rlx_la_lu_{x}({batch}, {n}, {a.ptr}, {out.ptr});", "getrf"),
        "qr": (f"rlx_la_qr_{x}({batch}, {m}, {n}, {a.ptr}, {out.ptr});", "geqrf"),
        "eigh": (f"rlx_la_eigh_{x}({batch}, {n}, {a.ptr}, {out.ptr});", "syevd"),
        "svd": (f"rlx_la_svd_{x}({batch}, {m}, {n}, {a.ptr}, {out.ptr});", "gesdd"),
    }
    call, routine = calls[op]
    w.line(call)
    return f"{IMPL}-{x}{routine}"
