"""Small scenes shared by the splatting tests."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.splat import scene

W, H = 40, 32  # three tiles by two, the last column and row partial


@pytest.fixture
def cam() -> tuple[np.ndarray, np.ndarray]:
    return scene.orbit(20.0, 10.0, 3.0), scene.intrinsics(W, H)


@pytest.fixture
def gauss() -> scene.Gaussians:
    return scene.random_gaussians(12, 3, seed=1, extent=0.6, scale=0.15)
