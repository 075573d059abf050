"""The core-to-core round-trip probe (rlx_core/targets/cpu/placement.py): it measures a positive
round trip and names a placement on two CPUs, gives a reason instead of a number on one, never
raises when the probe fails, and classifies by latency first and by the OS topology only where
the latency is in between. No timing is asserted: the classification tests use fixed numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlx_core.targets.cpu import placement as pl
from rlx_core.targets.cpu.placement import (
    SHARED,
    SPLIT,
    SPLIT_ABOVE_NS,
    UNKNOWN,
    Placement,
    classify,
    measure_placement,
    os_l3,
)

ROOT = Path(__file__).resolve().parents[2]
KINDS = {SHARED, SPLIT, UNKNOWN}
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2


@pytest.mark.skipif(not TWO_CPUS, reason="the probe needs two CPUs in the affinity set")
def test_the_probe_measures_a_positive_round_trip_and_names_a_placement() -> None:
    p = measure_placement()
    assert p.round_trip_ns > 0, p.reason
    assert p.kind in KINDS and p.os_l3 in KINDS
    assert p.cpus == tuple(sorted(os.sched_getaffinity(0))[:2])
    assert p.reason  # how it was decided
    assert f"{p.round_trip_ns:.0f} ns round trip" in p.describe()
    assert p.to_json()["cpus"] == list(p.cpus)
    # every batch of round trips is a number of its own (a median over them, not one reading)
    trips = pl.round_trips(*p.cpus, rounds=5, trips=100)
    assert len(trips) == 5 and all(t > 0 for t in trips)


def test_one_cpu_gives_the_reason_instead_of_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    p = measure_placement()
    assert (p.kind, p.round_trip_ns, p.cpus) == (UNKNOWN, 0.0, (3,))
    assert "one CPU" in p.reason and "one CPU" in p.describe()


def test_a_process_held_to_one_cpu_gets_the_reason_not_a_crash() -> None:
    """The real affinity call, in a child process held to one CPU (as taskset -c 0 does)."""
    cpu = min(os.sched_getaffinity(0))
    code = (f"import os; os.sched_setaffinity(0, {{{cpu}}}); "
            "from rlx_core.targets.cpu.placement import measure_placement; "
            "p = measure_placement(); print(p.kind, '|', p.reason)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr
    kind, reason = out.stdout.strip().split(" | ")
    assert kind == UNKNOWN and "one CPU" in reason


def test_a_failing_probe_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(a: int, b: int) -> list[float]:
        raise RuntimeError("no compiler")

    monkeypatch.setattr(pl, "round_trips", broken)
    monkeypatch.setattr(pl, "os_l3", lambda a, b: UNKNOWN)
    p = measure_placement((0, 1))
    assert (p.kind, p.round_trip_ns) == (UNKNOWN, 0.0)
    assert "probe failed (no compiler)" in p.reason
    monkeypatch.setattr(pl, "os_l3", lambda a, b: SPLIT)  # the OS's word stands in for it
    assert measure_placement((0, 1)).kind == SPLIT


def test_the_latency_decides_where_it_is_clear_and_the_os_where_it_is_not() -> None:
    # the Zen 4 VM's two placements: the OS reports one L3 for both
    assert classify(58.0, SHARED)[0] == SHARED
    kind, how = classify(310.0, SHARED)
    assert kind == SPLIT and "the OS reports one L3" in how
    assert classify(58.0, UNKNOWN)[0] == SHARED and classify(310.0, UNKNOWN)[0] == SPLIT
    # in between the bands: the OS topology, else unknown
    between = (pl.SHARED_BELOW_NS + SPLIT_ABOVE_NS) / 2
    assert classify(between, SPLIT) == (SPLIT, "OS topology (round trip in between)")
    assert classify(between, UNKNOWN)[0] == UNKNOWN
    assert classify(0.0, SHARED) == (SHARED, "OS topology")
    assert classify(0.0, UNKNOWN)[0] == UNKNOWN


def test_os_l3_reads_the_shared_cpu_list(tmp_path: Path) -> None:
    for cpu, text in ((0, "0-3,8-11\n"), (4, "4-7,12-15\n")):
        d = tmp_path / f"cpu{cpu}/cache/index3"
        d.mkdir(parents=True)
        (d / "shared_cpu_list").write_text(text)
    assert os_l3(0, 9, tmp_path) == SHARED and os_l3(0, 1, tmp_path) == SHARED
    assert os_l3(0, 4, tmp_path) == SPLIT and os_l3(4, 12, tmp_path) == SHARED
    assert os_l3(2, 3, tmp_path) == UNKNOWN  # no L3 reported for CPU 2


def test_a_placement_describes_itself_with_or_without_a_number() -> None:
    p = Placement(SPLIT, 312.4, (0, 1), SHARED, "round trip")
    assert p.describe() == "split L3 (312 ns round trip CPU 0-1)"
    assert Placement(UNKNOWN, 0.0, (0,), UNKNOWN, "why").describe() == "unknown (why)"


def test_a_recorded_placement_reads_back_as_it_was_written() -> None:
    p = Placement(SPLIT, 312.4, (0, 1), SHARED, "round trip")
    assert Placement.from_json(p.to_json()) == p
    # a results file written before a field was kept: the field reads as not known
    old = Placement.from_json({"kind": SHARED, "round_trip_ns": 58.0, "cpus": [0, 1]})
    assert old == Placement(SHARED, 58.0, (0, 1), UNKNOWN, "")
    assert Placement.from_json({}).describe() == UNKNOWN
