"""bench_contention.paired: the team and the one-thread peer timed in shared turns."""

from __future__ import annotations

from typing import Any

import benchmarks.bench_contention as bc


def test_shared_turns_alternate_which_peer_goes_first_and_time_both_under_one_placement(
        monkeypatch: Any) -> None:
    now = [0.0]  # a fake clock: a call on two threads takes 1 s, on one thread 2 s
    monkeypatch.setattr(bc.time, "perf_counter", lambda: now[0])
    threads: list[int] = []
    log: list[tuple[int, str]] = []  # (thread count set, "pre" or "call")

    def program() -> None:
        log.append((threads[-1], "call"))
        now[0] += 1.0 if threads[-1] == 2 else 2.0

    team = bc.with_threads(threads.append, 2, program)
    one = bc.with_threads(threads.append, 1, program)
    team_s, one_s, ratios = bc.paired(team, one, runs=4, block=2, settle_s=0.0, gap_s=0.0,
                                      pre=lambda: log.append((threads[-1], "pre")))
    assert (team_s.runs, team_s.p50, one_s.runs, one_s.p50) == (4, 1.0, 4, 2.0)
    assert ratios == [0.5, 0.5]  # each turn's team p50 over its one-thread p50
    # turn 0 starts with the team, turn 1 with one thread; each half is one untimed call,
    # then its timed calls, each right after the untimed pre() call
    assert threads == [2, 1, 1, 2]
    calls = [n for n, what in log if what == "call"]
    assert calls == [2, 2, 2, 1, 1, 1, 1, 1, 1, 2, 2, 2]
    pres = [i for i, (_, what) in enumerate(log) if what == "pre"]
    assert len(pres) == 8 and all(log[i + 1][1] == "call" for i in pres)


def test_the_first_half_settles_for_settle_s_and_the_second_half_once() -> None:
    threads: list[int] = []
    calls: list[int] = []
    team = bc.with_threads(threads.append, 2, lambda: calls.append(threads[-1]))
    one = bc.with_threads(threads.append, 1, lambda: calls.append(threads[-1]))
    bc.paired(team, one, runs=1, block=1, settle_s=0.02, gap_s=0.0, pre=None)
    teams = calls.count(2)
    assert teams >= 2 and calls[:teams] == [2] * teams  # settle calls, then the timed one
    assert calls[teams:] == [1, 1]  # one untimed call, then the timed one
