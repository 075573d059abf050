"""ONNX Einsum through the importer, against numpy's einsum (the reference)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402

from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402

EQUATIONS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 4)]),
    ("...i,...i->...", [(2, 3, 4), (4,)]),
    ("ij->", [(3, 4)]),
    ("ijk,ikl,ilm->im", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("abc,cd,bd->ad", [(2, 3, 4), (4, 5), (3, 5)]),
    ("ba", [(3, 2)]),
    ("i,i", [(5,)] * 2),
]


@pytest.mark.parametrize("eq,shapes", EQUATIONS)
def test_einsum_matches_numpy(eq: str, shapes: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(0)
    inputs = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    got = check(model("Einsum", inputs, opset=12, equation=eq), inputs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], np.einsum(eq, *inputs.values()), rtol=1e-5, atol=1e-5)


def test_einsum_cpu() -> None:
    rng = np.random.default_rng(1)
    inputs = {"a": rng.standard_normal((2, 3, 3)).astype(np.float32),
              "b": rng.standard_normal((3, 4)).astype(np.float32)}
    check(model("Einsum", inputs, opset=12, equation="bii,ij->bj"), inputs, target="cpu",
          rtol=1e-5, atol=1e-5)


def test_einsum_rejects_bad_equation() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(UnsupportedOp, match="names 3 axes"):
        import_model(model("Einsum", {"x": x}, opset=12, equation="ijk->i"))
