"""Shared by the tests of rlx's own f32 GEMM (sgemm.py) and what is built on it."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from rlx_core.targets.cpu import sgemm
from rlx_core.targets.cpu.blas import find_blas
from rlx_core.targets.cpu.toolchain import find_compiler


def skip_unless_own_sgemm() -> None:
    """Skip unless f32 GEMMs route to the own kernel on this machine (prepacked panels and
    tile epilogues exist only there)."""
    if find_blas()[0] is None:
        pytest.skip(f"no BLAS here ({find_blas()[1]}): GEMMs are generated loop nests")
    ok, why = sgemm.available(find_compiler())
    if not ok:
        pytest.skip(f"own sgemm not used here: {why}")


def three_mlp_steps():
    """The MNIST MLP's SGD step (784-128-10, batch 128, lr 0.05, init seed 1) compiled on cpu
    with the environment as it is now, run on three fixed random batches; the step returned
    holds the parameters after them."""
    import numpy as np

    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import SGD, compile_step

    rng = np.random.default_rng(0)
    xs = [rng.random((128, 784), np.float32) for _ in range(3)]
    ys = [rng.integers(0, 10, 128).astype(np.int32) for _ in range(3)]
    step = compile_step(mlp_loss, SGD(0.05), init_mlp((784, 128, 10), seed=1), xs[0], ys[0],
                        target="cpu")
    for xb, yb in zip(xs, ys, strict=True):
        step(xb, yb)
    return step


def matmul_source(exe) -> str:
    """The C source of the program's one matmul kernel."""
    (name,) = [k.name for k in exe.lir.kernels if k.kind == "matmul"]
    return exe.program.sources[name]


def calls_packed(exe) -> bool:
    """Does a kernel read prepacked panels: the tiled GEMM's, or the one-row GEMV's (gemv.py)?"""
    return any("rlx_sgemm_packed" in src or "rlx_gemv_packed" in src
               for src in exe.program.sources.values())


# the kernels' C source built by itself, per vector ISA: plain C, AVX2 + FMA, this machine's best
ISAS = {"c": ["-mno-avx"], "avx2": ["-mavx2", "-mfma", "-mno-avx512f"], "native": ["-march=native"]}


def _cpu_has(*flags: str) -> bool:
    """Does /proc/cpuinfo list every one of ``flags`` (False where there is none to read)?"""
    from rlx_core.targets.cpu.isa import cpu_flags

    return set(flags) <= cpu_flags()


def build_harness(tmp_path: Path, isa: str, source: str) -> ctypes.CDLL:
    """``source`` (the kernels' C and a test harness) built as a shared library for ``isa``
    (a key of ISAS). Skips only where no compiler exists, where the compiler does not take
    ``isa``'s flags, or where this CPU cannot run AVX2 code; a compile error in ``source``
    (code we wrote) fails the test with the compiler's message."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    if isa == "avx2" and not _cpu_has("avx2", "fma"):
        pytest.skip("this CPU has no AVX2 and FMA to run the AVX2 kernels on")
    flags = [cc, "-O2", *ISAS[isa], "-std=gnu11", "-fPIC", "-shared"]
    # an empty unit first: a compiler without this ISA's flags is missing a feature, not a
    # broken harness
    empty, probe = tmp_path / f"empty-{isa}.c", tmp_path / f"empty-{isa}.so"
    empty.write_text("int rlx_probe;\n")
    r = subprocess.run([*flags, str(empty), "-o", str(probe)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"{cc} does not build for {isa} ({' '.join(ISAS[isa])}): {r.stderr[-300:]}")
    src, lib = tmp_path / f"h-{isa}.c", tmp_path / f"h-{isa}.so"
    src.write_text(source)
    r = subprocess.run([*flags, str(src), "-o", str(lib)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"the harness does not compile with {cc} for {isa}:\n{r.stderr[-2000:]}")
    return ctypes.CDLL(str(lib))


# a tile epilogue for the C harnesses: C = 2 C + 1, counting the visits of every element (each
# must be finished exactly once, after its last KC slice)
TWICE_PLUS_ONE = r"""
typedef struct { float *c; int *seen; int64_t ldc; } epi_ctx;
static void twice_plus_one(const void *vc, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const epi_ctx *e = (const epi_ctx *)vc;
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) {
            e->c[i * e->ldc + j] = 2.0f * e->c[i * e->ldc + j] + 1.0f;
            e->seen[i * e->ldc + j] += 1;
        }
}
"""
