"""The CPU's weight-only int4 matmul: HIR ``int4_linear`` kept whole, dequantizing in the kernel.

The packed weight (out, in/2 bytes, one f32 scale and optionally an i8 zero per group) is
never materialised as an f32 matrix in memory: each work item (a block of rows of x, a block
of output columns) unpacks one weight row at a time into a thread-local K-float buffer (in
L1/L2) and takes its dot product with every row of x in the block, accumulating in f32. So
a weight costs half a byte per element in memory traffic instead of four: at batch 1 (LLM
decode, one sentence) the matmul is bound by that traffic.
"""

from __future__ import annotations

import math

from rlx_core.ir.graph import Node
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import scratch
from rlx_core.targets.cpu.igemm import open_block_loop

IMPL = "rlx-i4gemm"
DTYPES: tuple[str, ...] = ("f32", "u8", "i8")
ROW_BLOCK = 64
COL_BLOCK = 16

SOURCE = scratch.SOURCE + r"""
#ifndef RLX_I4GEMM_H
#define RLX_I4GEMM_H
#include <stdint.h>
#include <stdlib.h>
RLX_SCRATCH(rlx_i4_scratch, float)  /* one row of W unpacked */

/* weight element p of row j: its code (low nibble first; signed, or minus the group's zero)
   times the group's scale */
static inline float rlx_i4_w(const uint8_t *pj, int64_t p, int64_t g, const float *sj,
                             const int8_t *zj) {
    const int c = (p & 1) ? pj[p / 2] >> 4 : pj[p / 2] & 15;
    const float q = zj ? (float)(c - zj[p / g]) : (float)(c >= 8 ? c - 16 : c);
    return q * sj[p / g];
}

/* rows [i0, i1) x columns [j0, j1) of Y (m x n) = X (m x k) W^T, W's row j unpacked from
   packed[j] (k/2 bytes) with scale[j, b] (and zero[j, b]) for block b of g inputs */
static void rlx_i4gemm_block(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t n,
                             int64_t k, int64_t g, const float *x, const uint8_t *packed,
                             const float *scale, const int8_t *zero, float *y) {
    const int64_t nb = k / g;
    float *restrict w = rlx_i4_scratch(k);
    for (int64_t j = j0; j < j1; ++j) {
        const uint8_t *pj = packed + j * (k / 2);
        const float *sj = scale + j * nb;
        const int8_t *zj = zero ? zero + j * nb : 0;
        if (!w) {  /* out of memory for the row: unpack on the fly, once per row of x */
            for (int64_t i = i0; i < i1; ++i) {
                float acc = 0.0f;
                for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * rlx_i4_w(pj, p, g, sj, zj);
                y[i * n + j] = acc;
            }
            continue;
        }
        for (int64_t p = 0; p < k; ++p) w[p] = rlx_i4_w(pj, p, g, sj, zj);
        for (int64_t i = i0; i < i1; ++i) {
            const float *restrict xi = x + i * k;
            float acc = 0.0f;
            #pragma omp simd reduction(+:acc)
            for (int64_t p = 0; p < k; ++p) acc += xi[p] * w[p];
            y[i * n + j] = acc;
        }
    }
}
#endif
"""


def emit_int4_linear(env: KernelEnv, w: Writer, node: Node) -> str:
    """Write the kernel's loop over (row block, column block) items; returns its impl label."""
    x, packed, scale = (env.inputs[v] for v in node.inputs[:3])
    zero = env.inputs[node.inputs[3]].ptr if len(node.inputs) == 4 else "0"
    out = env.outputs[node.name]
    n, k = packed.type.shape[0], packed.type.shape[1] * 2
    m = math.prod(x.type.shape[:-1])  # rows; with k == 0 the output is the bias, not empty
    open_block_loop(env, w, m, n, k, ROW_BLOCK, COL_BLOCK)
    w.line(f"rlx_i4gemm_block(i0, i1, j0, j1, {n}, {k}, {int(node.attr('group'))}, {x.ptr}, "
           f"{packed.ptr}, {scale.ptr}, {zero}, {out.ptr});")
    w.close()
    return IMPL
