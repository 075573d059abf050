"""The affine claim order of a team kernel's chunks (rlx_core/targets/cpu/team_runtime.py,
rlx_team_take), run as C on one thread that plays each team thread in turn: each thread starts
on its own share (thread 0 the first half, thread 1 the rest), the same chunks every call,
then steals what is left of the other's; loops follow each other on the kernel's one counter;
a thread of another call claims nothing."""

from __future__ import annotations

import ctypes

from rlx_core.targets.cpu.team_runtime import BARRIER_C
from tests.targets.own_sgemm import build_harness

HARNESS = BARRIER_C + r"""
static atomic_llong work[2];
/* a new call's generation on the counters (rlx_team_next) */
void begin(long long gen) {
    atomic_store(&rlx_team_gen, gen - 1);
    rlx_team_next(work, 2);
    atomic_store(&rlx_team_gen, gen);
}
/* thread `tid` of call `gen` claims one chunk of loop `loop` (-1: none left) */
int take(int tid, long long gen, int loop, int half, int chunks) {
    rlx_team_me = tid;
    rlx_team_my = gen << 32;
    return rlx_team_take(work, loop, half, chunks);
}
"""


def _lib(tmp_path):
    lib = build_harness(tmp_path, "c", HARNESS)
    lib.take.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_int,
                         ctypes.c_int]
    lib.begin.argtypes = [ctypes.c_longlong]
    return lib


def test_each_thread_starts_on_its_own_share_then_steals(tmp_path) -> None:
    lib = _lib(tmp_path)
    for gen in (1, 2):  # the same chunks every call
        lib.begin(gen)
        # thread 1 comes first: its own half (4-7), in order, not thread 0's first chunk
        assert [lib.take(1, gen, 1, 4, 8) for _ in range(2)] == [4, 5]
        assert [lib.take(0, gen, 1, 4, 8) for _ in range(4)] == [0, 1, 2, 3]
        # thread 0's share is done: it steals thread 1's next chunks
        assert lib.take(0, gen, 1, 4, 8) == 6
        assert lib.take(1, gen, 1, 4, 8) == 7
        assert lib.take(0, gen, 1, 4, 8) == -1 and lib.take(1, gen, 1, 4, 8) == -1


def test_a_descheduled_threads_share_goes_to_the_other(tmp_path) -> None:
    lib = _lib(tmp_path)
    lib.begin(1)
    assert [lib.take(0, 1, 1, 3, 5) for _ in range(6)] == [0, 1, 2, 3, 4, -1]
    lib.begin(2)
    assert [lib.take(1, 2, 1, 3, 5) for _ in range(6)] == [3, 4, 0, 1, 2, -1]
    # threads past the first two claim like thread 0 (even) or thread 1 (odd)
    lib.begin(3)
    assert lib.take(3, 3, 1, 3, 5) == 3 and lib.take(2, 3, 1, 3, 5) == 0


def test_loops_follow_each_other_and_late_threads_claim_nothing(tmp_path) -> None:
    lib = _lib(tmp_path)
    lib.begin(5)
    assert lib.take(0, 5, 1, 1, 2) == 0 and lib.take(1, 5, 1, 1, 2) == 1
    assert lib.take(0, 5, 1, 1, 2) == -1
    # the first thread at loop 2 starts it; a thread still at loop 1 then finds it over
    assert lib.take(1, 5, 2, 2, 3) == 2
    assert lib.take(0, 5, 1, 1, 2) == -1
    assert [lib.take(0, 5, 2, 2, 3) for _ in range(3)] == [0, 1, -1]
    # a thread of the previous call (generation 4) claims nothing of this one, nor of the next
    assert lib.take(1, 4, 2, 2, 3) == -1
    lib.begin(6)
    assert lib.take(0, 5, 1, 1, 2) == -1 and lib.take(0, 6, 1, 1, 2) == 0
