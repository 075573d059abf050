"""The BLAS behind native f32/f64 matmul: OpenBLAS from the ``scipy-openblas32`` wheel.

The wheel ships ``libscipy_openblas.so`` and its ``cblas.h``; every CBLAS symbol carries the
``scipy_`` prefix (``scipy_cblas_sgemm``), and ``blasint`` is 32-bit. Set ``RLX_NO_BLAS=1`` to
render generated loop kernels instead (the fallback is also used when the wheel is missing).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rlx_core.ir import dtypes as dt
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import GemmSpec

BLAS_INT_MAX = 2**31 - 1  # the 32-bit blasint of scipy-openblas32


@dataclass(frozen=True)
class BlasInfo:
    """Where the BLAS is and how its symbols are spelled."""

    name: str
    version: str
    include_dir: str
    lib_dir: str
    library: str  # link name: -l<library>
    symbol_prefix: str  # "scipy_" -> scipy_cblas_sgemm

    def describe(self) -> str:
        return f"{self.name} {self.version}"


@cache
def _probe() -> tuple[BlasInfo | None, str]:
    try:
        import scipy_openblas32 as sob  # a wheel of the library and headers, no Python deps
    except ImportError:
        return None, "the scipy-openblas32 package is not installed (pip install scipy-openblas32)"
    inc, lib = sob.get_include_dir(), sob.get_lib_dir()
    if not (Path(inc) / "cblas.h").is_file():
        return None, f"scipy-openblas32 has no cblas.h in {inc}"
    name = sob.get_library()
    if not any(p.name.startswith(f"lib{name}") for p in Path(lib).iterdir()):
        return None, f"scipy-openblas32 has no lib{name} in {lib}"
    version = getattr(sob, "__version__", "unknown")
    return BlasInfo("scipy-openblas32", version, inc, lib, name, "scipy_"), ""


def find_blas() -> tuple[BlasInfo | None, str]:
    """(BlasInfo, "") when the BLAS can be used, else (None, why not)."""
    if os.environ.get("RLX_NO_BLAS", "") not in ("", "0"):
        return None, "disabled by RLX_NO_BLAS"
    return _probe()


def blas_takes(spec: GemmSpec) -> bool:
    """BLAS runs float and double GEMMs whose sizes fit its 32-bit integers."""
    return spec.dtype in (dt.f32, dt.f64) and max(spec.m, spec.n, spec.k) <= BLAS_INT_MAX


def emit_gemm(w: Writer, env: KernelEnv, spec: GemmSpec, blas: BlasInfo) -> str:
    """A batched loop of ``?gemm`` calls: C[b] = op(A[b]) op(B[b]) (alpha 1, beta 0)."""
    s = "s" if spec.dtype == dt.f32 else "d"
    one, zero = ("1.0f", "0.0f") if s == "s" else ("1.0", "0.0")
    fn = f"{blas.symbol_prefix}cblas_{s}gemm"
    ta = "CblasTrans" if spec.trans_a else "CblasNoTrans"
    tb = "CblasTrans" if spec.trans_b else "CblasNoTrans"
    lda = spec.m if spec.trans_a else spec.k
    ldb = spec.k if spec.trans_b else spec.n
    # BLAS threads itself; the batch loop stays serial so the two pools do not nest
    w.open(f"for (int64_t bb = 0; bb < {spec.batch}; ++bb)")
    w.line(f"{fn}(CblasRowMajor, {ta}, {tb}, {spec.m}, {spec.n}, {spec.k}, {one}, "
           f"{spec.a} + bb * {spec.m * spec.k}, {lda}, {spec.b} + bb * {spec.k * spec.n}, "
           f"{ldb}, {zero}, {spec.c} + bb * {spec.m * spec.n}, {spec.n});")
    w.close()
    return f"blas-{s}gemm"
