"""The cpu target's bf16 GEMM (rlx_core/targets/cpu/bf16gemm.py) on each path this machine runs:
AMX-BF16 tiles, AVX512-BF16 vdpbf16ps and the generated float loop, against the numpy
reference. A path the CPU lacks is a skip that names what is missing.

Tolerance: each product of two bf16 values is exact in f32 and the sum is rounded once to
bf16, so an element is within one bf16 step (2^-8 relative) of the exact sum, plus the f32
summation error (K * 2^-24 * sum |a b|); the order of the f32 additions is the only freedom.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Graph, Level, TensorType, Value, ValueKind
from rlx_core.targets.cpu import bf16gemm, isa
from rlx_core.targets.numpy_ref.semantics import round_bf16

IMPL = {"amx": "bf16-amx", "avx512bf16": "bf16-avx512bf16", "float": "generated-matmul"}


@pytest.fixture(params=bf16gemm.PATHS)
def bf16_path(request, monkeypatch) -> str:
    if request.param not in bf16gemm.native_paths():
        why = (bf16gemm.amx.request("amx_bf16").why if request.param == "amx"
               else f"no avx512_bf16 on this ISA path ({isa.detect().describe()})")
        pytest.skip(f"this machine cannot run the {request.param} path: {why}")
    monkeypatch.setenv("RLX_BF16_GEMM", request.param)
    return request.param


# (lhs shape, rhs shape, contract, batch): tails in every direction, both B layouts, strided A
SHAPES = {
    "minilm_qkv": ((128, 384), (384, 384), ((1,), (1,)), ((), ())),   # x @ W^T, in place
    "tails": ((37, 45), (50, 45), ((1,), (1,)), ((), ())),            # M, N, K off every tile
    "b_kn": ((70, 64), (64, 96), ((1,), (0,)), ((), ())),             # B as [K, N]
    "b_kn_odd": ((20, 33), (33, 40), ((1,), (0,)), ((), ())),         # odd K, a part panel
    "a_transposed": ((33, 40), (33, 48), ((0,), (0,)), ((), ())),     # op(A) = A^T: packed
    "k_odd": ((9, 3), (17, 3), ((1,), (1,)), ((), ())),
    "one_row": ((1, 96), (200, 96), ((1,), (1,)), ((), ())),
    "batched": ((3, 20, 64), (3, 64, 40), ((2,), (1,)), ((0,), (0,))),
    "big": ((300, 256), (520, 256), ((1,), (1,)), ((), ())),          # team chunks, tiles
}


def _dot_graph(lhs: tuple, rhs: tuple, contract: tuple, batch: tuple) -> Graph:
    a = Value("a", TensorType(dt.bf16, lhs), ValueKind.INPUT)
    b = Value("b", TensorType(dt.bf16, rhs), ValueKind.INPUT)
    bld = Builder()
    y = bld.emit("dot_general", [a, b], {"contract": contract, "batch": batch})
    return Graph("bfdot", Level.MIR, (a, b), (), tuple(bld.nodes), (y.name,))


def _reference(a: np.ndarray, b: np.ndarray, contract: tuple, batch: tuple,
               absolute: bool = False) -> np.ndarray:
    a64, b64 = (np.abs(x) if absolute else x for x in (a.astype(np.float64), b.astype(np.float64)))
    if batch[0]:
        return np.einsum("bmk,bkn->bmn", a64, b64)
    return np.tensordot(a64, b64, axes=(contract[0], contract[1]))


def _check(got: np.ndarray, a: np.ndarray, b: np.ndarray, contract: tuple, batch: tuple,
           k: int) -> None:
    exact = _reference(a, b, contract, batch)
    scale = _reference(a, b, contract, batch, absolute=True)
    bound = np.abs(exact) * 2.0**-8 + scale * k * 2.0**-24 + 1e-30
    err = np.abs(got.astype(np.float64) - exact)
    assert (err <= bound).all(), f"max excess {(err - bound).max()} at {np.argmax(err - bound)}"
    # and bit for bit equal to bf16(exact) on almost every element (summation order only)
    same = got == round_bf16(exact.astype(np.float32))
    assert same.mean() > 0.99


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_bf16_dot_matches_the_reference_on_each_path(case: str, bf16_path: str,
                                                     two_threads: None) -> None:  # noqa: F811
    lhs, rhs, contract, batch = SHAPES[case]
    rng = np.random.default_rng(11)
    a = round_bf16(rng.standard_normal(lhs).astype(np.float32))
    b = round_bf16(rng.standard_normal(rhs).astype(np.float32))
    exe = rlx.compile(_dot_graph(lhs, rhs, contract, batch), target="cpu", record=False)
    impls = [v["impl"] for v in exe.program.info["kernels"].values()]
    assert IMPL[bf16_path] in impls, impls
    got = np.asarray(exe(a, b), np.float32)
    _check(got, a, b, contract, batch, lhs[contract[0][0]])


def test_nan_and_inf_propagate(bf16_path: str) -> None:
    rng = np.random.default_rng(2)
    a = round_bf16(rng.standard_normal((40, 64)).astype(np.float32))
    b = round_bf16(rng.standard_normal((48, 64)).astype(np.float32))
    a[3, 10], a[7, 0] = np.nan, np.inf
    exe = rlx.compile(_dot_graph((40, 64), (48, 64), ((1,), (1,)), ((), ())), target="cpu",
                      record=False)
    got = np.asarray(exe(a, b), np.float32)
    assert np.isnan(got[3]).all()
    assert (np.isinf(got[7]) | np.isnan(got[7])).all()  # inf * 0-sum neighbours stay non-finite
    rest = np.delete(got, [3, 7], axis=0)
    assert np.isfinite(rest).all()


def test_autocast_linear_packs_the_f32_weight_and_skips_its_cast(bf16_path: str,
                                                                 monkeypatch) -> None:
    if bf16_path == "float":
        pytest.skip("the float path reads the cast weight as the graph computes it")
    from rlx_core.frontend.nn import linear
    from rlx_core.quant import amp

    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 80)).astype(np.float32)
    w = rng.standard_normal((96, 80)).astype(np.float32)
    bias = rng.standard_normal(96).astype(np.float32)
    g = amp.autocast(rlx.trace(lambda x: linear(x, w, bias), x), "bf16")
    exe = rlx.compile(g, target="cpu", record=False)
    impls = [v["impl"] for v in exe.program.info["kernels"].values()]
    assert bf16gemm.FOLDED in impls and IMPL[bf16_path] in impls, impls
    assert [p["kind"] for p in exe.program.info["prepacked"]] == ["bf16f32"]
    got = np.asarray(exe(x))
    # against the numpy reference: bf16(bf16(x W^T) + bf16(b)), each rounding within a step
    want = np.asarray(rlx.compile(g, target="numpy", record=False)(x))
    scale = np.abs(round_bf16(x)) @ np.abs(round_bf16(w)).T + np.abs(bias)
    assert (np.abs(got - want) <= 2.0**-7 * scale).all()
    monkeypatch.setenv("RLX_NO_PREPACK", "1")  # the cast kernel runs, B packed per call
    plain = rlx.compile(g, target="cpu", record=False)
    assert bf16gemm.FOLDED not in [v["impl"] for v in plain.program.info["kernels"].values()]
    np.testing.assert_array_equal(got, np.asarray(plain(x)))
    # a weight bound later is packed again (prepack.py's pointer check)
    name = next(p["param"] for p in exe.program.info["prepacked"])
    exe.params[name] = -w
    plain.params[name] = -w
    np.testing.assert_array_equal(np.asarray(exe(x)), np.asarray(plain(x)))
    np.testing.assert_array_equal(np.asarray(exe(x)), np.asarray(plain(x)))


def test_env_errors_are_typed(monkeypatch) -> None:
    monkeypatch.setenv("RLX_BF16_GEMM", "tiles9000")
    with pytest.raises(bf16gemm.Bf16PathError) as e:
        bf16gemm.path()
    assert e.value.code == "RLX-Q010"
    # a graph with no bf16 GEMM never reads the setting
    x = np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(rlx.compile(lambda a: a @ a.T, x, target="cpu",
                                              record=False)(x), np.full((4, 4), 8.0, np.float32))
    monkeypatch.setenv("RLX_NO_AMX", "1")
    monkeypatch.setenv("RLX_BF16_GEMM", "amx")
    with pytest.raises(bf16gemm.Bf16PathError, match="RLX_NO_AMX"):
        bf16gemm.path()


def test_a_forced_avx2_path_computes_bf16_in_float(monkeypatch) -> None:
    if "avx2" not in isa.forced_paths():
        pytest.skip(f"this CPU cannot run the avx2 path ({isa.detect().native})")
    monkeypatch.setenv("RLX_CPU_ISA", "avx2")
    assert bf16gemm.native_paths() == ("float",)
    exe = rlx.compile(_dot_graph((20, 32), (24, 32), ((1,), (1,)), ((), ())), target="cpu",
                      record=False)
    assert [v["impl"] for v in exe.program.info["kernels"].values()] == ["generated-matmul"]


# rlx_bf_store's two ways to round f32 sums to bf16 (vcvtne2ps2bf16 for whole 32-column rows,
# integer round-to-nearest-even elsewhere), called directly
STORE_HARNESS = bf16gemm.SOURCE + r"""
void store_rows(const float *t, int64_t mr, int64_t nr, uint16_t *c) {
    rlx_bf_store(t, 32, mr, nr, c, 32);
}
"""


def test_rounding_to_bf16_matches_the_reference_bit_for_bit(tmp_path) -> None:
    import ctypes

    from tests.targets.own_sgemm import build_harness

    lib = build_harness(tmp_path, "native", STORE_HARNESS)
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 2**32, 64 * 32, dtype=np.uint64).astype(np.uint32)
    exp = (bits >> 23) & 0xFF
    bits = np.where(exp == 0, bits | (1 << 23), bits)  # no subnormals (flushed by the dots)
    t = bits.view(np.float32).reshape(64, 32).copy()
    t[0, :6] = [np.inf, -np.inf, 0.0, -0.0, np.nan, 1.0 + 2.0**-8]  # a tie rounds to even
    t[1, :2] = [1.0 + 3 * 2.0**-8, -(1.0 + 2.0**-8)]
    want = (round_bf16(t).view(np.uint32) >> 16).astype(np.uint16)
    for nr in (32, 17):
        c = np.zeros((64, 32), np.uint16)
        lib.store_rows(t.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(64),
                       ctypes.c_int64(nr), c.ctypes.data_as(ctypes.c_void_p))
        nan = np.isnan(t[:, :nr])
        got = c[:, :nr]
        assert (got[~nan] == want[:, :nr][~nan]).all(), nr
        assert ((got[nan] & 0x7F80) == 0x7F80).all() and ((got[nan] & 0x7F) != 0).all()


def test_autocast_conv2d_runs_its_im2col_gemm_on_the_path(bf16_path: str) -> None:
    from rlx_core.frontend.nn import conv2d
    from rlx_core.quant import amp

    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 10, 10)).astype(np.float32)
    w = (rng.standard_normal((24, 16, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    g = amp.autocast(rlx.trace(lambda x: conv2d(x, w, b, padding=1), x), "bf16")
    exe = rlx.compile(g, target="cpu", record=False)
    assert IMPL[bf16_path] in [v["impl"] for v in exe.program.info["kernels"].values()]
    want = np.asarray(rlx.compile(g, target="numpy", record=False)(x))
    got = np.asarray(exe(x))
    # two bf16 roundings (the conv, its bias add), each within a step of the larger magnitude
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=2.0**-7, atol=2.0**-7 * scale)


# rlx_bf_plain, the out-of-memory fallback of rlx_bf16gemm (no packing scratch), called
# directly: op(B) read where it is, and read from prepacked panels
PLAIN_HARNESS = bf16gemm.SOURCE + r"""
void plain(int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, int packed,
           uint16_t *C) {
    const uint16_t *P = 0;
    if (packed) {
        uint16_t *buf = rlx_bf_scratch(0, (N + 15) / 16 * 16 * rlx_bf_kp(K));
        rlx_bf16_pack_b(N, K, B, 1, K, buf, 0, N);  /* op(B) = B^T: W as [N, K] */
        P = buf;
    }
    rlx_bf_plain(M, K, A, K, 1, B, 1, K, P, C, N, 0, N);
}
"""


def test_out_of_memory_fallback_matches_the_reference(tmp_path) -> None:
    import ctypes

    from tests.targets.own_sgemm import build_harness

    lib = build_harness(tmp_path, "native", PLAIN_HARNESS)
    rng = np.random.default_rng(11)
    m, n, k = 9, 37, 45  # off every tile and panel, odd K
    a = round_bf16(rng.standard_normal((m, k)).astype(np.float32))
    w = round_bf16(rng.standard_normal((n, k)).astype(np.float32))
    exact = a.astype(np.float64) @ w.astype(np.float64).T
    bits = {name: (x.view(np.uint32) >> 16).astype(np.uint16) for name, x in (("a", a), ("w", w))}
    for packed in (0, 1):
        c = np.zeros((m, n), np.uint16)
        lib.plain(ctypes.c_int64(m), ctypes.c_int64(n), ctypes.c_int64(k),
                  bits["a"].ctypes.data_as(ctypes.c_void_p),
                  bits["w"].ctypes.data_as(ctypes.c_void_p), ctypes.c_int(packed),
                  c.ctypes.data_as(ctypes.c_void_p))
        got = (c.astype(np.uint32) << 16).view(np.float32)
        # one bf16 rounding of an f32 sum: a step of the result plus the f32 summation error
        tol = 2.0**-8 * np.abs(exact) + k * 2.0**-24 * (np.abs(a) @ np.abs(w).T)
        assert (np.abs(got - exact) <= tol).all(), packed
