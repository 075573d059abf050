"""The C prelude's f16 conversions without _Float16 (RLX_NO_FLOAT16: Hexagon's clang, old
compilers) round exactly like numpy, subnormals included (they were off by a factor of 2)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from rlx_core.targets.c_common.prelude import prelude


def test_bit_conversions_match_numpy(tmp_path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "f16.c"
    src.write_text("#define RLX_NO_FLOAT16 1\n" + prelude() + r"""
#include <stdio.h>
int main(void) {
    float f;
    while (scanf("%a", &f) == 1) printf("%u %a\n", (unsigned)rlx_f16_st(f), rlx_f16_ld(rlx_f16_st(f)));
    return 0;
}
""")
    exe = tmp_path / "f16"
    subprocess.run([cc, "-O1", str(src), "-o", str(exe), "-lm"], check=True)
    rng = np.random.default_rng(0)
    vals = np.concatenate([rng.standard_normal(1500) * 10.0 ** rng.integers(-9, 6, 1500),
                           [2.0 ** -25, 1.5 * 2.0 ** -24, 0.999 * 2.0 ** -14, 65519.0, 65520.0,
                            0.0, -0.0, -3e-6]]).astype(np.float32)
    out = subprocess.run([str(exe)], input="\n".join(float(v).hex() for v in vals),
                         capture_output=True, text=True, check=True).stdout.split()
    with np.errstate(over="ignore"):
        want = vals.astype(np.float16)
    got_bits = np.array(out[0::2], dtype=np.uint32).astype(np.uint16)
    np.testing.assert_array_equal(got_bits, want.view(np.uint16))
    back = np.array([float.fromhex(x) for x in out[1::2]], np.float32)
    np.testing.assert_array_equal(back, want.astype(np.float32))
