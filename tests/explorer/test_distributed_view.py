"""``%%rlx --ranks N``: the static distributed view (tensor-parallel partition per rank and the
pipeline timeline) built without launching ranks."""

from __future__ import annotations

from typing import Any

import pytest

from rlx_explorer import magics
from rlx_explorer.views.distributed import bubble_of, simulate_schedule

CELL = '''
import numpy as np
import rlx_core as rlx
from rlx_core.models.mlp import init_mlp, mlp_logits
P = init_mlp((12, 16, 16, 5), seed=0)
def model(x):
    return mlp_logits(P, x)
def example_inputs():
    return (np.ones((4, 12), np.float32),)
'''


@pytest.mark.parametrize("kind", ["1f1b", "gpipe"])
@pytest.mark.parametrize("stages, micro", [(2, 4), (4, 8), (3, 2)])
def test_the_simulated_bubble_is_the_ideal_one(kind: str, stages: int, micro: int) -> None:
    events = simulate_schedule(kind, stages, micro)
    assert len(events) == 2 * stages * micro
    assert bubble_of(events) == pytest.approx((stages - 1) / (micro + stages - 1))
    # an action never starts before its input exists
    end = {(e["kind"], e["rank"], e["micro"]): e["end"] for e in events}
    for e in events:
        if e["kind"] == "F" and e["rank"] > 0:
            assert e["start"] >= end[("F", e["rank"] - 1, e["micro"])]


def test_ranks_magic_shows_the_partition_and_the_timeline(monkeypatch) -> None:
    shown: list[Any] = []
    monkeypatch.setattr(magics, "_show", shown.append)
    assert magics.run_cell("--ranks 2 --micro 4", CELL, {}) == []
    page = shown[-1].data
    assert "model on 2 ranks" in page and "rank 0 @" in page and "rank 1 @" in page
    # fc1 column-parallel, fc2 row-parallel: one replicate and one all-reduce per rank
    assert page.count("<b>#") == 4 and page.count("all_reduce</b>") == 2
    assert "(256 B)" in page  # the all-reduced f32[4, 16]: 256 bytes
    assert "<svg" in page and "bubble 0.200" in page
