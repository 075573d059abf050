"""Fixtures for the model tests: targets that run here, the MiniLM folder, MNIST."""

from __future__ import annotations

import pytest

from rlx_core.targets.registry import get_target


def target_or_skip(name: str) -> str:
    """``name`` when that target runs on this machine, else skip with its own reason."""
    try:
        ok, why = get_target(name).available()
    except Exception as err:  # a target whose import fails is unavailable, not a test error
        ok, why = False, f"{type(err).__name__}: {err}"
    if not ok:
        pytest.skip(f"target {name} unavailable: {why}")
    return name
