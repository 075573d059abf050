"""The CPU's sparse kernels: CSR SpMV / SpMM / SDDMM loops and the Krylov solvers, in C.

- spmv, spmm, sddmm (``transpose=False``) run over row chunks of equal stored entries that
  the team's threads claim one at a time (team mode, ``_claimed_rows``; else one worksharing
  loop over rows), each row's dot products accumulated in double.
- spmv/spmm with ``transpose=True`` (A^T x, the VJP's) scatter into the result; they run on
  one thread (a ``single`` block), since two rows may add to the same entry.
- krylov_solve runs the whole solver in one kernel that every thread of the team enters
  (``/* team block */``): thread t owns a block of rows holding about nnz / team stored
  entries, vectors are updated row block by row block, and each dot product is a partial
  sum per thread, published at a spin barrier (the solver's own, ``rlx_work_sync``) and added up in
  thread order by every thread, so all threads take the same branch and the result does not
  depend on timing (for a given team size; another team size adds in another order). No iteration returns to Python, or even to the entry point.

The algorithms, step for step, are the reference's (numpy_ref/sparse_semantics.py).
"""

from __future__ import annotations

import re

from rlx_core.ir.graph import Node
from rlx_core.ir.ops.sparse import KRYLOV_METHODS, SPARSE_DTYPES, SPARSE_OPS
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu.team import FOR_PRAGMA, TEAM_BLOCK
from rlx_core.targets.cpu.team_runtime import WORK_SYNC_C

IMPL = "rlx-csr"
DTYPES = SPARSE_DTYPES
OPS = SPARSE_OPS

_COMMON = WORK_SYNC_C + r"""
#ifndef RLX_SPARSE_H
#define RLX_SPARSE_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
/* shared by the threads of one solver call (one program call runs at a time) */
static void *rlx_kr_mem = 0;

/* the first row whose entries start at or after the nnz * part / parts-th stored entry */
static int rlx_kr_cut(const int *ip, int n, int part, int parts) {
    const int64_t target = (int64_t)ip[n] * part / parts;
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (ip[mid] < target) lo = mid + 1; else hi = mid;
    }
    return part == parts ? n : lo;
}

/* sum count partial values over the team, in thread order; gen alternates two buffers */
static void rlx_kr_reduce(double *part, int tid, int team, double *v, int count, int *gen) {
    double *buf = part + (int64_t)(*gen & 1) * team * 8;
    for (int i = 0; i < count; ++i) buf[tid * 8 + i] = v[i];
    rlx_work_sync(team);
    for (int i = 0; i < count; ++i) {
        double s = 0;
        for (int t = 0; t < team; ++t) s += buf[t * 8 + i];
        v[i] = s;
    }
    ++*gen;
}
#endif
"""

# per element type (@T@ float or double, @X@ s or d)
_KERNELS = r"""
/*@ csr_row @*/
/* row r of A times x, accumulated in double: the one product every kernel and solver uses */
static inline double rlx_csr_row_@X@(const int *ip, const int *ix, const @T@ *v, const @T@ *x,
                                     int r) {
    double acc = 0;
    for (int e = ip[r]; e < ip[r + 1]; ++e) acc += (double)v[e] * x[ix[e]];
    return acc;
}

/*@ kr_matvec @*/
/* y = A x on rows [r0, r1), fused with the partial dot product w . y over them (the solvers'
   p . Ap, rh . v): summed in row order, then over the team by rlx_kr_reduce */
static double rlx_kr_matvec_@X@(const int *ip, const int *ix, const @T@ *v, const @T@ *x,
                                @T@ *y, const @T@ *w, int r0, int r1) {
    double d = 0;
    for (int i = r0; i < r1; ++i) {
        y[i] = (@T@)rlx_csr_row_@X@(ip, ix, v, x, i);
        d += (double)w[i] * y[i];
    }
    return d;
}

/*@ spmm @*/
static void rlx_spmm_@X@(int rows, int k, const int *ip, const int *ix, const @T@ *v,
                         const @T@ *x, @T@ *y, int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
        @T@ *yr = y + (int64_t)r * k;
        if (k == 1) {
            yr[0] = (@T@)rlx_csr_row_@X@(ip, ix, v, x, r);
            continue;
        }
        for (int j = 0; j < k; ++j) yr[j] = 0;
        for (int e = ip[r]; e < ip[r + 1]; ++e) {
            const @T@ ve = v[e];
            const @T@ *xr = x + (int64_t)ix[e] * k;
            for (int j = 0; j < k; ++j) yr[j] += ve * xr[j];
        }
    }
    (void)rows;
}

/*@ rows_claim @*/
/* the first row at or after the nnz * part / parts-th stored entry, rounded up to a multiple of
   8 rows: chunks then split the stored entries evenly (not the rows) and, for k = 1 in f64,
   never share a 64-byte line of y */
static int rlx_sp_cut8(const int *ip, int n, int part, int parts) {
    if (part >= parts) return n;
    const int r = rlx_kr_cut(ip, n, part, parts);
    return r + 7 < n ? (r + 7) / 8 * 8 : n;
}

/* spmm (sddmm with sd = 1) on `chunks` row chunks claimed one at a time from *work (thread 0
   alone without a team: work = 0): a thread the OS stalls holds up at most one chunk, and the
   others take the rest. Returns the first chunk this thread claimed (chunks: none was left). */
static int rlx_sp_rows_@X@(int sd, int rows, int k, const int *ip, const int *ix,
                          const @T@ *a, const @T@ *b, @T@ *y, int chunks, atomic_llong *work) {
    int got = 0, first = chunks;
    for (int c; (c = work ? rlx_team_claim(work) : got) < chunks; ++got) {
        if (!got) first = c;
        const int r0 = rlx_sp_cut8(ip, rows, c, chunks), r1 = rlx_sp_cut8(ip, rows, c + 1, chunks);
        if (sd) rlx_sddmm_@X@(k, ip, ix, a, b, y, r0, r1);
        else rlx_spmm_@X@(rows, k, ip, ix, a, b, y, r0, r1);
    }
    return first;
}

/*@ spmm_t @*/
/* y (cols x k) = A^T x: a scatter, on one thread */
static void rlx_spmm_t_@X@(int rows, int cols, int k, const int *ip, const int *ix,
                           const @T@ *v, const @T@ *x, @T@ *y) {
    memset(y, 0, (size_t)cols * k * sizeof(@T@));
    for (int r = 0; r < rows; ++r)
        for (int e = ip[r]; e < ip[r + 1]; ++e) {
            const @T@ ve = v[e];
            @T@ *yc = y + (int64_t)ix[e] * k;
            const @T@ *xr = x + (int64_t)r * k;
            for (int j = 0; j < k; ++j) yc[j] += ve * xr[j];
        }
}

/*@ sddmm @*/
static void rlx_sddmm_@X@(int k, const int *ip, const int *ix, const @T@ *a, const @T@ *b,
                          @T@ *out, int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
        const @T@ *ar = a + (int64_t)r * k;
        for (int e = ip[r]; e < ip[r + 1]; ++e) {
            const @T@ *bc = b + (int64_t)ix[e] * k;
            double acc = 0;
            for (int j = 0; j < k; ++j) acc += (double)ar[j] * bc[j];
            out[e] = (@T@)acc;
        }
    }
}

/*@ kr_dinv @*/
/* 1 / diag(A) on rows [r0, r1) (a zero diagonal counts as 1), or ones */
static void rlx_kr_dinv_@X@(const int *ip, const int *ix, const @T@ *v, @T@ *dinv, int jacobi,
                            int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
        double d = 0;
        if (jacobi)
            for (int e = ip[r]; e < ip[r + 1]; ++e) if (ix[e] == r) d += v[e];
        dinv[r] = (@T@)(d != 0 ? 1.0 / d : 1.0);
    }
}

/*@ kr_alloc @*/
/* the team's shared block (rlx_kr_mem): part (2 x team x 8 doubles), then nvec vectors of n,
   the first of which is returned, then `own` zeroed doubles for each thread (rlx_kr_own_@X@).
   One allocation for the whole team, so every thread takes the same path: when it is out of
   memory, thread 0 sets x (n values, then the iteration count and the residual) to NaN and 0
   is returned to all (a thread whose own allocation failed alone would have left the others
   waiting at a barrier it never reaches) */
static size_t rlx_kr_vec_bytes_@X@(int n, int nvec) {
    return (sizeof(@T@) * (size_t)n * nvec + 63) / 64 * 64;
}

static @T@ *rlx_kr_alloc_@X@(int tid, int team, int n, int nvec, size_t own, @T@ *x) {
    if (tid == 0)
        rlx_kr_mem = malloc(sizeof(double) * 16 * (size_t)team + rlx_kr_vec_bytes_@X@(n, nvec)
                            + sizeof(double) * own * (size_t)team + 64);
    rlx_work_sync(team);
    if (rlx_kr_mem) return (@T@ *)((double *)rlx_kr_mem + 16 * team);
    if (tid == 0) for (int i = 0; i < n + 2; ++i) x[i] = (@T@)NAN;
    return 0;
}

/* this thread's `own` doubles of the block rlx_kr_alloc_@X@ returned as vs, zeroed */
static double *rlx_kr_own_@X@(@T@ *vs, int tid, int n, int nvec, size_t own) {
    double *mine = (double *)((char *)vs + rlx_kr_vec_bytes_@X@(n, nvec)) + own * (size_t)tid;
    memset(mine, 0, sizeof(double) * own);
    return mine;
}

/*@ kr_done @*/
static void rlx_kr_done_@X@(int tid, int team, int n, @T@ *out, int it, double rel) {
    rlx_work_sync(team);
    if (tid == 0) {
        out[n] = (@T@)it;
        out[n + 1] = (@T@)rel;
        free(rlx_kr_mem);
        rlx_kr_mem = 0;
    }
}

/*@ cg @*/
static void rlx_cg_@X@(int n, const int *ip, const int *ix, const @T@ *v, const @T@ *b,
                       @T@ *x, int jacobi, double tol, int maxiter) {
    const int tid = rlx_work_tid(), team = rlx_work_team();
    @T@ *r = rlx_kr_alloc_@X@(tid, team, n, 4, 0, x);
    if (!r) return;
    double *part = (double *)rlx_kr_mem;
    @T@ *p = r + n, *q = p + n, *dinv = q + n;
    const int r0 = rlx_kr_cut(ip, n, tid, team), r1 = rlx_kr_cut(ip, n, tid + 1, team);
    int gen = 0, it = 0;
    double s[2] = {0, 0};
    rlx_kr_dinv_@X@(ip, ix, v, dinv, jacobi, r0, r1);
    for (int i = r0; i < r1; ++i) {
        x[i] = 0;
        r[i] = b[i];
        p[i] = dinv[i] * r[i];
        s[0] += (double)r[i] * p[i];
        s[1] += (double)b[i] * b[i];
    }
    rlx_kr_reduce(part, tid, team, s, 2, &gen);
    double rz = s[0];
    const double bnorm = sqrt(s[1]);
    double rnorm = bnorm;
    if (bnorm == 0) { rlx_kr_done_@X@(tid, team, n, x, 0, 0.0); return; }
    while (it < maxiter) {
        ++it;
        double pq = rlx_kr_matvec_@X@(ip, ix, v, p, q, p, r0, r1);
        rlx_kr_reduce(part, tid, team, &pq, 1, &gen);
        if (pq == 0) break;
        const double alpha = rz / pq;
        double t0 = 0, t1 = 0;
        /* x, r, p, q, dinv never overlap: vectorise, the sums in lanes (omp simd) */
        #pragma omp simd reduction(+:t0, t1)
        for (int i = r0; i < r1; ++i) {
            x[i] += (@T@)(alpha * p[i]);
            r[i] -= (@T@)(alpha * q[i]);
            t0 += (double)r[i] * r[i];
            t1 += (double)r[i] * (dinv[i] * r[i]);
        }
        double t[2] = {t0, t1};
        rlx_kr_reduce(part, tid, team, t, 2, &gen);
        rnorm = sqrt(t[0]);
        if (rnorm <= tol * bnorm) break;
        const double beta = t[1] / rz;
        rz = t[1];
        #pragma omp simd
        for (int i = r0; i < r1; ++i) p[i] = (@T@)(dinv[i] * r[i] + beta * p[i]);
        rlx_work_sync(team);
    }
    rlx_kr_done_@X@(tid, team, n, x, it, rnorm / bnorm);
}

/*@ kr_ic0 @*/
/* IC(0): L with tril(A)'s pattern (duplicates summed, columns sorted, the diagonal last and
   added if missing), A ~ L L^T, row by row; a pivot <= 0 becomes sqrt(|a_ii|) (1 if a_ii is
   0). *lp, *lj, *lx are malloc'ed (0 when out of memory). One thread. */
static void rlx_kr_ic0_@X@(int n, const int *ip, const int *ix, const @T@ *v, int **lp_out,
                           int **lj_out, double **lx_out) {
    int64_t cnt = n;
    for (int r = 0; r < n; ++r)
        for (int e = ip[r]; e < ip[r + 1]; ++e) cnt += ix[e] <= r;
    int *lp = (int *)malloc(sizeof(int) * (size_t)(n + 1));
    int *lj = (int *)malloc(sizeof(int) * (size_t)cnt);
    double *lx = (double *)malloc(sizeof(double) * (size_t)cnt);
    *lp_out = lp; *lj_out = lj; *lx_out = lx;
    if (!lp || !lj || !lx) return;
    int at = 0;
    lp[0] = 0;
    for (int r = 0; r < n; ++r) {
        const int start = at;
        for (int e = ip[r]; e < ip[r + 1]; ++e) {
            const int c = ix[e];
            if (c > r) continue;
            int pos = start;
            while (pos < at && lj[pos] < c) ++pos;
            if (pos < at && lj[pos] == c) { lx[pos] += v[e]; continue; }
            for (int q = at; q > pos; --q) { lj[q] = lj[q - 1]; lx[q] = lx[q - 1]; }
            lj[pos] = c;
            lx[pos] = v[e];
            ++at;
        }
        if (at == start || lj[at - 1] != r) { lj[at] = r; lx[at] = 0; ++at; }
        lp[r + 1] = at;
    }
    for (int i = 0; i < n; ++i) {
        const int di = lp[i + 1] - 1;
        for (int a = lp[i]; a < di; ++a) {
            const int k = lj[a], ek = lp[k + 1] - 1;
            double s = lx[a];
            int p1 = lp[i], p2 = lp[k];
            while (p1 < a && p2 < ek) {
                if (lj[p1] == lj[p2]) s -= lx[p1++] * lx[p2++];
                else if (lj[p1] < lj[p2]) ++p1;
                else ++p2;
            }
            lx[a] = s / lx[ek];
        }
        const double aii = lx[di];
        double d = aii;
        for (int a = lp[i]; a < di; ++a) d -= lx[a] * lx[a];
        lx[di] = d > 0 ? sqrt(d) : (aii != 0 ? sqrt(fabs(aii)) : 1.0);
    }
}

/* z = (L L^T)^-1 r (forward, then backward substitution); returns r . z. One thread. */
static double rlx_kr_ic0_apply_@X@(int n, const int *lp, const int *lj, const double *lx,
                                   const @T@ *r, @T@ *z) {
    for (int i = 0; i < n; ++i) {
        double s = r[i];
        for (int a = lp[i]; a < lp[i + 1] - 1; ++a) s -= lx[a] * z[lj[a]];
        z[i] = (@T@)(s / lx[lp[i + 1] - 1]);
    }
    for (int i = n - 1; i >= 0; --i) {
        const double zi = z[i] / lx[lp[i + 1] - 1];
        z[i] = (@T@)zi;
        for (int a = lp[i]; a < lp[i + 1] - 1; ++a) z[lj[a]] = (@T@)(z[lj[a]] - lx[a] * zi);
    }
    double rz = 0;
    for (int i = 0; i < n; ++i) rz += (double)r[i] * z[i];
    return rz;
}

/*@ cg_ic0 @*/
/* CG preconditioned with IC(0): as rlx_cg, with z = M^-1 r computed by thread 0 (the two
   triangular solves are sequential) between two barriers */
static void rlx_cg_ic0_@X@(int n, const int *ip, const int *ix, const @T@ *v, const @T@ *b,
                           @T@ *x, double tol, int maxiter) {
    const int tid = rlx_work_tid(), team = rlx_work_team();
    static int *lp, *lj;
    static double *lx;
    @T@ *r = rlx_kr_alloc_@X@(tid, team, n, 4, 0, x);
    if (!r) return;
    double *part = (double *)rlx_kr_mem;
    @T@ *p = r + n, *q = p + n, *z = q + n;
    const int r0 = rlx_kr_cut(ip, n, tid, team), r1 = rlx_kr_cut(ip, n, tid + 1, team);
    int gen = 0, it = 0;
    double s[2] = {0, 0};
    for (int i = r0; i < r1; ++i) {
        x[i] = 0;
        r[i] = b[i];
        s[1] += (double)b[i] * b[i];
    }
    rlx_kr_reduce(part, tid, team, s, 2, &gen);
    const double bnorm = sqrt(s[1]);
    double rnorm = bnorm;
    if (tid == 0) {
        rlx_kr_ic0_@X@(n, ip, ix, v, &lp, &lj, &lx);
        part[16 * team - 1] = (lp && lj && lx) ? rlx_kr_ic0_apply_@X@(n, lp, lj, lx, r, z) : NAN;
    }
    rlx_work_sync(team);
    double rz = part[16 * team - 1];
    int failed = rz != rz;
    if (bnorm == 0 || failed) {
        if (failed && tid == 0) for (int i = 0; i < n; ++i) x[i] = (@T@)NAN;
        goto done;
    }
    for (int i = r0; i < r1; ++i) p[i] = z[i];
    rlx_work_sync(team);
    while (it < maxiter) {
        ++it;
        double pq = rlx_kr_matvec_@X@(ip, ix, v, p, q, p, r0, r1);
        rlx_kr_reduce(part, tid, team, &pq, 1, &gen);
        if (pq == 0) break;
        const double alpha = rz / pq;
        double t = 0;
        for (int i = r0; i < r1; ++i) {
            x[i] += (@T@)(alpha * p[i]);
            r[i] -= (@T@)(alpha * q[i]);
            t += (double)r[i] * r[i];
        }
        rlx_kr_reduce(part, tid, team, &t, 1, &gen);
        rnorm = sqrt(t);
        if (rnorm <= tol * bnorm) break;
        if (tid == 0) part[16 * team - 1] = rlx_kr_ic0_apply_@X@(n, lp, lj, lx, r, z);
        rlx_work_sync(team);
        const double rz_new = part[16 * team - 1];
        rlx_work_sync(team);  /* everyone has read it before thread 0 writes the next one */
        const double beta = rz_new / rz;
        rz = rz_new;
        for (int i = r0; i < r1; ++i) p[i] = (@T@)(z[i] + beta * p[i]);
        rlx_work_sync(team);
    }
done:
    if (tid == 0) { free(lp); free(lj); free(lx); lp = 0; lj = 0; lx = 0; }
    rlx_kr_done_@X@(tid, team, n, x, it, bnorm == 0 ? 0.0 : rnorm / bnorm);
}

/*@ bicgstab @*/
static void rlx_bicgstab_@X@(int n, const int *ip, const int *ix, const @T@ *v, const @T@ *b,
                             @T@ *x, int jacobi, double tol, int maxiter) {
    const int tid = rlx_work_tid(), team = rlx_work_team();
    @T@ *r = rlx_kr_alloc_@X@(tid, team, n, 9, 0, x);
    if (!r) return;
    double *part = (double *)rlx_kr_mem;
    @T@ *rh = r + n, *p = rh + n, *vv = p + n, *ph = vv + n, *s = ph + n, *sh = s + n,
        *t = sh + n, *dinv = t + n;
    const int r0 = rlx_kr_cut(ip, n, tid, team), r1 = rlx_kr_cut(ip, n, tid + 1, team);
    int gen = 0, it = 0;
    double acc2[2] = {0, 0};
    rlx_kr_dinv_@X@(ip, ix, v, dinv, jacobi, r0, r1);
    for (int i = r0; i < r1; ++i) {
        x[i] = 0;
        r[i] = rh[i] = b[i];
        p[i] = vv[i] = 0;
        acc2[0] += (double)b[i] * b[i];
    }
    rlx_kr_reduce(part, tid, team, acc2, 1, &gen);
    const double bnorm = sqrt(acc2[0]);
    double rnorm = bnorm, rho = 1, alpha = 1, omega = 1, rho_new = acc2[0];  /* rh . r = b . b */
    if (bnorm == 0) { rlx_kr_done_@X@(tid, team, n, x, 0, 0.0); return; }
    while (it < maxiter) {
        ++it;
        if (rho_new == 0) break;
        const double beta = (rho_new / rho) * (alpha / omega);
        for (int i = r0; i < r1; ++i) {
            p[i] = (@T@)(r[i] + beta * (p[i] - omega * vv[i]));
            ph[i] = dinv[i] * p[i];
        }
        rlx_work_sync(team);
        double rv = rlx_kr_matvec_@X@(ip, ix, v, ph, vv, rh, r0, r1);
        rlx_kr_reduce(part, tid, team, &rv, 1, &gen);
        if (rv == 0) break;
        alpha = rho_new / rv;
        double sn = 0;
        for (int i = r0; i < r1; ++i) {
            s[i] = (@T@)(r[i] - alpha * vv[i]);
            sh[i] = dinv[i] * s[i];
            sn += (double)s[i] * s[i];
        }
        rlx_kr_reduce(part, tid, team, &sn, 1, &gen);
        if (sqrt(sn) <= tol * bnorm) {
            for (int i = r0; i < r1; ++i) x[i] += (@T@)(alpha * ph[i]);
            rnorm = sqrt(sn);
            break;
        }
        double ts[2] = {0, 0};
        for (int i = r0; i < r1; ++i) {
            t[i] = (@T@)rlx_csr_row_@X@(ip, ix, v, sh, i);
            ts[0] += (double)t[i] * t[i];
            ts[1] += (double)t[i] * s[i];
        }
        rlx_kr_reduce(part, tid, team, ts, 2, &gen);
        omega = ts[0] != 0 ? ts[1] / ts[0] : 0.0;
        double rr[2] = {0, 0};
        for (int i = r0; i < r1; ++i) {
            x[i] += (@T@)(alpha * ph[i] + omega * sh[i]);
            r[i] = (@T@)(s[i] - omega * t[i]);
            rr[0] += (double)r[i] * r[i];
            rr[1] += (double)rh[i] * r[i];
        }
        rlx_kr_reduce(part, tid, team, rr, 2, &gen);
        rnorm = sqrt(rr[0]);
        rho = rho_new;
        rho_new = rr[1];
        if (rnorm <= tol * bnorm || omega == 0) break;
    }
    rlx_kr_done_@X@(tid, team, n, x, it, rnorm / bnorm);
}

/*@ gmres @*/
static void rlx_gmres_@X@(int n, const int *ip, const int *ix, const @T@ *v, const @T@ *b,
                          @T@ *x, int jacobi, double tol, int maxiter, int restart) {
    const int tid = rlx_work_tid(), team = rlx_work_team();
    const int m = restart;
    /* per thread, the same small dense state (every thread computes identical values) */
    const size_t own = (size_t)(m + 1) * m + 4 * (size_t)(m + 1);
    @T@ *vs = rlx_kr_alloc_@X@(tid, team, n, m + 5, own, x);
    if (!vs) return;
    double *h = rlx_kr_own_@X@(vs, tid, n, m + 5, own);
    double *cs = h + (size_t)(m + 1) * m, *sn = cs + m + 1, *g = sn + m + 1, *y = g + m + 1;
    double *part = (double *)rlx_kr_mem;
    @T@ *w = vs + (int64_t)(m + 1) * n, *u = w + n, *tmp = u + n, *dinv = tmp + n;
    const int r0 = rlx_kr_cut(ip, n, tid, team), r1 = rlx_kr_cut(ip, n, tid + 1, team);
    int gen = 0, total = 0;
    double bb = 0;
    rlx_kr_dinv_@X@(ip, ix, v, dinv, jacobi, r0, r1);
    for (int i = r0; i < r1; ++i) { u[i] = 0; bb += (double)b[i] * b[i]; }
    rlx_kr_reduce(part, tid, team, &bb, 1, &gen);
    const double bnorm = sqrt(bb);
    double resid = bnorm;
    if (bnorm == 0) {
        for (int i = r0; i < r1; ++i) x[i] = 0;
        rlx_kr_done_@X@(tid, team, n, x, 0, 0.0);
        return;
    }
    while (total < maxiter) {
        double beta = 0;
        if (total) {
            for (int i = r0; i < r1; ++i) tmp[i] = dinv[i] * u[i];
            rlx_work_sync(team);
            for (int i = r0; i < r1; ++i) {
                vs[i] = (@T@)(b[i] - rlx_csr_row_@X@(ip, ix, v, tmp, i));
                beta += (double)vs[i] * vs[i];
            }
        } else {
            for (int i = r0; i < r1; ++i) { vs[i] = b[i]; beta += (double)b[i] * b[i]; }
        }
        rlx_kr_reduce(part, tid, team, &beta, 1, &gen);
        beta = sqrt(beta);
        resid = beta;
        if (beta <= tol * bnorm) break;
        for (int i = r0; i < r1; ++i) vs[i] = (@T@)(vs[i] / beta);
        for (int i = 0; i <= m; ++i) g[i] = 0;
        g[0] = beta;
        int k = 0, broke = 0;
        for (int j = 0; j < m; ++j) {
            ++total;
            const @T@ *vj = vs + (int64_t)j * n;
            for (int i = r0; i < r1; ++i) tmp[i] = dinv[i] * vj[i];
            rlx_work_sync(team);
            for (int i = r0; i < r1; ++i) w[i] = (@T@)rlx_csr_row_@X@(ip, ix, v, tmp, i);
            for (int i = 0; i <= j; ++i) {  /* modified Gram-Schmidt */
                const @T@ *vi = vs + (int64_t)i * n;
                double d = 0;
                for (int l = r0; l < r1; ++l) d += (double)w[l] * vi[l];
                rlx_kr_reduce(part, tid, team, &d, 1, &gen);
                h[(int64_t)i * m + j] = d;
                for (int l = r0; l < r1; ++l) w[l] = (@T@)(w[l] - d * vi[l]);
            }
            double hn = 0;
            for (int l = r0; l < r1; ++l) hn += (double)w[l] * w[l];
            rlx_kr_reduce(part, tid, team, &hn, 1, &gen);
            hn = sqrt(hn);
            h[(int64_t)(j + 1) * m + j] = hn;
            if (hn != 0) {
                @T@ *vn = vs + (int64_t)(j + 1) * n;
                for (int l = r0; l < r1; ++l) vn[l] = (@T@)(w[l] / hn);
            }
            for (int i = 0; i < j; ++i) {  /* the earlier rotations, on the new column */
                const double a = h[(int64_t)i * m + j], c = h[(int64_t)(i + 1) * m + j];
                h[(int64_t)i * m + j] = cs[i] * a + sn[i] * c;
                h[(int64_t)(i + 1) * m + j] = -sn[i] * a + cs[i] * c;
            }
            const double hjj = h[(int64_t)j * m + j], hj1 = h[(int64_t)(j + 1) * m + j];
            const double d = hypot(hjj, hj1);
            cs[j] = d != 0 ? hjj / d : 1.0;
            sn[j] = d != 0 ? hj1 / d : 0.0;
            h[(int64_t)j * m + j] = d;
            h[(int64_t)(j + 1) * m + j] = 0;
            g[j + 1] = -sn[j] * g[j];
            g[j] = cs[j] * g[j];
            resid = fabs(g[j + 1]);
            k = j + 1;
            if (resid <= tol * bnorm || total >= maxiter || hn == 0) { broke = hn == 0; break; }
        }
        for (int i = k - 1; i >= 0; --i) {  /* back substitution */
            double acc = g[i];
            for (int l = i + 1; l < k; ++l) acc -= h[(int64_t)i * m + l] * y[l];
            y[i] = h[(int64_t)i * m + i] != 0 ? acc / h[(int64_t)i * m + i] : 0.0;
        }
        for (int l = r0; l < r1; ++l) {
            double acc = u[l];
            for (int i = 0; i < k; ++i) acc += y[i] * vs[(int64_t)i * n + l];
            u[l] = (@T@)acc;
        }
        if (resid <= tol * bnorm || broke) break;
    }
    for (int i = r0; i < r1; ++i) x[i] = dinv[i] * u[i];
    rlx_kr_done_@X@(tid, team, n, x, total, resid / bnorm);
}
"""


def _chunks() -> dict[str, str]:
    """The kernel functions by name (``spmm``, ``cg``, ...), with @T@/@X@ placeholders."""
    pieces = re.split(r"/\*@ (\w+) @\*/\n", _KERNELS)
    return dict(zip(pieces[1::2], pieces[2::2], strict=True))


CHUNKS = _chunks()
# what each entry point calls besides itself
_SOLVER = ("csr_row", "kr_matvec", "kr_alloc", "kr_done")
NEEDS = {"spmm": ("csr_row",), "rows_claim": ("csr_row", "spmm", "sddmm"), "cg": ("kr_dinv", *_SOLVER), "bicgstab": ("kr_dinv", *_SOLVER),
         "gmres": ("kr_dinv", "csr_row", "kr_alloc", "kr_done"), "cg_ic0": (*_SOLVER, "kr_ic0")}


def source(names: tuple[str, ...], letter: str) -> str:
    """File-scope C for the named functions in one element type (``s`` float, ``d`` double),
    each under an include guard, so kernels of one program can each ask for what they use
    (only those are compiled: the solvers cost seconds of compile time each)."""
    ctype = {"s": "float", "d": "double"}[letter]
    out = [_COMMON]
    for name in names:
        for part in (*NEEDS.get(name, ()), name):
            guard = f"RLX_SP_{part.upper()}_{letter.upper()}"
            body = CHUNKS[part].replace("@T@", ctype).replace("@X@", letter)
            out.append(f"#ifndef {guard}\n#define {guard}\n{body.rstrip()}\n#endif\n")
    return "".join(out)


# stored entries (times k) per claimed chunk of rows, and the bounds on the chunk count: about
# 25 us of SpMV a chunk here, and at least 8 so that a worker finding none left means it came
# late (see _claimed_rows)
CHUNK_WORK = 16384
MIN_CHUNKS, MAX_CHUNKS = 8, 64


def emit_sparse(env: KernelEnv, w: Writer, node: Node, counter: str = "") -> str:
    """Write ``node``'s kernel body; returns its impl label. ``counter`` is the C expression of
    the kernel's claim counter in team mode (team_runtime.rlx_team_claim's), else empty."""
    ip, ix = (env.inputs[v].ptr for v in node.inputs[:2])
    third, fourth = (env.inputs[v] for v in node.inputs[2:4])
    out = env.outputs[node.name]
    dtype = out.type.dtype.name
    if dtype not in DTYPES:
        raise RenderError(f"{node.op}: no CSR kernel for {dtype}")
    x = "s" if dtype == "f32" else "d"
    rows, cols = node.attr("shape")
    nnz = env.inputs[node.inputs[1]].type.shape[0]
    if node.op == "krylov_solve":
        method = node.attr("method")
        if method not in KRYLOV_METHODS:
            raise RenderError(f"krylov_solve: unknown method {method!r}")
        precond = node.attr("precond")
        fn = "cg_ic0" if precond == "ic0" else method
        env.preamble.append(source((fn,), x))
        jacobi = "" if precond == "ic0" else f"{int(precond == 'jacobi')}, "
        args = (f"{rows}, {ip}, {ix}, {third.ptr}, {fourth.ptr}, {out.ptr}, {jacobi}"
                f"{float(node.attr('tol'))!r}, {int(node.attr('maxiter'))}")
        if method == "gmres":
            args += f", {int(node.attr('restart'))}"
        # asked for its side effect: a matrix big enough to share makes the program open
        # its team region (else it runs on the calling thread and the block on one thread);
        # the block runs on every thread of the region, so the pragma itself is not used
        env.parallel(nnz, 0)
        w.line(TEAM_BLOCK)
        w.line(f"    rlx_{fn}_{x}({args});")
        w.line("}")
        return f"{IMPL}-{fn}"
    k = third.type.shape[1] if node.op == "sddmm" else 1 if node.op == "spmv" else \
        fourth.type.shape[1]
    transposed = node.op != "sddmm" and bool(node.attr("transpose"))
    env.preamble.append(source(("sddmm" if node.op == "sddmm" else
                                "spmm_t" if transposed else "spmm",), x))
    if transposed:
        pragma = env.parallel(1, 0)  # one thread: the rows scatter into shared entries
        if pragma:
            w.line(pragma)
        w.open("for (int once = 0; once < 1; ++once)")
        w.line(f"rlx_spmm_t_{x}({rows}, {cols}, {k}, {ip}, {ix}, {third.ptr}, {fourth.ptr}, "
               f"{out.ptr});")
        w.close()
        return f"{IMPL}-scatter"
    pragma = env.parallel(max(nnz * k, rows), 0)
    if counter and pragma == FOR_PRAGMA:
        return _claimed_rows(env, w, node, x, k, counter)
    if pragma:
        w.line(pragma)
    w.open(f"for (int r = 0; r < {rows}; ++r)")
    if node.op == "sddmm":
        w.line(f"rlx_sddmm_{x}({k}, {ip}, {ix}, {third.ptr}, {fourth.ptr}, {out.ptr}, r, r + 1);")
    else:
        w.line(f"rlx_spmm_{x}({rows}, {k}, {ip}, {ix}, {third.ptr}, {fourth.ptr}, {out.ptr}, "
               "r, r + 1);")
    w.close()
    return f"{IMPL}-rows"


def _claimed_rows(env: KernelEnv, w: Writer, node: Node, x: str, k: int, counter: str) -> str:
    """spmv/spmm/sddmm over the team as row chunks of equal stored entries, claimed one at a
    time (rlx_sp_rows), instead of ``omp for``'s equal row counts.

    A static split made every call wait for the slower thread's whole half: on this shared
    2-core VM the worker, woken at the region's start, often waits for a core, and the
    2-thread SpMV of a 0.8M-entry Poisson matrix took 5-7x its 1-thread time. With claims the
    calling thread takes the chunks a late worker has not. A worker whose first claim is past
    half the chunks (or finds none left) arrived after the calling thread had done half the
    product alone: that counts as the team's late arrival (team_runtime.BARRIER_C), so a program that
    keeps seeing it runs its next calls on one thread, as programs with team barriers do (one
    kernel alone has no barrier to notice it at). On time, the worker's first claim is chunk 1.
    """
    ip, ix = (env.inputs[v].ptr for v in node.inputs[:2])
    third, fourth = (env.inputs[v] for v in node.inputs[2:4])
    out = env.outputs[node.name]
    rows = node.attr("shape")[0]
    nnz = env.inputs[node.inputs[1]].type.shape[0]
    chunks = max(MIN_CHUNKS, min(MAX_CHUNKS, nnz * k // CHUNK_WORK))
    sd = int(node.op == "sddmm")
    env.preamble.append(source(("rows_claim",), x))
    claim = f"{out.ptr}_claim"  # the counter comes in as an argument, as blas.emit_gemm's
    env.extra_args.append((f"atomic_llong* {claim}", counter))
    w.line(TEAM_BLOCK)
    w.line(f"    const int first = rlx_sp_rows_{x}({sd}, {rows}, {k}, {ip}, {ix}, {third.ptr}, "
           f"{fourth.ptr}, {out.ptr}, {chunks}, {claim});")
    w.line(f"    if (first >= {chunks // 2} && rlx_work_tid() > 0)")
    w.line("        atomic_fetch_add_explicit(&rlx_team_late, 1, memory_order_relaxed);")
    w.line("}")
    return f"{IMPL}-claimed"
