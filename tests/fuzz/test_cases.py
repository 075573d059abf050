"""Replay every saved fuzz case (tests/fuzz/cases/*.rlx): each ran wrong or crashed once, was
shrunk by the fuzzer and fixed. ``status`` in its .json says what is expected now: ``fixed``
must pass on its target; ``known:<id>`` is an owned deviation (rlx_core/testing/deviations.py):
while it still differs the runner must classify it as ``known`` by that same entry (an entry
that was deleted, narrowed or renamed, or a case that now differs otherwise, fails: triage it
again), and then it xfails; once it passes, it passes (the owner's fix landed: mark it
``fixed`` and delete the entry); ``ambiguous`` is a case whose result evaluation order decides
(under- or overflow inside a reduction): the runner must call it ``overflow-ambiguous`` (or ok),
never a mismatch; ``driver-fast-only`` failed only under a driver's fast setting
(``--driver-fast-compile``, which rlx never builds with): it must pass with the driver's defaults;
``open`` fails (triage it: fix, or record the owner)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rlx_core.ir.printer import print_graph
from rlx_core.testing.cases import load
from rlx_core.testing.deviations import entries_for
from rlx_core.testing.driver_setting import FAST_ONLY, PASSES, fast_driver_env
from rlx_core.testing.generator import Case
from rlx_core.testing.runner import AMBIGUOUS, KNOWN, OK, run_one
from tests.conformance.harness import executable_target

CASES = sorted(Path(__file__).parent.joinpath("cases").glob("*.rlx"))


def replay(path: Path, case: Case, meta: dict[str, Any]) -> str:
    """Run a saved case on its target and check its ``status``; the xfail reason of a ``known``
    case that still differs (explained by its own entry), else ''."""
    target = meta["target"]
    outcome = run_one(target, case)
    status = meta["status"]
    if status.startswith("known:") and outcome.status != OK:
        entry = status.split(":", 1)[1]
        assert entry in {k.id for k in entries_for(target)}, (
            f"{path.name}: {status}, but deviations.py has no entry {entry!r} for {target}")
        assert (outcome.status, outcome.known) == (KNOWN, entry), (
            f"{path.name} ({status}) is no longer explained by {entry}: {outcome.status} "
            f"{outcome.known} {outcome.detail}\n{print_graph(case.graph)}")
        return f"{status}: {meta.get('why', '')} ({outcome.detail})"
    if status == "ambiguous":
        assert outcome.status in (OK, AMBIGUOUS), (path.name, outcome.status, outcome.detail)
        return ""
    if status == FAST_ONLY:  # as rlx builds it: the drivers' defaults
        assert outcome.status in PASSES, (path.name, outcome.status, outcome.detail)
        return ""
    assert outcome.status == OK, (f"{path.name} ({status}, {meta.get('detail', '')}): "
                                  f"{outcome.status} {outcome.detail}\n{print_graph(case.graph)}")
    return ""


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_saved_case(path: Path) -> None:
    case, meta = load(path)
    executable_target(meta["target"])
    if meta["status"] == FAST_ONLY and any(os.environ.get(k) for k in fast_driver_env([meta["target"]])):
        pytest.skip("a driver's fast setting is set in this process: the case fails under it")
    why = replay(path, case, meta)
    if why:
        pytest.xfail(why)


@pytest.mark.parametrize("status, message", [
    ("known:f32-overflow-sums", "no longer explained by f32-overflow-sums"),
    ("known:no-such-entry", "no entry 'no-such-entry' for numpy"),
    ("fixed", r"\(fixed, .*\): known at"),  # a known case that still differs is not fixed
])
def test_known_case_is_checked(status: str, message: str) -> None:
    """A ``known:`` case xfails only while its own entry explains it: replayed under another
    entry, one that does not exist, or as ``fixed``, the same numpy case fails."""
    path = Path(__file__).parent / "cases" / "numpy-ccd602811f.rlx"
    case, meta = load(path)
    assert meta["status"] == "known:f64-composite-specials"
    assert replay(path, case, meta).startswith("known:f64-composite-specials")
    with pytest.raises(AssertionError, match=message):
        replay(path, case, {**meta, "status": status})


def test_cases_folder_exists() -> None:
    assert Path(__file__).parent.joinpath("cases").is_dir()
