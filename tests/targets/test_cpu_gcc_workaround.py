"""GCC 12 with AVX-512BW miscompiled a bf16 pad (found by the fuzzer on an Emerald Rapids):
a source that loads bf16 storage now builds with toolchain.GCC_AVX512_WORKAROUND where the
code is AVX-512."""

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir.parser import parse
from rlx_core.targets.c_common.prelude import prelude
from rlx_core.targets.cpu import toolchain
from rlx_core.targets.cpu.toolchain import Compiler, is_gcc

PAD = """hir @fuzz {
  input %in0 : bf16[7,1,5]
  %0 : bf16[10,2,5] = pad(%in0) {high=(1, 0, 0), low=(2, 1, 0), value=-2.5}
  return %0
}
"""


def test_bf16_pad_with_a_load_in_its_branch_is_right_on_every_isa_path():
    available, why = toolchain.compiler_status()
    if not available:
        pytest.skip(why)
    x = np.ones((7, 1, 5), np.float32)
    got = np.asarray(rlx.compile(parse(PAD), target="cpu", record=False)(x), np.float32)
    want = np.full((10, 2, 5), -2.5, np.float32)
    want[2:9, 1:2, :] = 1.0
    np.testing.assert_array_equal(got, want)


def test_the_workaround_goes_to_gcc_on_avx512_code_only():
    gcc = "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc."
    clang = "Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu"
    assert is_gcc(gcc) and is_gcc("gcc (GCC) 13.2.0") and not is_gcc(clang) and not is_gcc("")
    bf16 = "float y = i < n ? rlx_bf16_ld(x[i]) : 0.0f;"
    on = Compiler("cc", gcc, ("-O3", "-march=native"), True, avx512=True)
    assert on.workarounds(bf16) == toolchain.GCC_AVX512_WORKAROUND
    assert set(on.workarounds(bf16)) <= set(on.flags_for(bf16))
    assert on.workarounds("float y = x[i];") == ()  # only a conditional bf16 load
    assert on.workarounds("float y = rlx_bf16_ld(x[i]);") == ()
    assert on.workarounds(prelude() + "float y = x[i];") == ()  # not the prelude's own use
    assert on.workarounds(prelude() + bf16) == toolchain.GCC_AVX512_WORKAROUND
    assert Compiler("cc", clang, ("-O3",), True, avx512=True).workarounds(bf16) == ()
    assert Compiler("cc", gcc, ("-O3",), True, avx512=False).workarounds(bf16) == ()
    forced = Compiler("cc", gcc, ("-O3",), True, avx512=True, isa_flags=("-mno-avx512f",))
    assert forced.workarounds(bf16) == ()
