"""The donation rule (runtime/donation.py) learns a target's in-place matmul forms from the
target (``matmul_in_place``, as ``matmul_norms`` offers the norm epilogues): the cpu offers its
SGD update, a target without the hook gets no matmul output written in place, and no module
of the rule or of a target reaches across that line."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import rlx_core
from rlx_core.api import lower
from rlx_core.runtime.donation import inplace_outputs
from rlx_core.targets.registry import get_target

_ROOT = Path(rlx_core.__file__).parent
_ok, _why = get_target("cpu").available()
cpu = pytest.mark.skipif(not _ok, reason=f"CPU target unavailable: {_why}")


def _update(g, x, w):
    return w - 0.01 * (g.T @ x)


def _update_read_by_gemm(g, x, w):
    return w - 0.01 * (w @ (x.T @ x))  # W read by the GEMM too: not the form


def _lir(fn):
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((16, 8), np.float32), rng.standard_normal((16, 12), np.float32),
            rng.standard_normal((8, 12), np.float32))
    return lower(fn, *args, target="cpu")[2]


def _matmul(lir):
    (k,) = [k for k in lir.kernels if k.kind == "matmul"]
    return k


@cpu
def test_the_cpu_offers_its_update_and_the_rule_follows_the_target() -> None:
    lir = _lir(_update)
    w = lir.inputs[2].name
    assert get_target("cpu").matmul_in_place(_matmul(lir)) == w
    assert inplace_outputs(lir, (2,), "cpu") == (2,)
    assert inplace_outputs(lir, (2,)) == (2,)  # the default: the specialization cache's
    assert inplace_outputs(lir, (0, 1), "cpu") == (-1,)  # g and x are read by the GEMM
    # numpy has no matmul_in_place: the same kernel is offered nothing
    assert not hasattr(get_target("numpy"), "matmul_in_place")
    assert inplace_outputs(lir, (2,), "numpy") == (-1,)


@cpu
def test_the_cpu_does_not_offer_a_w_its_gemm_reads() -> None:
    lir = _lir(_update_read_by_gemm)
    for k in lir.kernels:
        if k.kind == "matmul":
            assert get_target("cpu").matmul_in_place(k) is None
    assert inplace_outputs(lir, (2,), "cpu") == (-1,)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (at the top or inside a function)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_targets_import_no_runtime_and_the_rule_imports_no_target_folder() -> None:
    """The targets sit below the runtime: none imports rlx_core.runtime. The donation rule
    reaches targets through the registry and the interface only (targets/base.py)."""
    crossing = {str(p.relative_to(_ROOT)): sorted(m for m in _imports(p)
                                                  if m.startswith("rlx_core.runtime"))
                for p in (_ROOT / "targets").rglob("*.py")}
    assert {p: m for p, m in crossing.items() if m} == {}
    rule = {m for m in _imports(_ROOT / "runtime" / "donation.py")
            if m.startswith("rlx_core.targets")}
    assert rule <= {"rlx_core.targets.base", "rlx_core.targets.registry"}
