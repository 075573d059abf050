"""Collectives, data-parallel training and faults on real ranks under mpiexec."""

from __future__ import annotations

import pytest

from tests.distributed.launch import run_ranks


@pytest.mark.parametrize("ranks", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_collectives_and_data_parallel_equal_single_process(ranks: int) -> None:
    done = run_ranks(ranks, "collectives.py")
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(ranks):
        assert (f"rank {rank}/{ranks}: collectives ok; DP={ranks} vs 1 process after 10 "
                "steps") in done.stdout
        assert f"rank {rank}: mismatch detected: ranks differ in parameter shapes" in done.stdout
        assert f"rank {rank}: deterministic sums equal the sequential sum's bits" in done.stdout
        # the gradient all-reduce is inside the compiled step: 2 buckets of the MLP
        assert f"rank {rank}: 2 bucketed all_reduce(mean) in the step" in done.stdout


@pytest.mark.parametrize("mode", ["hang", "kill", "raise"])
def test_a_failing_rank_stops_every_rank(mode: str) -> None:
    # deadline 3 s; the subprocess timeout (60 s) turns a hang into a failure, not a stuck CI
    done = run_ranks(2, "fault.py", mode, timeout_s=60, env={"RLX_DIST_TIMEOUT": "3"})
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert f"rank 1: {mode} at step 3" in out
    assert "finished all steps" not in out
    if mode == "hang":
        # only the deadline can end this run: rank 0's typed error, then MPI_Abort
        assert "[RLX-N001] rank 0: all_reduce(mean) did not complete within 3 s" in out, out
    if mode == "raise":
        assert "RuntimeError: rank 1 failed on purpose" in out, out
