"""The CI-sized differential fuzz run: fixed seeds, a few hundred small random graphs over every
executing target in the registry, each against the numpy reference. 0 unexplained mismatches and
0 crashes; known deviations are allowed only through the documented table
(rlx_core/testing/deviations.py). The long run is ``python -m rlx_core.testing.fuzz``."""

from __future__ import annotations

import collections

import pytest

from rlx_core.ir.printer import print_graph
from rlx_core.targets.registry import target_names
from rlx_core.testing.generator import generate
from rlx_core.testing.profile import profile_for
from rlx_core.testing.runner import CRASH, MISMATCH, run_batch
from tests.conformance.harness import executable_target

# (cases, cases per compiled pack): the numpy target is cheap, compiled targets cost a build
# per pack, so they get fewer, larger packs
BUDGET = {"numpy": (160, 80)}
DEFAULT_BUDGET = (48, 24)


@pytest.mark.parametrize("target", target_names())
def test_random_graphs_match_reference(target: str) -> None:
    executable_target(target)
    n, per_pack = BUDGET.get(target, DEFAULT_BUDGET)
    profile = profile_for(target)
    cases = [generate(profile, (2026, i)) for i in range(n)]
    outcomes = []
    for k in range(0, n, per_pack):
        outcomes += run_batch(target, cases[k:k + per_pack])
    counts = collections.Counter(o.status for o in outcomes)
    bad = [o for o in outcomes if o.status in (MISMATCH, CRASH)]
    assert not bad, "\n\n".join(
        f"{o.status} {o.detail}\nseed {o.case.seed}\n{print_graph(o.case.graph)}" for o in bad[:3])
    assert counts["ok"] >= n // 2, f"too few cases compared cleanly on {target}: {dict(counts)}"
