"""ONNX TopK (sort-free ranks) against onnx.reference, on numpy and cpu.

On cpu these programs are regression tests for two GCC 12.2 miscompiles the C renderer works
around: a load inside ``c ? in[i] : 0`` in a reduction (mis-vectorised into a masked load;
c_common/body.py hoists such loads) and a small i64 constant table stored as a wrong vector
constant with AVX-512 (c_common/kernels.py reads tables through a volatile pointer).
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.frontend.onnx_import.errors import UnsupportedOp

pytest.importorskip("onnx")

from _one_node import check, model  # noqa: E402

from rlx_core.targets.cpu.target import CpuTarget  # noqa: E402

TARGETS = ["numpy", pytest.param("cpu", marks=pytest.mark.skipif(
    not CpuTarget().available()[0], reason=f"cpu target: {CpuTarget().available()[1]}"))]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [1, 0, -1])
def test_topk_matches_reference(target: str, largest: int, axis: int) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1].copy()
    x[1] = [5.0, 5.0, -1.0, 7.0]  # a tie: the lower index comes first
    k = np.array([2 if axis == 0 else 3], np.int64)
    m = model("TopK", {"x": x}, n_out=2, opset=11, consts={"k": k}, axis=axis,
              largest=largest)
    vals, idx = check(m, {"x": x}, target)
    assert idx.dtype == np.int64


@pytest.mark.parametrize("target", TARGETS)
def test_topk_nan_counts_as_largest_and_ints_work(target: str) -> None:
    x = np.array([[1.0, np.nan, 3.0, 2.0]], np.float32)
    m = model("TopK", {"x": x}, n_out=2, opset=11, consts={"k": np.array([2], np.int64)})
    got = check(m, {"x": x}, target)
    assert got[1].tolist() == [[1, 2]]
    xi = np.array([[4, -2, 9, 9, 0]], np.int32)
    mi = model("TopK", {"x": xi}, n_out=2, opset=11, consts={"k": np.array([3], np.int64)},
               largest=0)
    check(mi, {"x": xi}, target)


def test_topk_k_out_of_range_is_rejected() -> None:
    from rlx_core.frontend.onnx_backend import backend_for

    x = np.zeros((2, 3), np.float32)
    m = model("TopK", {"x": x}, n_out=2, opset=11, consts={"k": np.array([4], np.int64)})
    rep = backend_for("numpy").prepare(m, "CPU")
    with pytest.raises(UnsupportedOp, match="K=4"):
        rep.run([x])
