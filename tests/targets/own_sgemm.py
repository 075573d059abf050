"""Shared by the tests of rlx's own f32 GEMM (sgemm.py) and what is built on it."""

from __future__ import annotations

import pytest

from rlx_core.targets.cpu import sgemm
from rlx_core.targets.cpu.blas import find_blas
from rlx_core.targets.cpu.toolchain import find_compiler


def skip_unless_own_sgemm() -> None:
    """Skip unless f32 GEMMs route to the own kernel on this machine (prepacked panels and
    tile epilogues exist only there)."""
    if find_blas()[0] is None:
        pytest.skip(f"no BLAS here ({find_blas()[1]}): GEMMs are generated loop nests")
    ok, why = sgemm.available(find_compiler())
    if not ok:
        pytest.skip(f"own sgemm not used here: {why}")
