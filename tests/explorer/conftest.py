"""Shared fixtures: small compiled sessions (one per module) and a graph with hostile names."""

from __future__ import annotations

import pytest

import rlx_core as rlx
from rlx_core.cli import REPO_ROOT, load_model_file
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen, clean_name
from rlx_core.ir.graph import Graph, Level, Loc, TensorType, Value, ValueKind
from rlx_explorer.session import Session

MODELS = REPO_ROOT / "examples" / "models"
EVIL = "<img src=x onerror=alert(1)>"
EVIL_SCOPE = "</script><script>alert(2)</script>"


def hostile_graph() -> Graph:
    """Value names pass through clean_name (as every frontend does); file and scope strings
    are not sanitised anywhere, so they reach the explorer raw."""
    x = Value(clean_name(EVIL), TensorType(dt.f32, (2, 3)), ValueKind.INPUT)
    b = Builder(NameGen([x.name]), loc=Loc(file=EVIL + ".py", line=3, scope=EVIL_SCOPE))
    y = b.emit("exp", [x], name=EVIL + "_out")
    z = b.emit("softmax", [y], {"axis": -1})
    return Graph("evil", Level.HIR, (x,), (), tuple(b.nodes), (z.name,))


@pytest.fixture(scope="session")
def mlp_bundle() -> dict:
    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    return Session(fn, ins, ("numpy",)).bundle()


@pytest.fixture(scope="session")
def illegal_bundle() -> dict:
    fn, ins, _ = load_model_file(MODELS / "illegal_f64.py")
    return Session(fn, ins, ("webgpu", "numpy")).bundle()


@pytest.fixture(scope="session")
def hostile_bundle() -> dict:
    import numpy as np

    return Session(hostile_graph(), (np.ones((2, 3), np.float32),), ("numpy",)).bundle()


@pytest.fixture(scope="session")
def jit_bundle() -> dict:
    import numpy as np

    @rlx.jit
    def scaled(x):
        return rlx.nn.softmax(x * 2.0, axis=-1)

    scaled(np.ones((2, 4), np.float32))
    scaled(np.ones((2, 4), np.float32))
    scaled(np.ones((3, 4), np.float32))
    return Session(scaled, (np.ones((2, 4), np.float32),), ("numpy",)).bundle()
