"""rlx's one-row GEMM over prepacked panels (rlx_core/targets/cpu/gemv.py): odd shapes at 1 to
4 rows, fused epilogues, the team's column chunks at 1 and 2 threads, and the C source by
itself with and without vector units."""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import gemv, sgemm
from rlx_core.targets.cpu.target import CpuTarget
from rlx_core.targets.cpu.threads import num_threads, set_num_threads
from tests.targets.checks import impl_set, rel_error
from tests.targets.own_sgemm import ISAS, TWICE_PLUS_ONE, build_harness, skip_unless_own_sgemm

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


# N not a multiple of either panel width (16 with AVX2, 32 with AVX-512) and under one panel
# pair, K odd and K of one step, column groups of several panels and a partial last group
SHAPES = [(1, 77, 50), (2, 385, 33), (3, 1, 40), (4, 129, 300), (1, 768, 1000), (2, 3, 97)]


def test_prepacked_rows_match_numpy() -> None:
    """x @ W^T + b, then ReLU, with W and b graph parameters, for each shape (one program):
    the GEMV reads W's panels and the bias + ReLU epilogue stays fused into its kernel."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal((m, k), np.float32) for m, k, _ in SHAPES]
    ws = [rng.standard_normal((n, k), np.float32) for _, k, n in SHAPES]
    bs = [rng.standard_normal(n).astype(np.float32) for _, _, n in SHAPES]

    def f(*xs):
        return tuple(rlx.nn.relu(rlx.nn.linear(x, w, b)) for x, w, b in zip(xs, ws, bs, strict=True))

    exe = rlx.compile(f, *xs, target="cpu", record=False)
    assert impl_set(exe) == {gemv.IMPL}  # no kernel of its own for the bias or the ReLU
    for got, x, w, b in zip(exe(*xs), xs, ws, bs, strict=True):
        want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)
        assert rel_error(got, want) < 1e-5, x.shape


def test_more_rows_and_no_gemv_stay_on_the_tiled_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Five rows and RLX_NO_GEMV=1 keep sgemm; one row times a weight passed as an input (W
    and W^T) runs the per-call GEMV, which packs nothing."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((gemv.MAX_ROWS + 1, 64), np.float32)
    w = rng.standard_normal((96, 64), np.float32)
    one = x[:1]
    exe = rlx.compile(lambda a, w=w: rlx.nn.linear(a, w), x, target="cpu", record=False)
    assert impl_set(exe) == {sgemm.IMPL}
    assert rel_error(exe(x), x @ w.T) < 1e-5
    wt = np.ascontiguousarray(w.T)
    exe = rlx.compile(lambda o, b, bt: (rlx.nn.linear(o, b), o @ bt), one, w, wt,
                      target="cpu", record=False)
    assert impl_set(exe) == {gemv.IMPL}
    src = "".join(exe.sources.values())
    assert "rlx_gemv(" in src or "rlx_gemv_epi(" in src
    for got in exe(one, w, wt):
        assert rel_error(got, one @ w.T) < 1e-5
    monkeypatch.setenv("RLX_NO_GEMV", "1")
    exe = rlx.compile(lambda a, w=w: rlx.nn.linear(a, w), one, target="cpu", record=False)
    assert impl_set(exe) == {sgemm.IMPL}
    assert rel_error(exe(one), one @ w.T) < 1e-5


def test_chunk_width_gives_both_threads_work() -> None:
    """A narrow GEMV is cut into about MIN_CHUNKS chunks of whole panels of either ISA (the
    small decoder's 256-wide outputs were one chunk, one thread's); a wide one keeps CHUNK."""
    for n in (64, 256, 257, 768, 1024, 1064, 3072, 50257):
        width = gemv.chunk_width(n)
        assert width % gemv.CHUNK_UNIT == 0 and width % 32 == 0 and width <= gemv.CHUNK
        assert width in (gemv.CHUNK, gemv.CHUNK_UNIT) or \
            width - gemv.CHUNK_UNIT < n / gemv.MIN_CHUNKS <= width
        if n >= 2 * gemv.CHUNK_UNIT:
            assert -(-n // width) >= 2  # both threads get a chunk
    assert gemv.chunk_width(256) == 128 and gemv.chunk_width(50257) == gemv.CHUNK


def test_team_column_chunks_agree_bit_for_bit() -> None:
    """With a team, a one-row GEMM of >= 64K multiply-adds is shared out as claimed chunks of
    gemv.chunk_width columns (the row split would leave it to one thread); every column is computed
    the same way whoever claims it, so 1 and 2 threads give the same bits. A GELU epilogue
    and a residual add ride along, narrowed to each chunk."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(7)
    k, n = 257, 4 * gemv.CHUNK + 40  # a partial last chunk, and a partial last panel in it
    x = rng.standard_normal((1, k), np.float32)
    w1 = rng.standard_normal((n, k), np.float32) * 0.1
    w2 = rng.standard_normal((k, n), np.float32) * 0.1
    b1 = rng.standard_normal(n).astype(np.float32)

    def f(a):
        return a + rlx.nn.linear(rlx.nn.gelu(rlx.nn.linear(a, w1, b1)), w2)

    exe = rlx.compile(f, x, target="cpu", record=False)
    assert impl_set(exe) >= {gemv.IMPL}
    if exe.program.info["openmp"]:  # team mode: the chunks are in the program
        src = "".join(exe.sources.values())
        assert f"const int64_t j0 = ch * {gemv.chunk_width(n)}" in src and "rlx_gemv_packed" in src
    before = num_threads()
    try:
        got = {}
        for threads in (1, 2):
            set_num_threads(threads)
            got[threads] = exe(x)
    finally:
        set_num_threads(before)
    np.testing.assert_array_equal(got[1], got[2])
    ref = rlx.compile(f, x, target="numpy", record=False)(x)
    assert rel_error(got[2], ref) < 1e-4


_HARNESS = TWICE_PLUS_ONE + r"""
/* op(B) = W^T, W n x k (a linear layer's weight); Wt: the same as a k x n array. form 0:
   prepacked panels; 1: W passed as it is (dot products); 2: Wt passed (rows read in place) */
void run(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm, int64_t rk,
         const float *W, const float *Wt, float *C, int *seen, int64_t n0, int64_t n1,
         int with_epi, int form) {
    epi_ctx e = {C, seen, n};
    rlx_sg_epi epi = with_epi ? twice_plus_one : 0;
    const float *B = form == 2 ? Wt : W;
    const int64_t brk = form == 2 ? n : 1, brn = form == 2 ? 1 : k;
    if (form == 0) {
        float *P = (float *)malloc((size_t)((n + 31) / 32 * 32 * k) * sizeof(float));
        rlx_sgemm_pack_b(n, k, W, 1, k, P);
        if (with_epi)
            rlx_gemv_packed_epi(m, n, k, A, rm, rk, P, C, n, n0, n1, epi, &e);
        else
            rlx_gemv_packed(m, n, k, A, rm, rk, P, C, n, n0, n1);
        free(P);
    } else if (with_epi) {
        rlx_gemv_epi(m, n, k, A, rm, rk, B, brk, brn, C, n, n0, n1, epi, &e);
    } else {
        rlx_gemv(m, n, k, A, rm, rk, B, brk, brn, C, n, n0, n1);
    }
}
"""


def _run(tmp_path, family: str, prefix: str = ""):
    """_HARNESS's ``run`` built for ``family`` with ``prefix`` (macros) before the sources,
    in a folder of its own below ``tmp_path``."""
    sub = tmp_path / f"build{len(list(tmp_path.iterdir()))}"
    sub.mkdir()
    fn = build_harness(sub, family, prefix + sgemm.SOURCE + gemv.SOURCE + _HARNESS).run
    fn.restype = None
    i64, ptr, i32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    fn.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, ptr, ptr, ptr, i64, i64, i32, i32]
    return fn


@pytest.mark.parametrize("family", sorted(ISAS))
def test_the_c_source_is_right_with_and_without_vector_units(tmp_path, family: str) -> None:
    """Built by itself for plain C, AVX2 and this machine's best: 1 to MAX_ROWS + 1 rows (the
    last goes to the tiled kernel), A as rows or transposed, column ranges split at 64 as the
    team's chunks would be, and the epilogue called on every element exactly once; on
    prepacked panels, on W passed as it is (x @ W^T: dot products; a transposed A goes to the
    tiled kernel) and on W^T passed with contiguous rows (read in place)."""
    fn = _run(tmp_path, family)
    rng = np.random.default_rng(3)
    rows = range(1, gemv.MAX_ROWS + 2)
    for m, (k, n), ta, epi, form in itertools.product(
            rows, [(7, 70), (400, 33), (1, 48), (19, 13)], [0, 1], [0, 1], [0, 1, 2]):
        a = rng.standard_normal((k, m) if ta else (m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        wt = np.ascontiguousarray(w.T)
        want = (a.T if ta else a).astype(np.float64) @ w.T.astype(np.float64)
        if epi:
            want = 2 * want + 1
        c = np.full((m, n), np.nan, np.float32)
        seen = np.zeros((m, n), np.int32)
        rm, rk = (1, m) if ta else (k, 1)
        split = 64 if n > 64 else n
        for n0, n1 in ((0, split), (split, n)):
            if n1 > n0:
                fn(m, n, k, a.ctypes.data, rm, rk, w.ctypes.data, wt.ctypes.data,
                   c.ctypes.data, seen.ctypes.data, n0, n1, epi, form)
        assert rel_error(c, want) < 1e-5, (m, k, n, ta, epi, form)
        assert (seen == epi).all(), (m, k, n, ta, epi, form)


@pytest.mark.parametrize("family", sorted(ISAS))
def test_the_weight_prefetch_changes_no_bits(tmp_path, family: str) -> None:
    """The software prefetch of a prepacked weight (RLX_GV_PF bytes ahead, for weights over
    RLX_GV_PF_MIN) only moves memory: the source built with it forced on for every size and
    built without it gives the same bits, 1 to MAX_ROWS rows, K shorter and longer than the
    prefetch distance (which runs past a panel's end into the next one)."""
    fns = [_run(tmp_path, family, prefix) for prefix in ("#define RLX_GV_PF_MIN 0\n", "#define RLX_GV_PF 0\n")]
    rng = np.random.default_rng(5)
    for m, (k, n) in itertools.product(range(1, gemv.MAX_ROWS + 1),
                                       [(7, 70), (400, 200), (1100, 96)]):
        a = rng.standard_normal((m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        got = []
        for fn in fns:
            c = np.full((m, n), np.nan, np.float32)
            seen = np.zeros((m, n), np.int32)
            fn(m, n, k, a.ctypes.data, k, 1, w.ctypes.data, w.ctypes.data, c.ctypes.data,
               seen.ctypes.data, 0, n, 0, 0)
            got.append(c)
        np.testing.assert_array_equal(got[0], got[1], err_msg=str((m, k, n)))
        assert rel_error(got[0], a.astype(np.float64) @ w.T.astype(np.float64)) < 1e-5


@pytest.mark.parametrize("family", sorted(ISAS))
def test_per_call_weight_rows_in_either_order_are_right(tmp_path, family: str) -> None:
    """x @ W^T with W passed per call: read row after row (rlx_gemv_dot_row, x within
    RLX_GV_ROW_FLOATS) and with W's rows side by side (RLX_GV_ROW_FLOATS 0), 1 to MAX_ROWS
    rows of x, k with every remainder of the accumulators' step (one float, under one vector, a vector
    but not a step, a step and a partial vector), columns split at 64 as the team's chunks;
    both within rounding of float64, and every column the same bits whichever split ran it."""
    fns = [_run(tmp_path, family, prefix) for prefix in ("#define RLX_GV_ROW_FLOATS (1 << 30)\n", "#define RLX_GV_ROW_FLOATS 0\n")]
    rng = np.random.default_rng(9)
    for m, k in itertools.product(range(1, gemv.MAX_ROWS + 1), (1, 5, 16, 24, 40, 64, 100, 777)):
        n = 150
        a = rng.standard_normal((m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        want = a.astype(np.float64) @ w.T.astype(np.float64)
        for fn in fns:
            whole = np.full((m, n), np.nan, np.float32)
            seen = np.zeros((m, n), np.int32)
            fn(m, n, k, a.ctypes.data, k, 1, w.ctypes.data, w.ctypes.data, whole.ctypes.data,
               seen.ctypes.data, 0, n, 0, 1)
            split = np.full((m, n), np.nan, np.float32)
            for n0, n1 in ((0, 64), (64, 128), (128, n)):
                fn(m, n, k, a.ctypes.data, k, 1, w.ctypes.data, w.ctypes.data,
                   split.ctypes.data, seen.ctypes.data, n0, n1, 0, 1)
            assert rel_error(whole, want) < 1e-5, (family, m, k)
            np.testing.assert_array_equal(whole, split, err_msg=str((family, m, k)))


def test_row_floats_follow_l1d_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The row-after-row bound is a quarter of the L1d the OS reports (in floats), the
    fallback without one, and RLX_GV_ROW_FLOATS when set (0: never); the renderer's macro
    carries it."""
    from rlx_core.targets.cpu.isa import detect

    monkeypatch.delenv("RLX_GV_ROW_FLOATS", raising=False)
    l1d = detect().caches.l1d
    assert gemv.row_floats() == (l1d // 16 if l1d else gemv.ROW_FLOATS)
    assert f"#define RLX_GV_ROW_FLOATS {gemv.row_floats()}\n" in gemv.defines()
    monkeypatch.setenv("RLX_GV_ROW_FLOATS", "0")
    assert gemv.row_floats() == 0 and "RLX_GV_ROW_FLOATS 0\n" in gemv.defines()


@pytest.mark.parametrize(("ports", "want"), [(None, gemv.PREFETCH), (1, 0), (2, gemv.PREFETCH)])
def test_weight_prefetch_follows_the_measured_fma_ports(
        monkeypatch: pytest.MonkeyPatch, ports: int | None, want: int) -> None:
    """On the AVX-512 path the prepacked weight's prefetch is off on a core measured at one
    FMA port, on with two or where the peaks were never measured; RLX_GV_PF overrides it, and
    the renderer's macro carries it."""
    from dataclasses import replace

    from rlx_core.targets.cpu import isa, peaks

    avx512 = isa.make({"avx512f", "avx512bw", "avx512vl", "avx2", "fma"}, "", machine="x86_64")
    monkeypatch.setattr(isa, "detect", lambda: avx512)
    row = peaks.Peaks(gflops=100.0, gbps=30.0, threads=1, cpu="test", measured="now")
    monkeypatch.setattr(peaks, "machine_peaks",
                        lambda threads=None: None if ports is None else replace(row, fma_ports=ports))
    monkeypatch.delenv("RLX_GV_PF", raising=False)
    assert gemv.prefetch() == want
    assert f"#define RLX_GV_PF {want}\n" in gemv.defines()
    monkeypatch.setenv("RLX_GV_PF", "2048")
    assert gemv.prefetch() == 2048


@pytest.mark.parametrize(("name", "fn"), [("RLX_GV_PF", gemv.prefetch),
                                          ("RLX_GV_ROW_FLOATS", gemv.row_floats),
                                          ("RLX_GV_IN_PLACE_MIN", gemv.in_place_min)])
@pytest.mark.parametrize("value", ["abc", "-1", "4k", "1.5"])
def test_a_bad_gemv_setting_is_a_typed_error(
        monkeypatch: pytest.MonkeyPatch, name: str, fn, value: str) -> None:
    """A value of RLX_GV_PF, RLX_GV_ROW_FLOATS or RLX_GV_IN_PLACE_MIN that is not a whole number >= 0 is an
    ArgumentError naming the variable (not silently the default); blank is unset."""
    from rlx_core.errors import ArgumentError

    monkeypatch.setenv(name, value)
    with pytest.raises(ArgumentError, match=name):
        fn()
    monkeypatch.setenv(name, " ")
    assert fn() >= 0


def test_the_prefetch_gate_reads_any_row_and_survives_a_bad_store(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The port count is a core's: a store holding only the all-CPU row (what `rlx peaks`
    writes by default) gates the prefetch too; a corrupt or unreadable store is 'never
    measured' (PREFETCH on the AVX-512 path, whatever path this process runs), never an
    exception."""
    import json
    from dataclasses import asdict

    from rlx_core.targets.cpu import isa, peaks

    avx512 = isa.make({"avx512f", "avx512bw", "avx512vl", "avx2", "fma"}, "", machine="x86_64")
    monkeypatch.setattr(isa, "detect", lambda: avx512)
    monkeypatch.delenv("RLX_GV_PF", raising=False)
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    store = tmp_path / "peaks.json"
    n = peaks.default_threads()
    row = peaks.Peaks(gflops=100.0, gbps=30.0, threads=n, cpu=peaks.cpu_model(),
                      measured="now", fma_ports=1)
    store.write_text(json.dumps({peaks._key(n): asdict(row)}), encoding="utf-8")
    assert gemv.prefetch() == 0
    for junk in ("{not json", "[1, 2]", json.dumps({peaks._key(1): {"probe": "x"}}),
                 json.dumps({peaks._key(1): dict(asdict(row), fma_ports="one")})):
        store.write_text(junk, encoding="utf-8")
        assert gemv.prefetch() == gemv.PREFETCH, junk
    store.unlink()
    store.mkdir()  # unreadable as a file
    assert gemv.prefetch() == gemv.PREFETCH


@pytest.mark.parametrize(("name", "fn", "most"),
                         [("RLX_GV_PF", gemv.prefetch, gemv.PREFETCH_MAX),
                          ("RLX_GV_ROW_FLOATS", gemv.row_floats, gemv.ROW_FLOATS_MAX)])
def test_a_gemv_setting_above_its_bound_is_a_typed_error(
        monkeypatch: pytest.MonkeyPatch, name: str, fn, most: int) -> None:
    """The settings become #defines in the generated C: a huge value (10**12, or one past any
    int64) is an ArgumentError naming the variable and its bound, never a number the C cannot
    hold; the bound itself is accepted and reaches the macro."""
    from rlx_core.errors import ArgumentError

    for huge in (most + 1, 10**12, 10**20):
        monkeypatch.setenv(name, str(huge))
        with pytest.raises(ArgumentError, match=rf"{name}=.*above its bound {most}"):
            fn()
    monkeypatch.setenv(name, str(most))
    assert fn() == most
    assert f"#define {name} {most}\n" in gemv.defines()


def test_the_prefetch_gate_reads_the_port_count_of_this_isa_family(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The port count is per vector width (a Zen 4 issues one 16-float FMA a cycle, two 8-float
    ones): the AVX-512 row's 1 turns the AVX-512 path's prefetch off, its 2 leaves it on. The
    AVX2 family reads without it whatever its row says (never measured, one port or two);
    RLX_GV_PF still overrides it there."""
    import json
    from dataclasses import asdict

    from rlx_core.targets.cpu import isa, peaks

    monkeypatch.delenv("RLX_GV_PF", raising=False)
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    flags = {"avx512f", "avx512bw", "avx512vl", "avx2", "fma"}
    row = peaks.Peaks(gflops=118.0, gbps=30.0, threads=1, cpu=peaks.cpu_model(),
                      measured="now", fma_ports=1, isa="avx512")
    store = tmp_path / "peaks.json"
    store.write_text(json.dumps({f"{peaks.cpu_model()}|1": asdict(row)}), encoding="utf-8")
    native, forced = isa.make(flags, "", machine="x86_64"), isa.make(flags, "avx2", machine="x86_64")
    monkeypatch.setattr(isa, "detect", lambda: native)
    assert gemv.prefetch() == 0
    two = dict(asdict(row), fma_ports=2)
    store.write_text(json.dumps({f"{peaks.cpu_model()}|1": two}), encoding="utf-8")
    assert gemv.prefetch() == gemv.PREFETCH
    monkeypatch.setattr(isa, "detect", lambda: forced)
    assert gemv.prefetch() == 0  # the AVX2 row never measured: the family decides
    for ports in (1, 2):  # a core with one or two 256-bit FMA ports
        avx2 = dict(asdict(row), fma_ports=ports, isa="avx2")
        store.write_text(json.dumps({f"{peaks.cpu_model()}|1": two,
                                     f"{peaks.cpu_model()}|1|avx2": avx2}), encoding="utf-8")
        assert gemv.prefetch() == 0, ports
    monkeypatch.setenv("RLX_GV_PF", "4096")
    assert gemv.prefetch() == 4096


def test_a_weight_over_the_in_place_bound_is_read_where_it_lies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A GEMV's weight larger than gemv.in_place_min (L3; here RLX_GV_IN_PLACE_MIN) is not
    prepacked: x @ W^T reads W's rows in place (rlx_gemv). A smaller weight, W (not W^T: rows
    not contiguous along k), more rows than MAX_ROWS and RLX_GV_IN_PLACE_MIN=0 keep the
    panels. Results within 1e-5 of numpy float64 either way."""
    skip_unless_own_sgemm()
    from rlx_core.targets.cpu.isa import detect

    monkeypatch.delenv("RLX_GV_IN_PLACE_MIN", raising=False)
    assert gemv.in_place_min() == detect().caches.l3
    rng = np.random.default_rng(5)
    k, n = 200, 300  # 240,000 bytes of weight
    w = rng.standard_normal((n, k), np.float32)
    wt = np.ascontiguousarray(w.T)
    b = rng.standard_normal(n).astype(np.float32)
    xs = [rng.standard_normal((m, k), np.float32) for m in (1, gemv.MAX_ROWS, gemv.MAX_ROWS + 1)]
    assert gemv.reads_in_place(1, n, k, 1, 1, 1) == (0 < detect().caches.l3 < 4 * n * k)
    for bound, in_place in (("100000", True), ("240000", False), ("0", False)):
        monkeypatch.setenv("RLX_GV_IN_PLACE_MIN", bound)
        for x in xs:
            exe = rlx.compile(lambda a, w=w, b=b: rlx.nn.linear(a, w, b), x, target="cpu",
                              record=False)
            packed = exe.program.info["prepacked"]
            gemv_rows = x.shape[0] <= gemv.MAX_ROWS
            assert (not packed) == (in_place and gemv_rows), (bound, x.shape)
            want = x.astype(np.float64) @ w.T.astype(np.float64) + b
            assert rel_error(exe(x), want) < 1e-5
        # W as op(B) (x @ W with W k x n): its k runs down the columns, so it keeps the panels
        exe = rlx.compile(lambda a, wt=wt: a @ wt, xs[0], target="cpu", record=False)
        assert exe.program.info["prepacked"]
        assert rel_error(exe(xs[0]), xs[0].astype(np.float64) @ wt.astype(np.float64)) < 1e-5
