"""Long fuzz runs across sessions: a run stopped by its time limit resumes where it stopped and
runs the same cases an uninterrupted run would, shards of one seed merge into one report per
target whose figures are the sum, and the same cases are never counted twice."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rlx_core.errors import RlxError
from rlx_core.testing.fuzz import main
from rlx_core.testing.shards import main as merge_main
from rlx_core.testing.shards import merge

RUN = ["--targets", "numpy", "--seed", "11", "--pack", "10", "--max-findings", "0"]


def _run(tmp_path: Path, name: str, *extra: str) -> dict[str, Any]:
    report = tmp_path / f"{name}.md"
    assert main([*RUN, *extra, "--report", str(report),
                 "--cases-dir", str(tmp_path / "cases")]) == 0
    return json.loads(report.with_suffix(".json").read_text())


def _figures(t: dict[str, Any]) -> tuple[Any, ...]:
    return t["graphs"], t["status"], t["ops"], t["dtypes"]


def test_a_stopped_run_resumes_and_runs_the_cases_an_uninterrupted_run_would(tmp_path) -> None:
    whole = _run(tmp_path, "whole", "--count", "30")["targets"]["numpy"]
    # 0.001 minutes: the first pack starts, then the time is up (a session that ran out)
    first = _run(tmp_path, "part", "--count", "30", "--minutes", "0.001", "--resume")
    assert first["targets"]["numpy"]["next"] == 10 and first["targets"]["numpy"]["graphs"] == 10
    done = _run(tmp_path, "part", "--count", "30", "--pack", "20", "--resume")  # other packs
    part = done["targets"]["numpy"]
    assert (part["start"], part["next"]) == (0, 30)
    assert _figures(part) == _figures(whole)  # the same 30 graphs, each once
    assert [s["range"] for s in done["header"]["sessions"]] == ["numpy 0-9", "numpy 10-29"]
    with pytest.raises(RlxError) as err:  # another seed must not continue this state
        main(["--targets", "numpy", "--seed", "12", "--count", "30", "--resume",
              "--report", str(tmp_path / "part.md")])
    assert err.value.code == "RLX-Z005"


def test_shards_merge_into_the_figures_of_one_run_and_never_overlap(tmp_path) -> None:
    whole = _run(tmp_path, "whole", "--count", "40")["targets"]["numpy"]
    _run(tmp_path, "a", "--count", "20")
    _run(tmp_path, "b", "--count", "20", "--start", "20")
    merged = merge([tmp_path / "b.md", tmp_path / "a.json"])
    header, total = merged["numpy"]
    assert total.covered == [[11, 0, 40]] and total.graphs == 40
    assert (total.graphs, dict(total.status), dict(total.ops), dict(total.dtypes)) == \
        _figures(whole)
    assert [x["range"] for x in header["shards"]] == ["20-39", "0-19"]
    out = tmp_path / "merged_{target}.md"
    assert merge_main([str(tmp_path / "a.md"), str(tmp_path / "b.md"), "--report", str(out)]) == 0
    text = (tmp_path / "merged_numpy.md").read_text()
    assert "numpy seed 11: 0-39" in text and "| numpy | 40 |" in text
    with pytest.raises(RlxError) as err:  # the whole run covers both shards' cases
        merge([tmp_path / "a.md", tmp_path / "whole.md"])
    assert err.value.code == "RLX-Z006" and "0-19" in str(err.value)


def _with_finding(tmp_path: Path, name: str, case: str) -> Path:
    """A numpy shard of 10 graphs, one of them a mismatch found before its triage: its finding
    names a saved case (``case``: a file name, written by the run under fuzz-out/)."""
    _run(tmp_path, name, "--count", "10")
    state = tmp_path / f"{name}.json"
    data = json.loads(state.read_text())
    t = data["targets"]["numpy"]
    t["status"]["ok"] -= 1
    t["status"]["mismatch"] = 1
    t["findings"] = [{"target": "numpy", "status": "mismatch", "seed": [11, 0, 3],
                      "detail": "got nan, want inf", "nodes": 3, "shrunk_nodes": 1,
                      "case": f"fuzz-out/cases/numpy/{case}", "ir": "hir @fuzz {}"}]
    state.write_text(json.dumps(data))
    return state


@pytest.mark.parametrize("rerun", [True, False])
def test_the_merger_reclassifies_a_mismatch_triaged_after_its_shard(tmp_path, rerun) -> None:
    """The opengl shard of 2026-12-05 counted a mismatch triaged after it was written
    (f64-composite-specials): the merged report counts it as known, by running its saved case
    (moved to tests/fuzz/cases by the triage) or, without re-running, by its triage record."""
    state = _with_finding(tmp_path, "a", "numpy-ccd602811f.rlx")  # known:f64-composite-specials
    _, total = merge([state], rerun=rerun)["numpy"]
    assert (total.status["mismatch"], total.status["known"]) == (0, 1)
    assert dict(total.known) == {"f64-composite-specials": 1}
    how = total.findings[0]["triaged"]
    assert ("explained by f64-composite-specials" if rerun else "triage record") in how
    out = tmp_path / "m_{target}.md"
    assert merge_main([str(state), "--report", str(out)] + ([] if rerun else ["--no-rerun"])) == 0
    text = (tmp_path / "m_numpy.md").read_text()
    assert "## Mismatches explained or fixed since the run" in text
    assert "Re-checked by the merger" in text


def test_the_merger_counts_a_fixed_mismatch_apart_and_keeps_what_nothing_explains(
        tmp_path) -> None:
    """A finding whose case passes now and is triaged ``fixed`` is counted as fixed since the
    run, not as unexplained; one whose case is missing stays an unexplained mismatch, with the
    reason."""
    state = _with_finding(tmp_path, "b", "numpy-7de635db66.rlx")
    meta = json.loads(Path(__file__).parent.joinpath("cases/numpy-7de635db66.json").read_text())
    assert meta["status"] == "fixed"
    _, total = merge([state])["numpy"]
    assert (total.status["mismatch"], total.status["fixed-since"]) == (0, 1)
    assert "passes now, fixed since" in total.findings[0]["triaged"]
    assert merge_main([str(state), "--report", str(tmp_path / "f_{target}.md")]) == 0
    assert "| 0 (+1 fixed since the run) |" in (tmp_path / "f_numpy.md").read_text()
    state = _with_finding(tmp_path, "c", "numpy-nosuchcase.rlx")
    _, total = merge([state], rerun=False)["numpy"]
    assert total.status["mismatch"] == 1 and "no saved case" in total.findings[0]["triaged"]
    assert merge_main([str(state), "--report", str(tmp_path / "x_{target}.md")]) == 1


def test_driver_fast_compile_reaches_only_the_drivers_of_the_run() -> None:
    from rlx_core.testing.driver_setting import fast_driver_env
    from rlx_core.testing.driver_setting import relevant as _relevant

    assert fast_driver_env(["vulkan"]) == {"GALLIVM_PERF": "nopt"}
    assert fast_driver_env(["opencl"]) == {"POCL_EXTRA_BUILD_FLAGS": "-cl-opt-disable"}
    assert fast_driver_env(["hexagon", "cortex-m"]) == {}
    # an older shard recorded GALLIVM_PERF for every target: not a change of driver on hexagon
    assert _relevant("GALLIVM_PERF=nopt", ["hexagon"]) == ""
    assert _relevant("GALLIVM_PERF=nopt", ["webgpu"]) == "GALLIVM_PERF=nopt"
    assert _relevant("mixed (see sessions)", ["opencl"]) == "mixed (see sessions)"


def test_opencl_fuzzes_with_pocl_optimisation_off(tmp_path, monkeypatch) -> None:
    """PoCL built with -cl-opt-disable (``--driver-fast-compile``) still agrees with the
    reference on special values, and the report says which sessions ran so."""
    from rlx_core.testing.fuzz import executing_targets

    if "opencl" not in executing_targets():
        pytest.skip("opencl (PoCL or another OpenCL device) does not execute here")
    for key in ("POCL_EXTRA_BUILD_FLAGS", "GALLIVM_PERF"):  # main sets them for its worker:
        monkeypatch.setenv(key, "")  # recorded, so they are restored (unset) after the test
        monkeypatch.delenv(key)
    report = tmp_path / "ocl.md"
    assert main(["--targets", "opencl", "--seed", "31", "--count", "12", "--pack", "12",
                 "--driver-fast-compile", "--max-findings", "1", "--report", str(report),
                 "--cases-dir", str(tmp_path / "cases")]) == 0
    state = json.loads(report.with_suffix(".json").read_text())
    assert state["targets"]["opencl"]["graphs"] == 12
    assert state["header"]["driver"] == "POCL_EXTRA_BUILD_FLAGS=-cl-opt-disable"
    assert state["header"]["sessions"][-1]["driver"] == state["header"]["driver"]


EMPTY_BATCH_DOT = '''hir @fuzz {
  input %in0 : bf16[5,0]
  input %in1 : bf16[0,5,5]
  %1 : bf16[0,5] = dot_general(%in0, %in1) {batch=((1,), (0,)), contract=((0,), (1,))} loc("fuzz.py":1)
  return %1
}
'''


def test_opencl_runs_the_case_pocl_crashes_on_without_optimisation() -> None:
    """The crash of opencl's shard (2026-12-06, case opencl-2d39a12c3a, docs/reliability.md):
    PoCL 3.1 dies (SIGSEGV) on this empty-batch dot_general only when programs are built with
    -cl-opt-disable (``--driver-fast-compile``); rlx's own build runs it and agrees with the
    reference (an empty result)."""
    import numpy as np

    from rlx_core.ir.parser import parse
    from rlx_core.testing.fuzz import executing_targets
    from rlx_core.testing.generator import Case
    from rlx_core.testing.runner import run_one

    if "opencl" not in executing_targets():
        pytest.skip("opencl (PoCL or another OpenCL device) does not execute here")
    if "-cl-opt-disable" in os.environ.get("POCL_EXTRA_BUILD_FLAGS", ""):
        pytest.skip("PoCL's -O0 build crashes on this case (the fuzz-only fast setting)")
    g = parse(EMPTY_BATCH_DOT)
    o = run_one("opencl", Case(g, [np.zeros((5, 0), np.float32), np.zeros((0, 5, 5), np.float32)]))
    assert o.status == "ok", o.detail


def test_report_imports_and_round_trips_figures_without_numpy() -> None:
    """rlx_core.testing.report (and the deviations table it reads) import without numpy: a
    run's figures load and round-trip through their JSON form where numpy is absent."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['numpy'] = None\n"
            "from rlx_core.testing import report as r\n"
            "s = r.TargetStats(graphs=3, next=3); s.status['pass'] = 3\n"
            "assert r.stats_to_json(r.stats_from_json(r.stats_to_json(s))) == r.stats_to_json(s)\n"
            "assert r.input_policy('numpy')\n"
            "print('ok')")
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]
