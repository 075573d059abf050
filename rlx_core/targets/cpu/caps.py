"""Capability table of the CPU (generated C) target.

Labelled "executes": the C renderer (rlx_core/targets/cpu/renderer.py) implements every MIR
primitive (dot_general included) in each dtype below, and the conformance suite runs them
against the numpy reference. Four HIR normalisations are claimed whole in f32 and f64
(softmax, log_softmax, layer_norm, rms_norm: one row loop each, c_common/row_ops.py), and
attention in f32 (cpu/attention.py), conv2d and conv2d_fused in f32 (cpu/conv.py), conv2d_pair
in f32 where passes/conv_epilogue.py made it from prepacked filters (cpu/conv_pair.py; a
graph's own pair decomposes), max_pool2d and avg_pool2d in f32 (cpu/pool.py), int_linear
(the int8 GEMM, cpu/igemm.py), dynamic_int_linear (that GEMM with per-row activation
quantization and the dequantize fused, cpu/igemm_packed.py), static_int_linear (the same with
fixed activation parameters), requantized_int_linear (that GEMM on int8 codes, requantize
in its store), int4_linear (cpu/i4gemm.py), the splatting ops (cpu/splat.py), the dense linear algebra ops
(LAPACK, cpu/lapack.py) and the sparse ops (CSR loops and Krylov solvers, cpu/sparse.py);
every other HIR op, and those in other dtypes, goes common-IR. A bf16 dot_general runs
bf16gemm.py's kernel (AMX-BF16 tiles or AVX512-BF16 ``vdpbf16ps``, f32 sums) where the CPU
has one, else the generated loop in float. c64 runs in C99's
``float _Complex`` (its arithmetic, the complex libm functions, sums and products accumulated in
complex128, dot_general, casts and data movement: ``C64_OPS``); a c64 op outside that list (an
ordering, erf, rounding) and packed i4 report how to get to a supported dtype.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import (
    MIR_PRIMITIVES,
    Capabilities,
    Constraint,
    DTypeRule,
    OpClaim,
    native_dtypes,
)
from rlx_core.targets.c_common.row_ops import ROW_DTYPES, ROW_OPS
from rlx_core.targets.cpu.attention import DTYPES as ATTENTION_DTYPES
from rlx_core.targets.cpu.attention import MASK_DTYPES
from rlx_core.targets.cpu.conv import DTYPES as CONV_DTYPES
from rlx_core.targets.cpu.conv import OPS as CONV_OPS
from rlx_core.targets.cpu.i4gemm import DTYPES as I4GEMM_DTYPES
from rlx_core.targets.cpu.igemm import DTYPES as IGEMM_DTYPES
from rlx_core.targets.cpu.lapack import DTYPES as LAPACK_DTYPES
from rlx_core.targets.cpu.lapack import OPS as LAPACK_OPS
from rlx_core.targets.cpu.pool import DTYPES as POOL_DTYPES
from rlx_core.targets.cpu.pool import OPS as POOL_OPS
from rlx_core.targets.cpu.sparse import DTYPES as CSR_DTYPES
from rlx_core.targets.cpu.sparse import OPS as CSR_OPS
from rlx_core.targets.cpu.splat import DTYPES as SPLAT_DTYPES
from rlx_core.targets.cpu.splat import OPS as SPLAT_OPS

DTYPES: tuple[str, ...] = ("f32", "f64", "f16", "bf16", "i32", "i64", "i16", "i8", "u32", "u8",
                           "bool")

# what the C renderer computes on c64 (c_common/expr.py's complex rules; kernels.py and
# matmul.py accumulate in double _Complex)
C64_OPS: tuple[str, ...] = (
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "reciprocal",
    "add", "sub", "mul", "div", "pow", "eq", "ne", "select", "cast", "reduce_sum",
    "reduce_prod", "broadcast_in_dim", "reshape", "transpose", "slice", "pad", "concat",
    "gather", "dot_general", "constant")

# the store epilogues the cpu's int8 linears apply (passes/int_linear_epilogue.py folds only
# what a claim lists)
INT8_EPILOGUE = (Constraint("attr_in", "act", ("none", "gelu")),
                 Constraint("attr_in", "residual", (False, True)))

CAPS = Capabilities(
    target="cpu",
    verification="executes",
    claims=(OpClaim(C64_OPS, DTYPES + ("c64",),
                    note="one C loop nest per kernel; c64 as C99 float _Complex"),
            OpClaim(tuple(op for op in MIR_PRIMITIVES if op not in C64_OPS), DTYPES,
                    note="one C loop nest per kernel; a bf16 dot_general on AMX-BF16 tiles or "
                         "AVX512-BF16 vdpbf16ps where the CPU has them, picked at run time "
                         "(cpu/bf16gemm.py), else in float"),
            OpClaim(ROW_OPS, ROW_DTYPES, note="one loop over rows, each row's passes in L1"),
            OpClaim(("attention",), ATTENTION_DTYPES + MASK_DTYPES,
                    note="per (batch, head, query rows): scores, softmax and @v in L2"),
            OpClaim(CONV_OPS, CONV_DTYPES,
                    note="implicit GEMM on the own tile (im2col panels packed from NCHW), "
                         "depthwise row loops; bias / residual / ReLU-clip in the store "
                         "(cpu/conv.py)"),
            OpClaim(("conv2d_pair",), CONV_DTYPES, constraints=(Constraint(
                "static_attr", "packed", (True,),
                why="the cpu runs a pair only where passes/conv_epilogue.py made it from the "
                    "filters it prepacks; a graph's own conv2d_pair runs as its two "
                    "convolutions"),),
                    note="two 1x1 convs summed (a projection shortcut) as one K loop on the "
                         "blocked direct kernel (cpu/conv_pair.py)"),
            OpClaim(POOL_OPS, POOL_DTYPES,
                    note="per plane: padded, window rows, window columns, a vector loop "
                         "each, in L1 (cpu/pool.py)"),
            OpClaim(("int_linear",), IGEMM_DTYPES,
                    note="int8 dot products: AVX512-VNNI / AVX-VNNI picked at run time, "
                         "else AVX2 or portable C (cpu/igemm.py)"),
            OpClaim(("dynamic_int_linear",), ("f32", "i8"), INT8_EPILOGUE,
                    note="rows quantized per work item, the packed int8 GEMM, dequantize and "
                         "bias (and GELU, a residual) in its store (cpu/igemm_packed.py)"),
            OpClaim(("static_int_linear",), ("f32", "i8", "i32"), INT8_EPILOGUE,
                    note="rows quantized with the fixed parameters per work item, the packed "
                         "int8 GEMM, dequantize (GELU, a residual) in its store "
                         "(cpu/igemm_packed.py)"),
            OpClaim(("requantized_int_linear",), IGEMM_DTYPES + ("f32",),
                    note="the packed int8 GEMM on the codes in place (an f32 input "
                         "quantized per work item), the bias and "
                         "requantize (TFLite's rule) in its store, int8 codes out "
                         "(cpu/igemm_packed.py)"),
            OpClaim(("int4_linear",), I4GEMM_DTYPES,
                    note="weight-only int4: one weight row unpacked at a time (cpu/i4gemm.py)"),
            OpClaim(SPLAT_OPS, SPLAT_DTYPES,
                    note="3DGS projection, tile rasterization and their VJPs (cpu/splat.py)"),
            OpClaim(LAPACK_OPS, LAPACK_DTYPES,
                    note="LAPACK of the scipy-openblas32 wheel, row-major kernels (cpu/lapack.py)"),
            OpClaim(CSR_OPS, CSR_DTYPES + ("i32",),
                    note="CSR loops over row blocks; Krylov solvers whole in one team kernel "
                         "(cpu/sparse.py)")),
    dtype_rules=native_dtypes(DTYPES) + (
        DTypeRule("c64", "native", hint="the cpu computes c64 arithmetic, libm's complex "
                                        "functions, sums, products and dot_general; split "
                                        "other ops into real and imaginary f32 parts"),
        DTypeRule("i4", "unsupported", hint="dequantize: cast the i4 tensor to i8 or f32 first"),
    ),
    note="generated C (rlx_core/targets/c_common + cpu/renderer.py); f16/bf16 elementwise and "
         "reductions compute in float; bf16 dot_general takes native bf16 dot products "
         "(AMX-BF16, else AVX512-BF16) with f32 sums where the CPU has them (cpu/bf16gemm.py)",
)
