"""benchmarks/ab_cnn.py: variants in worker processes of their own, timed in turns."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
pytest.importorskip("torch", reason="torch is not installed")

ROOT = Path(__file__).resolve().parents[2]


def test_a_variant_names_its_tree_and_settings() -> None:
    from benchmarks.ab_cnn import parse_variant

    assert parse_variant("new") == ("new", str(ROOT), {})
    assert parse_variant("off=.:RLX_ARENA_INPLACE=0:RLX_CB_PFN=0") == (
        "off", str(ROOT), {"RLX_ARENA_INPLACE": "0", "RLX_CB_PFN": "0"})
    assert parse_variant("old=/tmp") == ("old", "/tmp", {})


def test_two_workers_take_turns_and_agree() -> None:
    """Two ONNX Runtime workers (no compile, so the test stays short) on a small VGG: every
    round times each of them ``block`` calls, rotating which goes first."""
    from benchmarks.ab_cnn import run

    args = argparse.Namespace(net="vgg", batch=1, size=32, variants="ort,ortb", rounds=3,
                              block=2, settle=0.0, budget=60.0, fifo="")
    times, rounds = run(args)
    assert [len(t) for t in times.values()] == [6, 6]
    assert all(t > 0 for ts in times.values() for t in ts)
    assert len(rounds) == 3 and all(set(r) == {"ort", "ortb"} for r in rounds)
