"""GCC 12 with AVX-512BW miscompiled a bf16 pad, and with AVX512-FP16 an f16 pad (both found by
the fuzzer on an Emerald Rapids): a source with a conditional bf16 or f16 load now builds with
toolchain.GCC_AVX512_WORKAROUND where the code is AVX-512."""

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


F16_PAD = """hir @fuzz {
  input %a : f16[4,3,5,2]
  input %b : f16[5,1]
  %0 : f16[7,3,8,3] = pad(%a) {high=(2, 0, 1, 1), low=(1, 0, 2, 0), value=-2.5}
  %1 : f16[1] = reduce_max(%b) {axes=(0,)}
  return %0, %1
}
"""


def test_f16_pad_beside_another_kernel_is_right():
    """The fuzz case [20261221, 20526, 200], found inside a pack: with a second kernel in the
    program GCC 12's -O3 AVX512-FP16 code wrote 0 for 48 of the 120 padded-in elements (alone,
    the same kernel was right)."""
    available, why = toolchain.compiler_status()
    if not available:
        pytest.skip(why)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 3, 5, 2)).astype(np.float16)
    b = rng.standard_normal((5, 1)).astype(np.float16)
    got = rlx.compile(parse(F16_PAD), target="cpu", record=False)(a, b)
    want = np.pad(a, ((1, 2), (0, 0), (2, 1), (0, 1)), constant_values=np.float16(-2.5))
    np.testing.assert_array_equal(np.asarray(got[0]), want)
    np.testing.assert_array_equal(np.asarray(got[1]), b.max(axis=0))


def test_the_workaround_goes_to_gcc_on_avx512_code_only():
    gcc = "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc."
    clang = "Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu"
    assert is_gcc(gcc) and is_gcc("gcc (GCC) 13.2.0") and not is_gcc(clang) and not is_gcc("")
    bf16 = "float y = i < n ? rlx_bf16_ld(x[i]) : 0.0f;"
    on = Compiler("cc", gcc, ("-O3", "-march=native"), True, avx512=True)
    assert on.workarounds(bf16) == toolchain.GCC_AVX512_WORKAROUND
    assert set(on.workarounds(bf16)) <= set(on.flags_for(bf16))
    assert on.workarounds("float y = x[i];") == ()  # only a conditional bf16 / f16 load
    assert on.workarounds("float y = rlx_bf16_ld(x[i]);") == ()
    assert on.workarounds(prelude() + "float y = x[i];") == ()  # not the prelude's own use
    assert on.workarounds(prelude() + bf16) == toolchain.GCC_AVX512_WORKAROUND
    assert Compiler("cc", clang, ("-O3",), True, avx512=True).workarounds(bf16) == ()
    assert Compiler("cc", gcc, ("-O3",), True, avx512=False).workarounds(bf16) == ()
    forced = Compiler("cc", gcc, ("-O3",), True, avx512=True, isa_flags=("-mno-avx512f",))
    assert forced.workarounds(bf16) == ()


# the forms of a conditional load a standalone reproducer tried, in the pad's loop nest (GCC 12
# on AVX-512BW: the bf16 ones miscompiled without the workaround, the f16 one did not here, but
# an f16 pad did elsewhere: test_f16_pad_beside_another_kernel_is_right); each is built alone as
# build_shared builds a kernel, so each must carry the workaround itself
_COND = "((i0 >= 2 && i0 < 9) && (i1 >= 1 && i1 < 2))"
_LD, _F16 = "rlx_bf16_ld(in0[i0 * 5 + i1 * 5 + i2 + -15])", "rlx_f16_ld(in0[i0 * 5 + i1 * 5 + i2 + -15])"
_FORMS = {
    "load first": ("bf16", f"rlx_bf16_st(({_COND} ? {_LD} : -2.5f))"),
    "load second": ("bf16", f"rlx_bf16_st((!{_COND} ? -2.5f : {_LD}))"),
    "load in parentheses": ("bf16", f"rlx_bf16_st(({_COND} ? ({_LD}) : -2.5f))"),
    "arithmetic on the load": ("bf16", f"rlx_bf16_st(({_COND} ? {_LD} * 2.0f + 1.0f : -2.5f))"),
    "f16 load": ("f16", f"rlx_f16_st(({_COND} ? {_F16} : -2.5f))"),
}


@pytest.mark.parametrize("form", sorted(_FORMS))
def test_each_conditional_load_form_builds_right(form: str) -> None:
    import ctypes

    from rlx_core.targets.cpu.cached_build import build_shared

    available, why = toolchain.compiler_status()
    if not available:
        pytest.skip(why)
    dtype, expr = _FORMS[form]
    ctype = "uint16_t" if dtype == "bf16" else "rlx_f16"
    source = prelude() + (
        f"void rlx_form(const {ctype}* restrict in0, {ctype}* restrict out0) {{\n"
        "    for (int64_t i0 = 0; i0 < 10; ++i0)\n"
        "        for (int64_t i1 = 0; i1 < 2; ++i1)\n"
        "            for (int64_t i2 = 0; i2 < 5; ++i2)\n"
        f"                out0[i0 * 10 + i1 * 5 + i2] = {expr};\n}}\n")
    if dtype == "f16" and "RLX_HAVE_FLOAT16 1" not in source:
        pytest.skip("the f16 form is about _Float16 loads")
    lib = ctypes.CDLL(str(build_shared(source).path))
    x = np.arange(1, 36, dtype=np.float32)
    bits = ((x.view(np.uint32) >> 16).astype(np.uint16) if dtype == "bf16"
            else x.astype(np.float16).view(np.uint16))
    out = np.zeros(100, np.uint16)
    lib.rlx_form(bits.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p))
    got = ((out.astype(np.uint32) << 16).view(np.float32) if dtype == "bf16"
           else out.view(np.float16).astype(np.float32)).reshape(10, 2, 5)
    scale = 2.0 if "arithmetic" in form else 1.0
    want = np.full((10, 2, 5), -2.5, np.float32)
    want[2:9, 1, :] = x.reshape(7, 5) * scale + (1.0 if scale == 2.0 else 0.0)
    np.testing.assert_array_equal(got, want)


def test_the_marker_finds_each_bf16_and_f16_form():
    gcc = "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc."
    on = Compiler("cc", gcc, ("-O3", "-march=native"), True, avx512=True)
    for expr in (e for _, e in _FORMS.values()):
        assert on.workarounds(expr) == toolchain.GCC_AVX512_WORKAROUND, expr
    assert on.workarounds("const float t2 = rlx_bf16_ld(in1[i]);") == ()  # a select's operand
    assert on.workarounds("const float t2 = rlx_f16_ld(in1[i]);") == ()
