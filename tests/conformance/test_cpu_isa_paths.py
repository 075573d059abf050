"""The conformance checks on every CPU ISA path this machine can run below its own
(RLX_CPU_ISA=avx2, sse, ...; rlx_core/targets/cpu/isa.py): a sample per forced path here, in
CI. The whole suite on one path: ``RLX_CPU_ISA=sse pytest tests/conformance -k cpu``."""

from __future__ import annotations

import pytest

from rlx_core.targets.cpu import isa
from tests.conformance import test_hir_ops, test_mir_ops
from tests.dispatch.test_decompositions import CASES

LOWER = isa.forced_paths()[1:]
PATHS = LOWER or ["(none)"]
# a sample: the f32 families of the MIR suite and a spread of HIR cases (matmul, softmax,
# layer norm among them when present)
HIR_SAMPLE = sorted({i for i, c in enumerate(CASES)
                     if c[0] in ("matmul", "softmax", "layer_norm", "gelu", "conv2d", "attention")}
                    | set(range(0, len(CASES), max(1, len(CASES) // 8))))


@pytest.fixture(params=PATHS)
def path(request, monkeypatch) -> str:
    if request.param == "(none)":
        pytest.skip(f"this CPU's own path ({isa.detect().native}) is the lowest it has")
    monkeypatch.setenv("RLX_CPU_ISA", request.param)
    assert isa.detect().family == request.param
    return request.param


@pytest.mark.parametrize("check", ["unary", "binary", "reductions", "movement"])
def test_mir_families_f32_on_a_forced_path(path: str, check: str) -> None:
    fn = {"unary": test_mir_ops.test_unary, "binary": test_mir_ops.test_binary_and_compare,
          "reductions": test_mir_ops.test_reductions, "movement": test_mir_ops.test_movement}
    fn[check]("cpu", "f32")


@pytest.mark.parametrize("case", HIR_SAMPLE, ids=[f"{CASES[i][0]}-{i}" for i in HIR_SAMPLE])
def test_hir_sample_on_a_forced_path(path: str, case: int) -> None:
    test_hir_ops.test_hir_op("cpu", case)
