"""benchmarks/cpu_goals.py: issue 22's goal table read from results files (no timing)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import benchmarks.cpu_goals as cg
from benchmarks.common import RESULTS, cpu_slug
from benchmarks.goal_runs import (
    HOST_SLOW,
    PEAK,
    STEPS,
    host_lines,
    run_steps,
    select_steps,
    subprocess_runner,
)

CPU = "Test CPU (Zen 9)"  # a made-up machine: its slug is test-zen-9
SLUG = cpu_slug(CPU)


def _write(results: Path, stem: str, data: dict[str, Any], when: str = "2026-12-07 09:00:00",
           command: str = "") -> None:
    data = {"machine": {"cpu": CPU, "cores": 2, "when": when}, **data}
    (results / f"{stem}.json").write_text(json.dumps(data))
    if command:
        (results / f"{stem}.md").write_text(f"# a run\n\nCPU, 2 cores (`{command}`).\n")


def _minilm(speedups: dict[int, float], small_over_floor: float = 1.3) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [{"batch": b, "seq": 128, "speedup_vs_fastest_peer": v,
                                   "fastest_peer": "onnxruntime"} for b, v in speedups.items()]
    rows.append({"batch": 2, "seq": 8, "rlx_over_floor": small_over_floor,
                 "floor_status": "ok"})
    return {"threads": {"threads": "2"}, "results": rows}


def _row(rows: list[cg.Row], figure: str) -> cg.Row:
    return next(r for r in rows if r.goal.startswith(figure))


@pytest.mark.parametrize("slug", ["amd-epyc-zen-4", "intel-xeon-emerald-rapids",
                                  "amd-epyc-zen-1"])
def test_the_committed_files_of_each_machine_give_a_row_per_goal(slug: str) -> None:
    rows = cg.goal_table(slug)
    assert [r.goal for r in rows] == [g.figure for g in cg.GOALS]
    read = [r for r in rows if r.file]
    assert len(read) >= len(rows) // 2  # every machine has most of the goal benchmarks run
    for r in read:
        data = json.loads((RESULTS / r.file).read_text())
        assert cpu_slug(data["machine"]["cpu"]) == slug
        assert cg.HOST_SLOW_TAG not in r.file
        assert r.command.startswith("python benchmarks/")
        assert r.measured and r.when
    for r in rows:  # met: every part measured; not measured: no file, or a part missing
        gap = not r.file or "not in" in r.measured or "uncalibrated" in r.measured
        assert not (r.status is cg.Status.MET and gap)
        assert not (r.status is cg.Status.NOT_MEASURED and not gap)


def test_a_value_below_its_goal_is_not_met_and_a_passing_one_met(tmp_path: Path) -> None:
    below = cg.MINILM_VS_PEER - 0.1
    _write(tmp_path, f"minilm-{SLUG}", _minilm({1: 1.3, 8: below, 32: 1.25},
                                               small_over_floor=1.4),
           command="python benchmarks/bench_minilm.py --batches 1,8,32")
    _write(tmp_path, f"mnist_mlp-{SLUG}", {"threads": {"threads": "2"}, "results": [
        {"label": cg.MLP_PEAK_CONFIG, "rlx_fraction_of_peak": cg.MLP_PEAK_FRACTION + 0.05},
        {"label": cg.MLP_AHEAD_CONFIG, "rlx_ratio": {"numpy": 1.2, "torch": 0.99}}]})
    rows = cg.goal_table(SLUG, tmp_path)
    minilm = _row(rows, "bench_minilm")
    assert minilm.status is cg.Status.NOT_MET
    assert f"b8 {below:.2f}x" in minilm.measured
    assert minilm.command == "python benchmarks/bench_minilm.py --batches 1,8,32"
    assert _row(rows, "MiniLM b2 s8").status is cg.Status.MET
    assert _row(rows, f"MLP {cg.MLP_PEAK_CONFIG}").status is cg.Status.MET
    ahead = _row(rows, f"MLP {cg.MLP_AHEAD_CONFIG}")
    assert ahead.status is cg.Status.NOT_MET and "vs torch 0.99x" in ahead.measured
    # no file for the others: not measured, the command that would measure it in its place
    gemm = _row(rows, "bench_gemm vs MLAS, 2 threads")
    assert (gemm.status, gemm.file) == (cg.Status.NOT_MEASURED, "")
    assert gemm.command == "python benchmarks/bench_gemm.py --threads 2 --runs 80"
    assert "2 of 11 met" in cg.table_markdown(SLUG, rows)


def test_the_newest_file_covering_the_most_of_a_goal_is_read(tmp_path: Path) -> None:
    _write(tmp_path, f"minilm-{SLUG}", _minilm({1: 1.3, 8: 1.3, 32: 1.3}),
           when="2026-12-06 10:00:00")
    _write(tmp_path, f"minilm-{SLUG}-b8", _minilm({8: 1.0}), when="2026-12-07 10:00:00")
    _write(tmp_path, f"minilm-{SLUG}-host-slow-20261207", _minilm({1: 1.0, 8: 1.0, 32: 1.0}),
           when="2026-12-07 11:00:00")
    row = _row(cg.goal_table(SLUG, tmp_path), "bench_minilm")
    assert (row.file, row.status) == (f"minilm-{SLUG}.json", cg.Status.MET)
    slow = _row(cg.goal_table(SLUG, tmp_path, include_host_slow=True), "bench_minilm")
    assert (slow.file, slow.status) == (f"minilm-{SLUG}-host-slow-20261207.json",
                                        cg.Status.NOT_MET)
    _write(tmp_path, f"minilm-{SLUG}-rerun", _minilm({1: 1.3, 8: 1.3, 32: 1.1}),
           when="2026-12-07 12:00:00")
    row = _row(cg.goal_table(SLUG, tmp_path), "bench_minilm")
    assert (row.file, row.status) == (f"minilm-{SLUG}-rerun.json", cg.Status.NOT_MET)


def test_a_run_on_a_forced_lower_path_is_never_read(tmp_path: Path) -> None:
    _write(tmp_path, f"minilm-{SLUG}", _minilm({1: 1.3, 8: 1.3, 32: 1.3}),
           when="2026-12-06 10:00:00")
    forced = _minilm({1: 1.0, 8: 1.0, 32: 1.0})
    _write(tmp_path, f"minilm-{SLUG}-isa-avx2", forced, when="2026-12-07 10:00:00")
    data = json.loads((tmp_path / f"minilm-{SLUG}-isa-avx2.json").read_text())
    data["machine"].update(rlx_path="avx2", rlx_path_forced=True)
    (tmp_path / f"minilm-{SLUG}-isa-avx2.json").write_text(json.dumps(data))
    for slow in (False, True):
        row = _row(cg.goal_table(SLUG, tmp_path, include_host_slow=slow), "bench_minilm")
        assert (row.file, row.status) == (f"minilm-{SLUG}.json", cg.Status.MET)


def test_run_refuses_a_forced_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cg, "rlx_path", lambda: {"rlx_path": "avx2", "rlx_path_forced": True})
    with pytest.raises(SystemExit):
        cg.main(["--run", "--dry-run"])


def test_a_batch_missing_or_a_field_an_older_format_lacks_is_not_measured(
        tmp_path: Path) -> None:
    _write(tmp_path, f"minilm-{SLUG}", _minilm({1: 1.3, 8: 1.3}))
    row = _row(cg.goal_table(SLUG, tmp_path), "bench_minilm")
    assert row.status is cg.Status.NOT_MEASURED and f"b32: {cg.NOT_IN_FILE}" in row.measured
    _write(tmp_path, f"minilm-{SLUG}", {"threads": {"threads": "2"}, "results": [
        {"batch": b, "seq": 128, "ms": 1.0} for b in cg.MINILM_BATCHES]})
    row = _row(cg.goal_table(SLUG, tmp_path), "bench_minilm")
    assert row.status is cg.Status.NOT_MEASURED and cg.NOT_IN_FORMAT in row.measured


def test_files_are_told_apart_by_thread_count(tmp_path: Path) -> None:
    def gemm(ratio: float, threads: int) -> dict[str, Any]:
        gf = {"rlx (rlx-sgemm)": 100 * ratio, "rlx (W prepacked)": 100 * ratio,
              "onnxruntime (MLAS)": 100.0, "onnxruntime (MLAS, W per call)": 100.0}
        return {"threads": threads, "results": [{"group": "gemm", "shape": [128, 384, 1536],
                                                 "gflops": gf}]}

    _write(tmp_path, f"gemm-{SLUG}", gemm(1.05, 1))
    _write(tmp_path, f"gemm-{SLUG}-2thread", gemm(0.95, 2))
    one = {"results": [{"size": "small", "rlx_speedup": {"torch": 2.0, "torch.compile": 2.0}},
                       {"size": "gpt2", "rlx_speedup": {"torch": 1.1, "torch.compile": 1.0}}]}
    _write(tmp_path, f"decode-{SLUG}-threadcpu", {**one, "threads": {"threads": "1"}})
    rows = cg.goal_table(SLUG, tmp_path)
    assert _row(rows, "bench_gemm vs MLAS, 1 thread").status is cg.Status.MET
    two = _row(rows, "bench_gemm vs MLAS, 2 threads")
    assert two.status is cg.Status.NOT_MET and two.file == f"gemm-{SLUG}-2thread.json"
    decode = _row(rows, "bench_decode, 1 thread")  # GPT-2 level with torch.compile: not ahead
    assert decode.status is cg.Status.NOT_MET and "gpt2 vs torch.compile 1.00x" in decode.measured
    assert _row(rows, "bench_decode, 2 threads").status is cg.Status.NOT_MEASURED


def test_contention_reads_the_shared_turns_where_the_file_has_them(tmp_path: Path) -> None:
    def rows(**fields: float) -> dict[str, Any]:
        return {"threads": {"threads": "2"}, "results": [
            {"condition": c, "workload": "MLP step", "team_over_best_peer": 0.5, **fields}
            for c in cg.CONTENTION_CONDITIONS]}

    _write(tmp_path, f"contention-{SLUG}", rows(team_over_1thread=1.3,
                                                team_over_1thread_paired=1.05))
    row = _row(cg.goal_table(SLUG, tmp_path), "bench_contention: team vs rlx")
    assert row.status is cg.Status.MET and "shared turns" in row.measured
    _write(tmp_path, f"contention-{SLUG}", rows(team_over_1thread=1.3))
    row = _row(cg.goal_table(SLUG, tmp_path), "bench_contention: team vs rlx")
    assert row.status is cg.Status.NOT_MET and "(own turns) 1.30x" in row.measured
    assert _row(cg.goal_table(SLUG, tmp_path),
                "bench_contention: team vs peers").status is cg.Status.MET


def test_write_keeps_the_table_beside_the_results(tmp_path: Path) -> None:
    _write(tmp_path, f"minilm-{SLUG}", _minilm({1: 1.3, 8: 1.3, 32: 1.3}))
    assert cg.main(["--cpu", SLUG, "--results", str(tmp_path), "--write"]) == 0
    data = json.loads((tmp_path / f"goals-{SLUG}.json").read_text())
    assert [r["status"] for r in data["rows"]][:2] == ["not measured", "not measured"]
    assert data["rows"][2]["status"] == "met"
    assert "| bench_minilm vs fastest peer |" in (tmp_path / f"goals-{SLUG}.md").read_text()


def test_run_goes_through_peak_then_the_chosen_benchmarks(tmp_path: Path,
                                                          capsys: Any) -> None:
    calls: list[list[str]] = []
    slow = HOST_SLOW - 0.2

    def fake(argv: Any) -> tuple[int, str]:
        calls.append(list(argv))
        text = _peak_output(2, slow, 0.54) if argv[1].endswith("peak.py") else ""
        return (3 if argv[1].endswith("bench_decode.py") else 0), text

    rc = cg.main(["--run", "--only", "decode2,gemm2", "--results", str(tmp_path)], runner=fake)
    assert rc == 1  # a step failed: said, and the table still printed
    assert [c[1:] for c in calls] == [list(PEAK.args), list(STEPS[1].args),
                                      list(STEPS[6].args)]
    out = capsys.readouterr().out
    assert f"host at {slow:.2f} of its stored FMA peak" in out and "WARNING" in out
    assert "decode2 FAILED (exit 3)" in out and "# Issue 22's CPU goals" in out


def test_dry_run_lists_the_commands_and_runs_nothing(capsys: Any) -> None:
    def fail(argv: Any) -> tuple[int, str]:
        raise AssertionError("a dry run ran something")

    assert cg.main(["--run", "--only", "contention", "--dry-run"], runner=fail) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "benchmarks/peak.py", "benchmarks/bench_contention.py --runs 40"]
    with pytest.raises(ValueError, match="unknown step"):
        select_steps("gemm1,nope")


def test_progress_lines_count_the_steps_and_the_host_check_reads_peak_output() -> None:
    said: list[str] = []
    now = iter(range(0, 1000, 30))
    run_steps([PEAK, STEPS[0]], lambda argv: (0, ""), python="py", clock=lambda: next(now),
              out=said.append)
    assert said[0].startswith("[1/2] peak: python benchmarks/peak.py")
    assert said[2] == "[1/2] peak.py printed no 'host-fraction' line"
    assert said[-1].startswith("all 2 step(s) in ")
    quiet = host_lines(_peak_output(1, 1.0, 0.91))
    assert quiet == ["host at 1.00 of its stored FMA peak and 0.91 of its stored bandwidth "
                     "on 1 thread(s)"]


def _peak_output(threads: int, fma: float, bandwidth: float) -> str:
    """What peak.py prints for a run at ``fma`` and ``bandwidth`` of the stored peaks: its prose
    line, then the line for scripts, each from peak.py's own functions."""
    from benchmarks.peak import host_line
    from rlx_core.targets.cpu.peaks import PeakRun, Peaks

    kept = Peaks(200.0, 50.0, threads, "test", "then", 0.1, 0.0, True)
    now = Peaks(200.0 * fma, 50.0 * bandwidth, threads, "test", "now", 0.1, 0.0, True)
    run = PeakRun(now, kept)
    return f"{threads} thread(s): f32 FMA peak 200.0 GFLOP/s; {run.summary()}\n" + \
        host_line(threads, run) + "\n"


def test_peak_pys_host_line_reads_back_as_written() -> None:
    """goal_runs reads peak.py's line for scripts, not its prose: a run formatted by
    peak.host_line parses back to the same thread count and fractions (3 digits), whatever
    the prose line beside it says; other lines are skipped."""
    from benchmarks.peak import HostFraction, parse_host_lines

    text = ("1 thread(s): this run at 0.50 of something (FMA) and 0.10 (bandwidth)\n"
            + _peak_output(1, 0.987654, 0.5) + _peak_output(2, 1.25, 0.0401))
    assert parse_host_lines(text) == [HostFraction(1, 0.988, 0.5), HostFraction(2, 1.25, 0.040)]
    assert host_lines(text)[1].startswith("host at 1.25 of its stored FMA peak and 0.04 of ")


def test_the_subprocess_runner_returns_the_exit_status_and_the_output(capsys: Any) -> None:
    rc, text = subprocess_runner([sys.executable, "-c", "print('a'); raise SystemExit(2)"])
    assert (rc, text) == (2, "a\n")
    assert capsys.readouterr().out == "a\n"  # echoed as it came


def test_peak_pys_main_prints_a_host_line_per_thread_count(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: Any) -> None:
    """peak.py itself (its probes replaced by a made-up run) prints what goal_runs reads."""
    import benchmarks.peak as peak
    from rlx_core.targets.cpu.peaks import PeakRun, Peaks

    def fake(threads: int) -> PeakRun:
        kept = Peaks(100.0 * threads, 40.0, threads, "test", "then", 0.1, 0.0, True)
        return PeakRun(Peaks(90.0 * threads, 30.0, threads, "test", "now", 0.1, 0.0, True), kept)

    monkeypatch.setattr(peak, "bench_peaks", fake)
    monkeypatch.setattr(peak, "fma_ports", lambda: type("P", (), {"describe": lambda s: "-"})())
    assert peak.main(["--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("placement at the start: ") and "placement at the end: " in out
    assert host_lines(out) == [
        "host at 0.90 of its stored FMA peak and 0.75 of its stored bandwidth on 1 thread(s)",
        "host at 0.90 of its stored FMA peak and 0.75 of its stored bandwidth on 2 thread(s)"]


def test_each_row_says_where_the_cpus_sat_in_the_run_it_read(tmp_path: Path) -> None:
    """The placement column: the file's start placement, ``a -> b`` where the end's differs,
    ``not recorded`` for a file from before; the verdicts are the same either way."""
    def placed(kind: str, ns: float) -> dict[str, Any]:
        return {"kind": kind, "round_trip_ns": ns, "cpus": [0, 1], "os_l3": "shared L3",
                "reason": "round trip"}

    data = _minilm({1: 1.3, 8: 1.3, 32: 1.3})
    _write(tmp_path, f"minilm-{SLUG}", data)
    before = _row(cg.goal_table(SLUG, tmp_path), "bench_minilm")
    assert before.placement == "not recorded"
    moved = {"machine": {"cpu": CPU, "cores": 2, "when": "2026-12-07 09:00:00",
                         "placement": placed("shared L3", 58.2),
                         "placement_end": placed("split L3", 311.0)}}
    (tmp_path / f"minilm-{SLUG}.json").write_text(json.dumps({**data, **moved}))
    rows = cg.goal_table(SLUG, tmp_path)
    row = _row(rows, "bench_minilm")
    assert row.placement == "shared L3 (58 ns) -> split L3 (311 ns)"
    assert (row.status, row.measured) == (before.status, before.measured)
    moved["machine"]["placement_end"] = placed("shared L3", 61.0)  # did not move: said once
    (tmp_path / f"minilm-{SLUG}.json").write_text(json.dumps({**data, **moved}))
    assert _row(cg.goal_table(SLUG, tmp_path), "bench_minilm").placement == "shared L3 (58 ns)"
    md = cg.table_markdown(SLUG, rows)
    assert "| placement |" in md and "shared L3 (58 ns) -> split L3 (311 ns)" in md
    assert cg.PLACEMENT_NOTE in md
