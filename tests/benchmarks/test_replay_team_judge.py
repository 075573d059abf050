"""benchmarks/replay_team_judge.py: the judge replayed under made-up bursty calls (no clock)."""

from __future__ import annotations

import argparse

import pytest

from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _args(burst: float) -> argparse.Namespace:
    return argparse.Namespace(burst=burst, calls=1000, team=1.3, team_burst=6.0, one=2.1,
                              one_burst=6.5)


def test_bursts_in_a_fifth_of_the_calls_leave_the_team_its_calls() -> None:
    """No burst: every call a team call. Bursts in 20% of the calls (each starving thread 0
    of a 6-ms team call): the judge keeps the team on most calls and the p50 is the team's."""
    from benchmarks.replay_team_judge import judge_library, replay
    from rlx_core.targets.cpu.threads import num_threads, set_num_threads

    before = num_threads()
    try:
        lib, prefix = judge_library()
    finally:
        set_num_threads(before)
    assert replay(lib, prefix, _args(0.0), seed=1) == (0, 1.3)
    for seed in (3, 4, 5, 6):
        shrunk, p50 = replay(lib, prefix, _args(0.2), seed)
        assert shrunk < 200 and p50 == 1.3, (seed, shrunk)
