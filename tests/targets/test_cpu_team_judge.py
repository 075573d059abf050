"""The team's judge (rlx_core/targets/cpu/team_runtime.py, rlx_team_judge), fed measured calls as
numbers through a compiled program's ``<prefix>_team_judge``: which team calls are bad, when a
spell on one thread begins, how it grows and how fast the team comes back. No clock is read:
every wall time, CPU time and "now" is given."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu.runtime import load_library
from rlx_core.targets.cpu.target import CpuTarget
from rlx_core.targets.cpu.threads import num_threads, set_num_threads

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

MS = 1_000_000  # ns


class Judge:
    """A fresh judge: the shrink state of one compiled team program, reset."""

    def __init__(self) -> None:
        before = num_threads()
        set_num_threads(2)
        try:
            a = np.ones((1024, 1024), np.float32)  # large enough to share out
            exe = rlx.compile(lambda x: rlx.nn.relu(x) * 0.5, a, target="cpu", record=False)
        finally:
            set_num_threads(before)
        lib = load_library(exe.program.info["so_path"])
        prefix = exe.program.info["entry"].removesuffix("_run")
        self._judge = getattr(lib, f"{prefix}_team_judge")
        self._judge.argtypes = [ctypes.POINTER(ctypes.c_longlong)] * 2
        self._judge.restype = ctypes.c_int
        self._one = getattr(lib, f"{prefix}_team_one_call")
        self._one.argtypes = [ctypes.POINTER(ctypes.c_longlong)] * 2
        self._one.restype = None
        self._reset = getattr(lib, f"{prefix}_team_reset")
        self.now = 0

    def reset(self) -> Judge:
        """Forget the shrink state (and the last calls)."""
        self._reset()
        self.now = 1000 * MS
        return self

    def call(self, wall: float, lost: float = 0.0, cpu: float | None = None,
             slept: float = 0.0, idle: bool = False, one: float = 0.0
             ) -> tuple[int, dict[str, int]]:
        """One team call of ``wall`` ms: ``lost`` ms of thread 0's late waits past their
        budgets, ``cpu`` ms of its CPU time (all of the wall time but ``slept``, when not
        given), no worker ran a chunk (``idle``), ``one`` ms a call on one thread just before
        (0: none measured). Returns (0 good / 1 bad / 2 a spell began, the state after it)."""
        self.now += int(wall * MS)
        if cpu is None:
            cpu = wall - slept
        rec = (ctypes.c_longlong * 7)(int(wall * MS), int(lost * MS), int(cpu * MS),
                                      int(slept * MS), int(idle), int(one * MS), self.now)
        out = (ctypes.c_longlong * 6)()
        verdict = self._judge(rec, out)
        return verdict, dict(zip(("left", "until", "next_calls", "next_ns", "shrunk", "worse"),
                                 out, strict=True))


    def one_call(self, wall: float) -> dict[str, int]:
        """One call on the calling thread alone (shrunk) of ``wall`` ms; the state after it."""
        self.now += int(wall * MS)
        out = (ctypes.c_longlong * 6)()
        self._one((ctypes.c_longlong * 2)(int(wall * MS), self.now), out)
        return dict(zip(("left", "until", "next_calls", "next_ns", "shrunk", "worse"), out,
                        strict=True))


@pytest.fixture(scope="module")
def compiled() -> Judge:
    return Judge()  # compiled once; each test resets it


@pytest.fixture
def judge_factory(compiled: Judge):
    return compiled.reset


def test_late_waits_that_cost_little_never_shrink_the_team(judge_factory) -> None:
    """A nearly quiet machine: every 0.1-ms kernel's wait a little past its budget, a
    background burst of 1 ms in a 45 ms call; 200 calls stay team calls."""
    j = judge_factory()
    for i in range(200):
        verdict, st = j.call(7.0, lost=0.3) if i % 2 else j.call(45.0, lost=1.0)
        assert verdict == 0 and not st["shrunk"], (i, st)


def test_two_bad_calls_among_three_start_a_spell(judge_factory) -> None:
    j = judge_factory()
    assert j.call(10.0, lost=3.0)[0] == 1  # over a quarter lost: bad, tolerated alone
    assert j.call(10.0, lost=1.0)[0] == 0
    verdict, st = j.call(10.0, lost=5.0)  # the second bad call of the last three
    assert verdict == 2 and st["shrunk"] and st["left"] == 2
    assert st["until"] == j.now + 5 * MS


def test_bad_calls_far_apart_are_tolerated(judge_factory) -> None:
    j = judge_factory()
    for _ in range(20):
        assert j.call(10.0, lost=6.0)[0] == 1
        assert j.call(10.0)[0] == 0
        assert j.call(10.0)[0] == 0


@pytest.mark.parametrize("kind", ["idle", "starved"])
def test_a_call_without_its_worker_or_its_core_is_bad(judge_factory, kind: str) -> None:
    j = judge_factory()
    bad = {"idle": {"idle": True}, "starved": {"cpu": 5.0}}[kind]  # 5 of 10 ms on its core
    assert j.call(10.0, **bad)[0] == 1
    assert j.call(10.0, **bad)[0] == 2


@pytest.mark.parametrize("kind", ["starved", "lost"])
def test_a_team_call_no_slower_than_one_thread_just_was_is_good(judge_factory,
                                                                 kind: str) -> None:
    """Two busy processes, one on each core: thread 0 gets half its core in every team call,
    but one thread sharing a core took longer still. Such calls are good; the same calls
    slower than one thread was are bad, and two of them start a spell. Only after such a
    call does a starved call on one thread hold a spell on (``worse``)."""
    j = judge_factory()
    bad = {"starved": {"cpu": 17.0}, "lost": {"lost": 10.0}}[kind]  # of a 35 ms call
    for _ in range(10):
        verdict, st = j.call(35.0, one=41.0, **bad)
        assert verdict == 0 and not st["worse"]
    assert j.call(35.0, one=30.0, **bad)[0] == 1
    verdict, st = j.call(35.0, one=30.0, **bad)
    assert verdict == 2 and st["worse"]  # now a starved shrunk call holds the spell on
    assert j.call(35.0, **bad)[1]["worse"]  # no one-thread time to compare: left as it was


def test_bursts_that_land_in_some_team_calls_are_judged_by_the_teams_median(
        judge_factory) -> None:
    """Two bursty processes (4 ms on, 4 off): most team calls run between bursts (1.3 ms,
    one thread just took 2.1), two in five meet a burst (6 ms, thread 0 starved). The recent
    team calls' median beats one thread, so none of them is bad (judged alone against one
    thread's median, the second starved call started a spell). Once most of the recent team
    calls are slower than one thread, the team is bad again and a spell begins."""
    j = judge_factory()
    for i in range(30):
        verdict, st = j.call(6.0, cpu=2.0, one=2.1) if i % 5 in (2, 4) else j.call(1.3, one=2.1)
        assert verdict == 0 and not st["shrunk"] and not st["worse"], (i, st)
    assert j.call(6.0, cpu=2.0, one=2.1)[0] == 1  # three of five slow: bad, tolerated alone
    verdict, st = j.call(6.0, cpu=2.0, one=2.1)
    assert verdict == 2 and st["shrunk"] and st["worse"]


def test_shrunk_calls_hold_the_spell_on_only_while_most_are_starved(judge_factory) -> None:
    """After the team lost to one thread (``worse``), a shrunk call that met a burst (6.5 ms
    against 2.1) no longer holds the spell on by itself: only while most of the recent
    shrunk calls were that slow (the machine has no core for the calling thread either)."""
    j = judge_factory()
    for _ in range(2):
        verdict, st = j.call(6.0, cpu=2.0, one=2.1)
    assert verdict == 2 and st["worse"]
    for wall in (2.1, 2.1, 6.5, 2.1, 6.5, 2.1, 2.1):  # bursts in two of five
        until = st["until"]
        st = j.one_call(wall)
        assert st["until"] == until, wall
    for wall in (6.5, 6.5):  # now three of the last five were starved
        st = j.one_call(wall)
    assert st["until"] == j.now + 13 * MS and st["shrunk"]


def test_sleeping_in_a_wait_is_not_starvation(judge_factory) -> None:
    """Thread 0 asleep on the futex for 4 of 10 ms (its CPU time 6 ms) was not starved; it
    lost only what its late waits cost (here 1 ms: a good call)."""
    j = judge_factory()
    for _ in range(5):
        assert j.call(10.0, lost=1.0, slept=4.0)[0] == 0


def test_spells_double_while_the_probe_is_bad_and_reset_after_two_good_calls(
        judge_factory) -> None:
    j = judge_factory()
    j.call(4.0, lost=2.0)
    verdict, st = j.call(4.0, lost=2.0)
    assert verdict == 2 and st["left"] == 2 and st["next_calls"] == 4
    spells = [(st["left"], st["until"] - j.now)]
    for _ in range(4):  # every first team call after a spell is bad again: the spell doubles
        verdict, st = j.call(4.0, lost=2.0)
        assert verdict == 2
        spells.append((st["left"], st["until"] - j.now))
    assert spells == [(2, 5 * MS), (4, 10 * MS), (8, 20 * MS), (16, 40 * MS), (32, 80 * MS)]
    assert j.call(4.0)[0] == 0  # the machine went quiet: one good call halves the next spell
    assert j.call(4.0)[1]["next_calls"] == 2  # two in a row: back to the first spell
    j.call(4.0, lost=2.0)
    verdict, st = j.call(4.0, lost=2.0)
    assert verdict == 2 and (st["left"], st["until"] - j.now) == (2, 5 * MS)


def test_spells_stop_growing_at_64_calls_and_one_second(judge_factory) -> None:
    j = judge_factory()
    for _ in range(12):
        verdict, st = j.call(4.0, lost=2.0)
    assert verdict == 2 and st["left"] == 64 and st["until"] - j.now == 1000 * MS


def test_a_spells_call_count_lapses_a_second_past_its_time(judge_factory) -> None:
    """A spell's call count holds up to a second past its time (a 64-call spell of 1 s: 2 s):
    a program called again only later gets its team back, whatever calls are left."""
    j = judge_factory()
    for _ in range(12):
        verdict, st = j.call(4.0, lost=2.0)
    assert verdict == 2 and st["left"] == 64
    assert j.call(0.0)[1]["shrunk"]  # within the spell's second: shrunk
    j.now += 1500 * MS
    assert j.call(0.0)[1]["shrunk"]  # past its time, within a second of it: its calls hold
    j.now += 600 * MS
    assert not j.call(0.0)[1]["shrunk"]  # a second past its time: the team is back


def test_spells_after_calls_no_worker_joined_stay_short(judge_factory) -> None:
    """Another library's pool spinning on the worker's core: no worker joins call after call.
    Thread 0 waited for nobody, so each spell is 2 ms of calls on one thread and never
    doubles: the team is back within 2 ms of the spinner going quiet."""
    j = judge_factory()
    assert j.call(10.0, idle=True)[0] == 1
    for _ in range(10):  # every probe after a spell finds no worker again
        verdict, st = j.call(10.0, idle=True)
        assert verdict == 2 and st["left"] == 0 and st["until"] - j.now == 2 * MS
        assert st["next_calls"] == 2 and st["next_ns"] == 5 * MS
    assert j.call(10.0)[0] == 0  # the spinner went quiet: a good team call


def test_calls_no_worker_joined_leave_the_doubling_as_it_was(judge_factory) -> None:
    """Spells that lost time doubled to 8 calls; short spells of idle calls between them
    neither reset that (the load may still be there) nor grow it."""
    j = judge_factory()
    j.call(4.0, lost=2.0)
    for _ in range(3):
        verdict, st = j.call(4.0, lost=2.0)
    assert verdict == 2 and st["left"] == 8 and st["next_calls"] == 16
    verdict, st = j.call(4.0, idle=True)  # the probe: no worker came
    assert verdict == 2 and st["left"] == 0 and st["next_calls"] == 16
    verdict, st = j.call(4.0, lost=2.0)  # the next probe lost time again: the doubling goes on
    assert verdict == 2 and st["left"] == 16 and st["until"] - j.now == 40 * MS
