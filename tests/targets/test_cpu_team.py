"""Team mode on the CPU target: one parallel region per call, kernels split over its threads,
serial kernels on thread 0, barriers between (rlx_core/targets/cpu/team.py)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import team
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.late_thread import team_delay

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _body(*lines: str) -> list[str]:
    return ["    " + ln if ln else "" for ln in lines]


def test_team_safe_accepts_worksharing_loops_gemm_blocks_and_barriers() -> None:
    body = _body("float* restrict dot_c = (float*)(scratch + 0);",
                 team.GEMM_BLOCK, "    call();", "}", team.SYNC,
                 team.FOR_PRAGMA + " collapse(2)", "for (int64_t i = 0; i < 4; ++i) {",
                 "    x[i] = 0;", "}",
                 team.SINGLE_PRAGMA, "for (int64_t j = 0; j < 2; ++j) {", "    y[j] = 1;", "}")
    assert team.team_safe(body)


@pytest.mark.parametrize("body", [
    _body("memcpy(out0, in0, 16);"),  # a serial statement
    _body("for (int64_t i = 0; i < 4; ++i) {", "    x[i] = 0;", "}"),  # a loop without pragma
    _body(team.FOR_PRAGMA, "x[0] = 1;"),  # a pragma not followed by a loop
    _body("if (tid == 0) {", "    f();", "}"),
])
def test_team_safe_rejects_anything_else(body: list[str]) -> None:
    assert not team.team_safe(body)


def test_team_calls_put_barriers_only_where_a_team_kernel_is_involved() -> None:
    calls = ["    a();", "    b();", "    c();", "    d();"]
    out = team.team_calls(calls, [False, False, True, False])
    text = "\n".join(out)
    assert text.count(team.SYNC) == 2  # before c (after serial b) and after c
    assert "if (rlx_team_tid == 0) a();" in text and "if (rlx_team_tid == 0) d();" in text
    assert "        c();" in out


@needs_cpu
@pytest.mark.parametrize("n", [1, 2, 3])
def test_mixed_team_and_serial_kernels_match_numpy_at_any_thread_count(n: int,
                                                                       threads) -> None:
    threads(n)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((96, 64), np.float32)
    w = rng.standard_normal((64, 80), np.float32)
    idx = rng.integers(0, 96, 40).astype(np.int32)

    def f(a, b, i):
        h = rlx.nn.relu(a @ b + 1.0)           # team: GEMM block, barrier, epilogue loop
        g = rlx.take(h, i, axis=0)             # serial: the first thread runs the gather
        return rlx.nn.softmax(g * 0.5, axis=-1), h.sum()

    exe = rlx.compile(f, x, w, idx, target="cpu", record=False)
    src = exe.program.info["source"]
    assert sum(src.count(m) for m in team.REGION_MARKS) == 1  # one region per call
    assert "rlx_team_serial(" in src and "/* team gemm */" in src  # serial: one claimed chunk
    got_s, got_t = exe(x, w, idx)
    h = np.maximum(x.astype(np.float64) @ w + 1.0, 0.0)
    g = h[idx] * 0.5
    e = np.exp(g - g.max(-1, keepdims=True))
    np.testing.assert_allclose(got_s, e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got_t, h.sum(), rtol=1e-4)


@needs_cpu
@pytest.mark.parametrize("n", [1, 2])
def test_profiling_times_kernels_inside_the_one_region(monkeypatch, threads, n: int) -> None:
    monkeypatch.setenv("RLX_CPU_PROFILE", "1")
    threads(n)
    x = np.ones((256, 256), np.float32)
    w = np.full((256, 256), 0.5, np.float32)
    exe = rlx.compile(lambda a, b: (rlx.nn.relu(a @ b) * 2.0).sum(axis=1), x, w,
                      target="cpu", record=False)
    src = exe.program.info["source"]
    assert sum(src.count(m) for m in team.REGION_MARKS) == 1  # profiling keeps team mode
    assert "rlx_team_t0" in src
    before = exe.program.info["profile"]()  # the counters live in the (shared) library
    for _ in range(2):
        np.testing.assert_allclose(exe(x, w), np.full(256, 256 * 256.0, np.float32))
    rows = exe.program.info["profile"]()
    assert set(rows) == {k.name for k in exe.lir.kernels}
    # thread 0 counts, once per call
    assert all(r["calls"] - before[k]["calls"] == 2 for k, r in rows.items())
    assert all(r["seconds"] > before[k]["seconds"] for k, r in rows.items())


def test_timed_team_calls_end_every_team_kernel_in_a_barrier() -> None:
    out = team.team_calls(["    a();", "    b();"], [False, True],
                          timer=lambda i: (f"start({i});", f"stop({i});"))
    text = "\n".join(out)
    # a (serial) then barrier (b is a team kernel), b then barrier (timed: its wait counts)
    assert text.count(team.SYNC) == 2
    assert text.index("stop(1);") > text.rindex(team.SYNC)
    assert "if (rlx_team_tid == 0) start(0);" in text


def _thread_epilogue(src: str) -> str:
    """The code that finishes a thread's block of C: the GEMM block itself, plus the tile
    function (cpu/tile_epilogue.py) when the block hands one to the own kernel."""
    block = src[src.index(team.GEMM_BLOCK_HEAD):]
    if "_tile, &tctx)" not in block:
        return block
    return src[:src.index(team.GEMM_BLOCK_HEAD)] + block


def _matmul_kernel_source(exe) -> str:
    (name,) = [k.name for k in exe.lir.kernels if k.kind == "matmul"]
    return exe.program.sources[name]


@needs_cpu
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("case", ["2d", "batched", "two_free_dims"])
def test_gemm_epilogues_run_in_each_threads_block(case: str, n: int, threads) -> None:
    threads(n)
    rng = np.random.default_rng(11)
    if case == "2d":  # rows of C split over the team: the epilogue follows in each block
        a, w = rng.standard_normal((100, 64), np.float32), rng.standard_normal((64, 96), np.float32)
    elif case == "batched":  # whole batches per thread
        a = rng.standard_normal((5, 48, 64), np.float32)
        w = rng.standard_normal((5, 64, 96), np.float32)
    else:  # C's rows span two dimensions: each thread takes whole 40-row slices of the outer
        # (B's rows 112 floats, an odd number of cache lines apart: read in place, so the GEMM
        # is split by rows, not packed per column chunk; see sgemm.reads_b_in_place)
        a, w = rng.standard_normal((4, 40, 64), np.float32), rng.standard_normal((64, 112), np.float32)
    bias = rng.standard_normal(w.shape[-1]).astype(np.float32)

    def f(x, y, b):
        return rlx.nn.relu(x @ y + b) * 2.0

    exe = rlx.compile(f, a, w, bias, target="cpu", record=False)
    src = _matmul_kernel_source(exe)
    gemm_block = src[src.index(team.GEMM_BLOCK_HEAD):]
    assert team.SYNC not in src, src  # no barrier between the GEMM and its epilogue
    # the relu sits inside the per-thread GEMM block, or in the tile function it passes
    assert "rlx_max_f" in _thread_epilogue(src), src
    if case == "two_free_dims":  # row blocks are multiples of lcm(16, 40) rows
        assert "/ 80 * 80" in gemm_block, gemm_block
    want = np.maximum(a.astype(np.float64) @ w + bias, 0.0) * 2.0
    np.testing.assert_allclose(exe(a, w, bias), want, rtol=1e-4, atol=1e-4)


@needs_cpu
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("weights", ["param", "input"])
def test_large_gemm_epilogues_run_per_tile_of_the_own_kernel(weights: str, n: int,
                                                             threads) -> None:
    """C past TILE_MIN_BYTES: each thread computes its block in tiles of TILE_COLS columns
    (and, with prepacked B, TILE_ROWS-ish rows), each tile's epilogue right after it; rows
    over two dimensions (whole 40-row slices), a column count that is no multiple of the
    tile, a residual and a bias."""
    from rlx_core.targets.cpu import blas, sgemm
    from rlx_core.targets.cpu.toolchain import find_compiler

    if blas.find_blas()[0] is None or not sgemm.available(find_compiler())[0]:
        pytest.skip("the own sgemm is not used here: tiles are its feature")
    threads(n)
    rng = np.random.default_rng(21)
    a = rng.standard_normal((24, 40, 64), np.float32)
    w = rng.standard_normal((600, 64), np.float32)  # linear: 600 columns, 2 tiles and a part
    bias, res = rng.standard_normal(600).astype(np.float32), rng.standard_normal(
        (24, 40, 600)).astype(np.float32)
    assert a.shape[0] * a.shape[1] * 600 * 4 > blas.TILE_MIN_BYTES

    if weights == "param":
        def f(x, r):
            return rlx.nn.relu(rlx.nn.linear(x, rlx.param(w, "w"), rlx.param(bias, "b"))) + r
        exe = rlx.compile(f, a, res, target="cpu", record=False)
        got = exe(a, res)
    else:
        def f(x, ww, b, r):
            return rlx.nn.relu(rlx.nn.linear(x, ww, b)) + r
        exe = rlx.compile(f, a, w, bias, res, target="cpu", record=False)
        got = exe(a, w, bias, res)
    src = _matmul_kernel_source(exe)
    if weights == "param":  # claimed in blocks of rows x TILE_COLS columns (_block_chunks)
        assert f"* {blas.TILE_COLS}, je = " in src and "rb += " in src, src
    else:  # row tiles only re-read packed panels
        assert f"jc += {blas.TILE_COLS}" in src and "rb += " not in src, src
    want = np.maximum(a.astype(np.float64) @ w.T + bias, 0.0) + res
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_cpu
def test_large_gemms_on_packed_weights_claim_blocks_with_the_same_bits(threads) -> None:
    """A GEMM of more than COLUMN_ROWS rows on a prepacked weight wider than TILE_COLS is
    claimed in (column block, row block) chunks (blas._block_chunks): here 8 x 40 rows in whole
    40-row slices (the epilogue's (batch, seq) rows) and 600 columns (two blocks of 256 and
    one of 88). The result has the same bits at 1, 2 and 3 threads, and when the worker comes
    late and thread 0 runs most chunks."""
    from rlx_core.targets.cpu import blas, sgemm
    from rlx_core.targets.cpu.toolchain import find_compiler

    if blas.find_blas()[0] is None or not sgemm.available(find_compiler())[0]:
        pytest.skip("the own sgemm is not used here: block chunks are its feature")
    rng = np.random.default_rng(29)
    a = rng.standard_normal((8, 40, 64), np.float32)
    w, bias = rng.standard_normal((600, 64), np.float32), rng.standard_normal(600, np.float32)

    def f(x):
        return rlx.nn.gelu(rlx.nn.linear(x, rlx.param(w, "w"), rlx.param(bias, "b")))

    threads(2)
    exe = rlx.compile(f, a, target="cpu", record=False)
    src = _matmul_kernel_source(exe)
    # 320 rows in 4 blocks of 80 (whole slices, a multiple of 16) x 3 column blocks
    assert f"* {blas.TILE_COLS}, je = " in src and "rlx_team_take(rlx_work, 1, 6, 12)" in src, src
    import math
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    np.testing.assert_allclose(exe(a), gelu(a.astype(np.float64) @ w.T + bias),
                               rtol=1e-4, atol=1e-4)
    outs = {}
    for n in (1, 2, 3):
        threads(n)
        outs[n] = exe(a)
    delay = team_delay(exe, threads)
    delay(1, 20_000)  # the worker comes 20 ms late
    late = exe(a)
    for n, got in outs.items():
        assert np.array_equal(got, outs[1]), n
    assert np.array_equal(late, outs[1])


@needs_cpu
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 2])
def test_small_gemms_on_packed_weights_share_out_column_chunks(batch: int, n: int,
                                                               threads) -> None:
    """A GEMM of at most COLUMN_ROWS rows on a prepacked weight: threads claim column chunks
    (team_runtime.rlx_team_take) and each chunk's epilogue follows it; 200 columns is three whole
    chunks and a part. Two such GEMMs in a row claim from counters of their own, and every
    call starts them from zero again."""
    from rlx_core.targets.cpu import blas, sgemm
    from rlx_core.targets.cpu.toolchain import find_compiler

    if blas.find_blas()[0] is None or not sgemm.available(find_compiler())[0]:
        pytest.skip("the own sgemm is not used here: column chunks are its feature")
    threads(n)
    rng = np.random.default_rng(23)
    x = rng.standard_normal((batch, 60, 96), np.float32)
    w1, b1 = rng.standard_normal((200, 96), np.float32), rng.standard_normal(200, np.float32)
    w2 = rng.standard_normal((160, 200), np.float32) / 8

    def f(a):
        h = rlx.nn.gelu(rlx.nn.linear(a, rlx.param(w1, "w1"), rlx.param(b1, "b1")))
        return rlx.nn.linear(h, rlx.param(w2, "w2")) + 1.0

    exe = rlx.compile(f, x, target="cpu", record=False)
    mm = [exe.program.sources[k.name] for k in exe.lir.kernels if k.kind == "matmul"]
    assert len(mm) == 2 and all("rlx_team_take(rlx_work, 1, " in s for s in mm), mm
    import math
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    want = gelu(x.astype(np.float64) @ w1.T + b1) @ w2.T + 1.0
    for _ in range(3):
        np.testing.assert_allclose(exe(x), want, rtol=1e-4, atol=1e-4)


@needs_cpu
@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("m", [2, 5, 8, 15])
def test_few_row_gemms_on_packed_weights_share_column_chunks_with_the_same_bits(
        m: int, isa: str, threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-batch GEMM of 2-15 rows on a prepacked weight (MiniLM at one sentence of 8
    tokens) is claimed in column chunks like one of 16+ rows, not left to thread 0 (the row
    split's unit is 16 rows): each chunk runs the kernel's edge tiles of m rows. Its bits
    equal the one-thread call that blas._alone made before, at 1, 2 and 3 threads and with
    the worker late. With a bias + GELU epilogue, narrowed to each chunk, the bits are the
    same at any thread count, and the same as the one-chunk kernel's (both render the GEMM
    epilogue's erf). (2 rows: with RLX_NO_GEMV, else the GEMV takes it.)"""
    from rlx_core.targets.cpu import blas
    from rlx_core.targets.cpu import isa as cpu_isa
    from tests.targets.own_sgemm import skip_unless_own_sgemm

    skip_unless_own_sgemm()
    if isa != "native":
        if isa not in cpu_isa.forced_paths():
            pytest.skip(f"this CPU cannot run the {isa} path")
        monkeypatch.setenv("RLX_CPU_ISA", isa)
    monkeypatch.setenv("RLX_NO_GEMV", "1")
    rng = np.random.default_rng(31 + m)
    x = rng.standard_normal((m, 160), np.float32)
    w, bias = rng.standard_normal((330, 160), np.float32), rng.standard_normal(330, np.float32)

    def plain(a):
        return rlx.nn.linear(a, rlx.param(w, "w"))

    def gelu(a):
        return rlx.nn.gelu(rlx.nn.linear(a, rlx.param(w, "w"), rlx.param(bias, "b")))

    threads(2)
    exes = {f: rlx.compile(f, x, target="cpu", record=False) for f in (plain, gelu)}
    claimed = blas._claims_columns
    # the build before: one batch of fewer than 16 rows ran on thread 0 alone
    monkeypatch.setattr(blas, "_claims_columns",
                        lambda spec, *a: spec.m >= 16 and claimed(spec, *a))
    alone = {f: rlx.compile(f, x, target="cpu", record=False) for f in (plain, gelu)}
    monkeypatch.setattr(blas, "_claims_columns", claimed)
    for f, exe in exes.items():
        src = _matmul_kernel_source(exe)
        # 330 columns: five 64-column chunks and a part
        assert "rlx_team_take(rlx_work, 1, 3, 6)" in src and "j0 = ch * 64" in src, src
        assert "rlx_team_take(" not in _matmul_kernel_source(alone[f])
        before = alone[f](x)
        outs = []
        for n in (1, 2, 3):
            threads(n)
            outs.append(exe(x))
        team_delay(exe, threads)(1, 20_000)  # the worker comes 20 ms late
        outs.append(exe(x))
        for got in outs:
            assert np.array_equal(got, outs[0]), f.__name__
        # the GEMM's columns are computed as in the one-thread call, the GELU with one erf
        assert np.array_equal(outs[0], before), f.__name__
    import math
    ref = x.astype(np.float64) @ w.T
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(exes[plain](x), ref, rtol=1e-4, atol=1e-4)
    z = ref + bias
    np.testing.assert_allclose(exes[gelu](x), 0.5 * z * (1 + erf(z / math.sqrt(2))),
                               rtol=1e-4, atol=1e-4)



def test_claimed_turns_worksharing_loops_and_barriers_into_claimed_chunks() -> None:
    body = _body("float* restrict t = (float*)(scratch + 0);",
                 team.FOR_PRAGMA + " collapse(2)", "for (int64_t i = 0; i < 4; ++i) {",
                 "    for (int64_t j = 0; j < 10; ++j) {",
                 "        for (int64_t k = 0; k < 3; ++k) x[(i * 10 + j) * 3 + k] = 0;",
                 "    }", "}",
                 team.SYNC,
                 team.SINGLE_PRAGMA, "for (int64_t j = 0; j < 2; ++j) {", "    y[j] = x[j];", "}")
    out = team.claimed(body)
    assert out is not None
    text = "\n".join(out)
    # 40 iterations of (i, j): 14 chunks of 3 (the last one short), then one chunk
    # loop 1 (thread 0 starts on chunks 0-6, thread 1 on 7-13), loop 2 of one chunk
    assert "rlx_team_take(rlx_work, 1, 7, 14)" in text and "rlx_i0 = ch * 3" in text
    assert "i = rlx_it / 10, j = rlx_it % 10;" in text
    assert "rlx_team_done(rlx_work, &rlx_got, 14);" in text  # the barrier: a phase's end
    assert "rlx_team_take(rlx_work, 2, 1, 1)" in text and text.endswith("rlx_team_done_last(rlx_work, &rlx_got, 15);")
    assert team.SYNC not in text and "#pragma omp" not in text
    assert text.count("{") == text.count("}")


@pytest.mark.parametrize("body", [
    _body(team.FOR_PRAGMA, "for (int64_t i = 0; i < n; ++i) {", "    x[i] = 0;", "}"),
    _body(team.FOR_PRAGMA + " reduction(+:s)", "for (int64_t i = 0; i < 4; ++i) {", "    s += 1;",
          "}"),
    _body(team.GEMM_BLOCK, "    call();", "}"),  # a GEMM block without claimed chunks
    _body(team.TEAM_BLOCK, "    solve();", "}"),
])
def test_claimed_leaves_other_shapes_to_static_shares(body: list[str]) -> None:
    assert team.team_safe(body)
    assert team.claimed(body) is None


@needs_cpu
def test_claimed_chunks_give_the_same_bits_at_any_thread_count(threads) -> None:
    """Row chunks of a GEMM, claimed by whichever thread: each element of C is computed the
    same way (same blocking, same order), so 1, 2 and 3 threads agree bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 96), np.float32)
    w = rng.standard_normal((96, 200), np.float32)

    def f(a, b):
        return rlx.nn.softmax(rlx.nn.relu(a @ b) * 0.5 + 1.0, axis=-1)

    exe = rlx.compile(f, x, w, target="cpu", record=False)
    src = exe.program.info["source"]
    assert team.LAST_DONE in src and team.SYNC not in src  # every kernel claims
    got = []
    for n in (1, 2, 3):
        threads(n)
        got.append(exe(x, w))
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


def test_claimed_loops_keep_a_literal_step() -> None:
    body = _body(team.FOR_PRAGMA, "for (int64_t c = 0; c < 384; c += 96) {", "    f(c);", "}")
    text = "\n".join(team.claimed(body) or [])
    assert "rlx_team_take(rlx_work, 1, 2, 4)" in text and "const int64_t c = (rlx_it) * 96;" in text


def test_one_chunk_is_a_claimed_body_of_one_chunk_in_all() -> None:
    single = _body(team.SINGLE_PRAGMA, "for (int64_t j = 0; j < 2; ++j) {", "    y[j] = x[j];", "}")
    assert team.one_chunk(team.claimed(single))
    split = _body(team.FOR_PRAGMA, "for (int64_t i = 0; i < 64; ++i) {", "    x[i] = 0;", "}")
    assert not team.one_chunk(team.claimed(split))  # 16 chunks
    # two one-chunk loops are two chunks: either thread may run each, so it stays a team kernel
    assert not team.one_chunk(team.claimed(single + [team.SYNC] + single))
    assert not team.one_chunk(None) and not team.one_chunk([])


@needs_cpu
@pytest.mark.parametrize("n", [1, 2])
def test_one_chunk_kernels_join_one_serial_chunk(n: int, threads) -> None:
    """Small kernels after a team GEMM (a 128 x 10 softmax cross-entropy's, each one chunk of
    work) run back to back as one claimed chunk, not one phase each; the results match."""
    threads(n)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((128, 256), np.float32)
    w = rng.standard_normal((256, 128), np.float32)
    v = rng.standard_normal((128, 10), np.float32)

    def f(a, b, c):
        h = rlx.nn.relu(a @ b)                  # team: a GEMM split over the threads
        z = h @ c                               # 128 x 10: one chunk each from here on
        e = rlx.exp(z - z.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
        return (p * 2.0 - 1.0).sum(axis=0)

    exe = rlx.compile(f, x, w, v, target="cpu", record=False)
    src = exe.program.info["source"]
    assert sum(src.count(m) for m in team.REGION_MARKS) == 1
    # no kernel of one chunk is a phase of its own: every claim loop of one chunk is gone
    assert ", 1, 1)) >= 0" not in src and "rlx_team_serial(" in src
    got = exe(x, w, v)
    z = np.maximum(x.astype(np.float64) @ w, 0.0) @ v
    e = np.exp(z - z.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True) * 2.0 - 1.0).sum(0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_cpu
@pytest.mark.parametrize("shape", ["wide", "deep"])
def test_wide_or_deep_few_row_gemms_claim_other_chunks_with_the_same_bits(
        shape: str, threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 rows into 1024 columns (MiniLM's FFN1 at one sentence is 8 x 384 x 1536): claimed
    in chunks of blas.WIDE_CHUNK columns, fewer claims than of COLUMN_CHUNK; 8 x 1024 x 192
    (its FFN2 is 8 x 1536 x 384) in chunks of blas.DEEP_CHUNK. The bits are those of the
    64-column chunks at 1, 2 and 3 threads and with the worker late, bias and GELU epilogue
    included. A GEMM of 16 rows keeps 64-column chunks."""
    from rlx_core.targets.cpu import blas
    from tests.targets.own_sgemm import skip_unless_own_sgemm

    skip_unless_own_sgemm()
    k, n, width, chunks, name = ((160, 1024, 128, 8, "WIDE_CHUNK") if shape == "wide"
                                 else (1024, 192, 32, 6, "DEEP_CHUNK"))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, k), np.float32)
    w, bias = rng.standard_normal((n, k), np.float32), rng.standard_normal(n, np.float32)

    def gelu(a):
        return rlx.nn.gelu(rlx.nn.linear(a, rlx.param(w, "w"), rlx.param(bias, "b")))

    threads(2)
    exe = rlx.compile(gelu, x, target="cpu", record=False)
    sixteen = rlx.compile(gelu, np.concatenate([x, x]), target="cpu", record=False)
    monkeypatch.setattr(blas, name, blas.COLUMN_CHUNK)
    narrow = rlx.compile(gelu, x, target="cpu", record=False)
    src = _matmul_kernel_source(exe)
    take = f"rlx_team_take(rlx_work, 1, {chunks // 2}, {chunks})"
    assert take in src and f"j0 = ch * {width}" in src, src
    assert "j0 = ch * 64" in _matmul_kernel_source(narrow)
    assert "j0 = ch * 64" in _matmul_kernel_source(sixteen)
    want = narrow(x)
    for t in (1, 2, 3):
        threads(t)
        assert np.array_equal(exe(x), want), t
    team_delay(exe, threads)(1, 20_000)  # the worker comes 20 ms late
    assert np.array_equal(exe(x), want)
    import math
    z = x.astype(np.float64) @ w.T + bias
    np.testing.assert_allclose(want, 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2))),
                               rtol=1e-4, atol=1e-4)
