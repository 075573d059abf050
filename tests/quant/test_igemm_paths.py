"""Every int8 kernel path this machine has, each forced in a process of its own
(``RLX_IGEMM_ISA``; cpu/igemm.py): AVX2 (the sign trick, w7 / w77 / w66 tiles), AVX-VNNI,
AVX512-VNNI and AMX-INT8 tiles all equal the numpy reference, as the portable one does
(tests/quant/test_*int_linear.py run that one and the CPU's own). The AMX walk takes K in
multiples of 64: the shapes here have them, with rows past a 16- and 32-row block and panels
past a pair. ``RLX_CPU_ISA=avx2`` caps the kernels like ``RLX_IGEMM_ISA=avx2``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import igemm
from tests.quant.portable_tile import assert_passes_on_path

# (input shape, out features, bias) for dynamic_int_linear / static_int_linear: K of 64, 128
# and 384 (the AMX walk), rows of 50 (a 32-row item, then 16 + 2), 9 and 17 panels
AMX_SHAPES = (((2, 25, 128), 130, True), ((50, 64), 17, False), ((1, 9, 384), 272, True))
CODE = ("import tests.quant.test_dynamic_int_linear as d, tests.quant.test_static_int_linear "
        "as s, tests.quant.test_requantized_int_linear as r, tests.quant.test_igemm as g; "
        "import tests.quant.test_igemm_paths as p; "
        "d.cases(d.SHAPES[2:4] + p.AMX_SHAPES, d.BITS); "
        "s.cases(s.SHAPES[2:4] + p.AMX_SHAPES, s.BITS); r.cases(); r.extremes(); "
        "g.packed_cases()")


@pytest.fixture
def cpu():
    ok, why = rlx.api.get_target("cpu").available()
    if not ok:
        pytest.skip(f"cpu: {why}")


@pytest.mark.slow  # builds every int8 kernel on each forced path: run first (tests/conftest.py)
@pytest.mark.parametrize("path", igemm.PATHS[1:])
def test_each_path_matches_the_reference(cpu, path):
    if path not in igemm.paths_here():
        pytest.skip(f"this machine has no {path} int8 path (it has {igemm.paths_here()})")
    assert_passes_on_path(CODE, path)


def test_forced_avx2_family_caps_the_kernels(cpu):
    """RLX_CPU_ISA=avx2 compiles without AVX-512 and AVX-VNNI: the kernels take AVX2 (and
    still equal the reference, compiled for that family)."""
    if not igemm.cpu_isa_flags()["avx2"]:
        pytest.skip("no AVX2 here")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "RLX_CPU_ISA": "avx2", "PYTHONPATH": str(root)}
    env.pop("RLX_IGEMM_ISA", None)
    code = ("from rlx_core.targets.cpu import igemm; assert igemm.isa_here() == 'avx2'; "
            "import tests.quant.test_dynamic_int_linear as d, tests.quant.test_igemm_paths "
            "as p; d.cases(p.AMX_SHAPES, d.BITS[:2]); print('ok')")
    res = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-3000:]


def test_unknown_path_is_a_typed_error(monkeypatch):
    monkeypatch.setenv("RLX_IGEMM_ISA", "sse9")
    with pytest.raises(igemm.IgemmIsaError, match="RLX-Q005|not an int8 kernel path"):
        igemm.isa_here()
