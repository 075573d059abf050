"""Claimed kernels that share a phase: a kernel the next one neither reads nor overwrites ends
without waiting for the other threads' chunks, and the wait comes before the first kernel that
conflicts with it (team_waits.phases, rlx_team_defer / rlx_team_finish in cpu/team_runtime.py)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import team, team_waits
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.late_thread import team_delay

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

WHOLE = 1 << 62


def _arena(lo: int, hi: int) -> team_waits.Region:
    return ("arena", 0, lo, hi)


def _feet(reads=(), writes=()) -> team_waits.Footprint:
    return team_waits.Footprint(tuple(reads), tuple(writes))


def test_footprints_conflict_only_where_a_write_meets_a_read_or_write() -> None:
    a = _feet([_arena(0, 64), ("input", 0, 0, WHOLE)], [_arena(64, 128)])
    assert not a.conflicts(_feet([_arena(0, 64), ("input", 0, 0, WHOLE)], [_arena(128, 256)]))
    assert a.conflicts(_feet([_arena(100, 104)], [_arena(200, 300)]))  # reads what a writes
    assert a.conflicts(_feet([], [_arena(60, 61)]))  # overwrites what a reads (arena reuse)
    assert a.conflicts(_feet([], [_arena(127, 300)]))  # both write one byte
    assert not a.conflicts(_feet([("input", 1, 0, WHOLE)], [("output", 0, 0, WHOLE)]))
    assert a.conflicts(_feet([], [("input", 0, 0, WHOLE)]))  # an output over a donated input


def test_phases_defer_a_wait_to_the_first_kernel_that_needs_it() -> None:
    # k0 writes A; k1 and k2 read A and write B, C; k3 reads B; k4 reads C
    feet = [_feet([], [_arena(0, 100)]),
            _feet([_arena(0, 100)], [_arena(100, 200)]),
            _feet([_arena(0, 100)], [_arena(200, 300)]),
            _feet([_arena(100, 200)], [_arena(300, 400)]),
            _feet([_arena(200, 300)], [("output", 0, 0, WHOLE)])]
    team_, claims, ends = [True] * 5, [True] * 5, [4] * 5
    defer, finish = team_waits.phases(list(range(5)), team_, claims, feet, ends)
    assert defer == {1, 2, 3}  # k0 feeds k1; k4 is last and waits for itself
    assert finish == {3: [1], 4: [2], -1: [3]}


def test_unknown_footprints_serial_runs_and_static_kernels_keep_their_waits() -> None:
    free = [_feet([], [_arena(100 * i, 100 * i + 50)]) for i in range(5)]
    live = list(range(5))
    # an unknown footprint (a packed weight's argument) conflicts with everything
    feet = [*free[:2], None, *free[3:]]
    defer, finish = team_waits.phases(live, [True] * 5, [True] * 5, feet, [4] * 5)
    assert 1 not in defer and 2 not in defer and finish.get(2) in (None, [0])
    # a kernel of static shares waits for every deferred kernel before it (its barrier
    # counts threads, not chunks), and nothing before it defers its own wait into it
    defer, finish = team_waits.phases(live, [True] * 5, [True, True, False, True, True], free,
                                      [4] * 5)
    assert 1 not in defer and finish.get(2) == [0]
    # a serial run is one unit: k1, k2 serial between independent claimed kernels; it ends
    # without a wait too (one thread runs it, the others go on), waited for as one chunk
    defer, finish = team_waits.phases(live, [True, False, False, True, True],
                                      [True, False, False, True, True], free, [4, None, None, 4, 4])
    assert defer == {0, 1, 3} and finish == {-1: [0, 1, 3]}
    text = "\n".join(team.team_calls([f"    k{i}();" for i in live], [True, False, False, True,
                                     True], None, [True, False, False, True, True], "p", free,
                                     [4, None, None, 4, 4]))
    assert "rlx_team_defer = 1; rlx_team_done_last(p_work + 2, &rlx_g, 1);" in text
    assert "rlx_team_finish(p_work + 2, 1);" in text
    # the serial run's union is its footprint: k2 writes what k3 reads, so k1-k2 wait there
    feet = [*free[:3], _feet([free[2].writes[0]], [_arena(900, 950)]), free[4]]
    defer, finish = team_waits.phases(live, [True, False, False, True, True],
                                      [True, False, False, True, True], feet, [4, None, None, 4, 4])
    assert 1 not in defer
    # the timed build (per-kernel timers) never defers
    text = "\n".join(team.team_calls([f"    k{i}();" for i in live], [True] * 5,
                                     lambda i: ("t0();", "t1();"), [True] * 5, "p", free,
                                     [4] * 5))
    assert "rlx_team_defer" not in text and "rlx_team_finish" not in text


@needs_cpu
def test_independent_gemms_share_a_phase_and_agree_at_any_thread_count(threads) -> None:
    """Two GEMMs on one operand (as the MLP step's input gradient and head weight gradient
    on its output gradient), then a GEMM reading the first: the first two end without a
    wait, the third waits for the first. 1, 2 and 3 threads, and a worker 20 ms late, give
    the same bits."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((256, 96), np.float32)
    b = rng.standard_normal((96, 192), np.float32)
    c = rng.standard_normal((96, 192), np.float32)
    d = rng.standard_normal((192, 64), np.float32)

    def f(x, p, q, r):
        return rlx.nn.relu(x @ q), rlx.nn.relu(x @ p) @ r

    threads(2)
    exe = rlx.compile(f, a, b, c, d, target="cpu", record=False)
    src = exe.program.info["source"]
    assert "rlx_team_defer = 1;" in src and "rlx_team_finish(" in src
    a64 = a.astype(np.float64)
    got = exe(a, b, c, d)
    np.testing.assert_allclose(got[0], np.maximum(a64 @ c, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], np.maximum(a64 @ b, 0) @ d, rtol=1e-4, atol=1e-3)
    outs = {}
    for n in (1, 2, 3):
        threads(n)
        outs[n] = exe(a, b, c, d)
    delay = team_delay(exe, threads)
    for tid in (0, 1):  # thread 0 or the worker comes 20 ms late
        delay(tid, 20_000)
        late = exe(a, b, c, d)
        assert all(np.array_equal(x, y) for x, y in zip(late, outs[1], strict=True)), tid
    for n, got in outs.items():
        assert all(np.array_equal(x, y) for x, y in zip(got, outs[1], strict=True)), n


@needs_cpu
def test_gemms_on_prepacked_weights_share_a_phase(threads) -> None:
    """Q, K and V of an attention: GEMMs on one activation, each with a constant weight the
    program prepacks. The packed bytes are a read no kernel writes (packed before the team
    starts), so the first two end without a wait; 1, 2 and 3 threads and a late thread give
    the same bits."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((256, 96), np.float32)
    wq, wk, wv = (rng.standard_normal((96, 128), np.float32) for _ in range(3))

    def qkv(a):
        return rlx.nn.relu(a @ wq), rlx.nn.relu(a @ wk), rlx.nn.relu(a @ wv)

    threads(2)
    exe = rlx.compile(qkv, x, target="cpu", record=False)
    src = exe.program.info["source"]
    assert "_PACKED_DATA +" in src  # the weights are prepacked
    assert src.count("rlx_team_defer = 1;") >= 2 and "rlx_team_finish(" in src
    x64 = x.astype(np.float64)
    got = exe(x)
    for out, w in zip(got, (wq, wk, wv), strict=True):
        np.testing.assert_allclose(out, np.maximum(x64 @ w, 0), rtol=1e-4, atol=1e-4)
    outs = {}
    for n in (1, 2, 3):
        threads(n)
        outs[n] = exe(x)
    delay = team_delay(exe, threads)
    for tid in (0, 1):
        delay(tid, 20_000)
        late = exe(x)
        assert all(np.array_equal(a, b) for a, b in zip(late, outs[1], strict=True)), tid
    for n, out in outs.items():
        assert all(np.array_equal(a, b) for a, b in zip(out, outs[1], strict=True)), n
