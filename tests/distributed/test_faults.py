"""Faults in tensor-, pipeline- and data-parallel training on 2 real ranks: a rank killed
(SIGKILL), hung or raising mid-step ends every rank with a typed error, within 10 s of the
fault and with no process left behind; ranks that run different programs are refused at
start with both sides named. Each run's fault-to-exit time is printed (``pytest -s``, and
the junit property ``fault_to_exit_s``)."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest

from tests.distributed.launch import run_ranks

DEADLINE_S = "3"  # $RLX_DIST_TIMEOUT of the ranks: a hang is noticed after 3 s
BOUND_S = 10.0  # the bound from the fault to the end of every rank


def _leftovers(token: str) -> list[str]:
    """Processes whose command line holds ``token`` (ranks of a finished job must be gone)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended while we looked
            continue
        if token in cmd:
            found.append(f"{proc.name}: {cmd}")
    return found


def _run(kind: str, mode: str) -> tuple[str, float | None]:
    token = f"rlx-fault-{uuid.uuid4().hex}"
    done = run_ranks(2, "fault_parallel.py", kind, mode, token, timeout_s=120,
                     env={"RLX_DIST_TIMEOUT": DEADLINE_S})
    ended = time.time()
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "finished" not in out, out
    time.sleep(0.5)  # the launcher reaps its children as it exits
    assert not _leftovers(token), _leftovers(token)
    fault = re.search(rf"rank 1: {mode} at step 3 t=([0-9.]+)", out)
    return out, (ended - float(fault.group(1))) if fault else None


@pytest.mark.parametrize("kind, mode", [
    ("tp", "kill"), ("pp", "kill"), ("dp", "kill"), ("pp", "hang"), ("tp", "raise"),
])
def test_a_failing_rank_ends_every_rank_with_a_typed_error(kind: str, mode: str,
                                                           record_property) -> None:
    out, delay = _run(kind, mode)
    assert delay is not None, out
    print(f"{kind} {mode}: every rank ended {delay:.2f} s after the fault")
    record_property("fault_to_exit_s", round(delay, 3))
    assert delay <= BOUND_S, out
    if mode == "kill":  # the launcher stops the survivor; it says so, typed
        assert re.search(r"\[RLX-N010\] rank 0/2: stopped by the launcher \(SIGTERM\)", out), out
    elif mode == "hang":  # only the deadline can notice a hang
        assert re.search(r"rank 0: typed error RLX-N001 .*did not complete within 3 s", out), out
    else:  # the raising rank tells the others at once
        assert re.search(r"rank 0: typed error RLX-N009 .*rank 1 failed: RuntimeError: rank 1 "
                         r"failed on purpose", out), out


@pytest.mark.parametrize("kind, what", [("tp", "the program"), ("pp", "the pipeline")])
def test_ranks_with_different_programs_are_refused_at_start(kind: str, what: str) -> None:
    out, _ = _run(kind, "mismatch")
    for rank, other in ((0, 1), (1, 0)):
        line = re.search(rf"rank {rank}: typed error RLX-N004 .*ranks differ in {what}: "
                         rf"rank {rank} has '([^']*)', rank {other} has '([^']*)'", out)
        if line is None:  # the launcher may stop rank 1 once rank 0 aborted
            assert rank == 1, out
            continue
        mine, theirs = line.groups()
        assert mine != theirs
    if kind == "tp":  # the graphs' hashes and input types, both sides
        assert re.search(r"@loss sha256:[0-9a-f]{16} \(.*i32\[8\]\)", out), out
        assert re.search(r"@loss sha256:[0-9a-f]{16} \(.*i32\[4\]\)", out), out
    else:  # the stage boundary shapes, both sides
        assert "float32[4, 16]" in out and "float32[4, 12]" in out, out
