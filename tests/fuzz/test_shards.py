"""Long fuzz runs across sessions: a run stopped by its time limit resumes where it stopped and
runs the same cases an uninterrupted run would, shards of one seed merge into one report per
target whose figures are the sum, and the same cases are never counted twice."""

from __future__ import annotations

import json
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
