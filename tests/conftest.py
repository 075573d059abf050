"""Shared test fixtures: the example-model loader and numerical comparison helpers."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rlx_core.cli import load_model_file

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"

# One place for tolerances per dtype (absolute + relative).
TOLERANCE = {"f16": 2e-2, "bf16": 5e-2, "f32": 2e-5, "f64": 1e-10}


def assert_close(got, want, dtype: str = "f32", scale: float = 1.0) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return
    tol = TOLERANCE.get(dtype, 1e-5) * scale
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.fixture
def model_file():
    def load(name: str):
        return load_model_file(MODELS / f"{name}.py")

    return load


os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run first (otherwise in collection order): under xdist
    (scripts/test.sh, ``--dist worksteal``) the long compiles then overlap the short tests
    instead of one of them keeping a worker busy while the other has finished."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
