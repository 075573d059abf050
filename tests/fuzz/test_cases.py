"""Replay every saved fuzz case (tests/fuzz/cases/*.rlx): each ran wrong or crashed once, was
shrunk by the fuzzer and fixed. ``status`` in its .json says what is expected now: ``fixed``
must pass on its target; ``known:<id>`` is an owned deviation (rlx_core/testing/deviations.py)
and xfails while it still differs; ``ambiguous`` is a case whose result evaluation order decides
(under- or overflow inside a reduction): the runner must call it ``overflow-ambiguous`` (or ok),
never a mismatch; ``open`` fails (triage it: fix, or record the owner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlx_core.ir.printer import print_graph
from rlx_core.testing.cases import load
from rlx_core.testing.runner import AMBIGUOUS, OK, run_one
from tests.conformance.harness import executable_target

CASES = sorted(Path(__file__).parent.joinpath("cases").glob("*.rlx"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_saved_case(path: Path) -> None:
    case, meta = load(path)
    target = meta["target"]
    executable_target(target)
    outcome = run_one(target, case)
    status = meta["status"]
    if status.startswith("known:") and outcome.status != OK:
        pytest.xfail(f"{status}: {meta.get('why', '')} ({outcome.detail})")
    if status == "ambiguous":
        assert outcome.status in (OK, AMBIGUOUS), (path.name, outcome.status, outcome.detail)
        return
    assert outcome.status == OK, (f"{path.name} ({status}, {meta.get('detail', '')}): "
                                  f"{outcome.status} {outcome.detail}\n{print_graph(case.graph)}")


def test_cases_folder_exists() -> None:
    assert Path(__file__).parent.joinpath("cases").is_dir()
