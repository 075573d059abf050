"""Known deviations: where a target is known to differ from the reference, why, and who owns it.

Nothing is excluded silently. An entry can (a) stop a target being fed special input values
(``feeds_specials=False``) and (b) explain a mismatch whose output cone matches ``explains``.
Explained mismatches are still counted, per entry, in every report; an entry is deleted when its
owner's fix lands (the fuzzer then checks the behaviour again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from rlx_core.testing.reference import ConeStats


@dataclass(frozen=True)
class KnownDeviation:
    """Where targets are known to differ from the reference: who owns the fix, why, which
    mismatches it explains (``explains``), and whether the targets get special inputs."""

    id: str
    targets: tuple[str, ...]
    owner: str  # the helper / issue that owns the fix
    why: str
    explains: Callable[[ConeStats, np.ndarray, np.ndarray], bool]  # (cone, got, want)
    feeds_specials: bool = True  # False: the target gets finite, normal inputs only


_SUMS = frozenset({"reduce_sum", "layer_norm", "rms_norm", "softmax", "log_softmax", "attention",
                   "linear", "dot_general", "conv2d", "avg_pool2d"})

_SOFTMAXES = frozenset({"softmax", "log_softmax", "attention"})

_COMPOSITES = frozenset({"attention", "softmax", "log_softmax", "layer_norm", "rms_norm",
                         "linear", "conv2d", "avg_pool2d", "gelu", "silu"})


# the HIR ops whose bf16 form reaches the cpu's bf16 GEMM (a dot_general, as decomposed)
_BF16_DOTS = frozenset(f"{op}:bf16" for op in ("dot_general", "linear", "attention", "conv2d",
                                               "conv2d_fused"))


def _nan_for_inf(got: np.ndarray, want: np.ndarray) -> bool:
    """Every element that differs is NaN in ``got`` where ``want`` is an infinity."""
    import numpy as np  # here, not at the top: report.py reads KNOWN without numpy

    g, w = np.asarray(got, np.complex128), np.asarray(want, np.complex128)
    with np.errstate(invalid="ignore"):
        differ = ~((g == w) | (np.isnan(g) & np.isnan(w)) | (np.isfinite(g) & np.isfinite(w)))
    return bool(differ.any()) and bool((np.isnan(g[differ]) & np.isinf(w[differ])).all())


def _bf16_dots_flush() -> bool:
    """Do this process's bf16 GEMMs take a native path (AMX-BF16 or AVX512-BF16, which flush
    subnormals)? Not on the float path (RLX_BF16_GEMM=float, RLX_CPU_ISA=avx2, older CPUs)."""
    from rlx_core.errors import RlxError
    from rlx_core.targets.cpu import bf16gemm

    try:
        return bf16gemm.path() != "float"
    except RlxError:  # RLX_BF16_GEMM names a path this CPU lacks: nothing runs natively
        return False


def _within(got: np.ndarray, want: np.ndarray, tol: float) -> bool:
    import numpy as np

    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore"):
        return bool((np.isfinite(g) & np.isfinite(w) & (np.abs(g - w) <= tol)
                     | (g == w) | (np.isnan(g) & np.isnan(w))).all())


KNOWN: tuple[KnownDeviation, ...] = (
    KnownDeviation(
        "webgpu-subnormals", ("webgpu", "webgpu-browser"),
        owner="helper gpu (issue 31, Found 3: webgpu IEEE special values)",
        why="WGSL lets an implementation flush subnormal f32 values to zero (WGSL spec, "
            "'Floating point evaluation'); lavapipe does. A mismatch whose reference cone holds "
            "a subnormal is explained by this entry.",
        explains=lambda s, got, want: s.subnormal),
    KnownDeviation(
        "tpu-subnormals", ("tpu",),
        owner="helper xla-hex (tpu target: StableHLO on XLA's CPU backend; found by this fuzzer)",
        why="XLA's CPU backend runs with subnormals flushed to zero: min(1.4e-45, x) gives 0.0 "
            "where the reference keeps 1.4e-45. A mismatch whose reference cone holds a "
            "subnormal is explained by this entry.",
        explains=lambda s, got, want: s.subnormal),
    KnownDeviation(
        "xla-fma-contraction", ("tpu",),
        owner="coordinator (issue 31; XLA's CPU backend, reproduced with jax.jit alone)",
        why="XLA's CPU backend contracts softmax's scaled scores into the max subtraction as "
            "one FMA: x * c - max(x * c) becomes the rounding residual of x * c instead of 0 "
            "(2.3e22 for x = 1e30, c = 0.707: jax.jit gives the same), so exp overflows and "
            "the row is inf/NaN. Explained only for a softmax/attention cone whose finite "
            "magnitudes reach 2^20, where that residual (an ulp of x * c) is no longer small.",
        explains=lambda s, got, want: bool(s.ops & _SOFTMAXES) and s.scale >= 2.0 ** 20),
    KnownDeviation(
        "f32-overflow-sums", ("numpy", "cpu", "webgpu", "webgpu-browser"),
        owner="helper rel-crash (issue 31, Found 3: f32 overflow rows of layer_norm/sum)",
        why="a norm, softmax or matmul over values near the f32 range. Decided semantics "
            "(docs/reliability.md, 'Overflow in f32'): float sums accumulate in f64 on numpy "
            "and cpu and agree with the reference; a layer_norm/rms_norm row whose f32 "
            "variance overflows is NaN by definition, where this f64 reference is finite; "
            "matmul/conv accumulate in the working dtype (BLAS), and webgpu sums in f32 (no "
            "f64 in WGSL), so a partial sum can overflow there.",
        explains=lambda s, got, want: s.near_overflow and bool(s.ops & _SUMS)),
    KnownDeviation(
        # tpu: the stop-34 long run's one finding there (attention, scale 0, bf16 infinities)
        # gives the same NaN on numpy, cpu, webgpu and tpu against the f64 reference's inf;
        # opengl, directx, vulkan: the 2026-12-05 shard's finding (bf16 gelu(-3.55) is 0 in
        # bf16, where erf rounds to -1, then 0 * inf in a matmul) is NaN on all of them and
        # on numpy, cpu and webgpu; opencl: the 2026-12-06 shard's attention (a default-scaled
        # score of -579 is exp() = 0 in f32, then 0 * inf from V) is NaN there as on numpy, cpu
        # and vulkan (tests/fuzz/cases/opencl-9f7343855f); hexagon gives the same NaN on that
        # case (tests/fuzz/cases/hexagon-9f7343855f)
        "f64-composite-specials", ("numpy", "cpu", "webgpu", "webgpu-browser", "tpu", "opengl",
                                   "directx", "vulkan", "opencl", "hexagon"),
        owner="helper rel-crash (issue 31, Found 3: decide the semantics of composites)",
        why="the reference evaluates HIR composites (attention, softmax, norms, linear, conv) "
            "in f64 and rounds once; targets run them in the working dtype, as decided "
            "(docs/reliability.md, 'Overflow in f32': a composite is its decomposition's IEEE "
            "arithmetic in the working dtype, sums in f64, f16/bf16 norms in f32). Where an infinite "
            "input meets a softmax weight that underflows to 0 in f32 but not in f64, the "
            "target computes 0 * inf = NaN and the reference +-inf. Explained only when every "
            "differing element is NaN on the target against an infinity in the reference.",
        explains=lambda s, got, want: s.nonfinite and bool(s.ops & _COMPOSITES)
        and _nan_for_inf(got, want)),
    KnownDeviation(
        "cpu-bf16-dot-ftz", ("cpu",),
        owner="helper fuzzfix (reliability; cpu/bf16gemm.py, its semantics in docs/dtypes.md)",
        why="the cpu's native bf16 dot products, AMX-BF16 tdpbf16ps and AVX512-BF16 "
            "vdpbf16ps, read subnormal inputs as 0 and flush subnormal results to 0 whatever "
            "MXCSR says (Intel SDM), as docs/dtypes.md states for bf16 dot_general; the float "
            "path (RLX_BF16_GEMM=float, RLX_CPU_ISA=avx2) keeps them, as the reference does. "
            "A mismatch whose cone holds a subnormal and a bf16 contraction (dot_general, "
            "linear, attention, conv2d) is explained by this entry, while this process's bf16 "
            "GEMMs take a native path and the cone is not near overflow (there the order "
            "of the additions decides: overflow-ambiguous); last in the table, so that a "
            "narrower entry explains first what it can.",
        explains=lambda s, got, want: s.subnormal and not s.near_overflow
        and bool(s.typed_ops & _BF16_DOTS) and _bf16_dots_flush()),
)


def entries_for(target: str) -> tuple[KnownDeviation, ...]:
    return tuple(k for k in KNOWN if target in k.targets)


def input_policy(target: str) -> bool:
    """Does ``target`` get special input values (NaN, +-inf, subnormals, extremes)?"""
    return all(k.feeds_specials for k in entries_for(target))


def explain(target: str, stats: ConeStats, got: np.ndarray,
            want: np.ndarray) -> KnownDeviation | None:
    """The known deviation that explains a mismatch of an output with cone ``stats``, if any."""
    for k in entries_for(target):
        if k.explains(stats, got, want):
            return k
    return None
