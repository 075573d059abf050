"""A call on the CPU target checks its arguments once: the Executable checks and converts them,
then runs the program's ``run_checked_fn`` (NativeProgram.run_checked), which does not check
them again; ``program.run`` called directly still checks, with the same typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _add_exe():
    a = np.ones((4, 8), np.float32)
    return rlx.compile(lambda x, y: x + y, a, a, target="cpu", record=False)


def _no_second_check(*_args, **_kwargs):
    raise AssertionError("program.run (the checking path) was called")


@pytest.mark.parametrize("form", ["as-is", "f64", "strided", "big-endian", "list"])
def test_a_call_takes_the_checked_path_with_converted_arguments(form: str) -> None:
    exe = _add_exe()
    assert exe.program.run_checked_fn is not None
    exe.program.run_fn = _no_second_check
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    y = rng.standard_normal((4, 16)).astype(np.float32)[:, ::2]  # strided view
    arg = {"as-is": x, "f64": x.astype(np.float64), "strided": y,
           "big-endian": x.astype(">f4"), "list": x.tolist()}[form]
    want = np.asarray(arg, np.float32) + x
    np.testing.assert_array_equal(exe(arg, x), want)
    out = np.empty((4, 8), np.float32)  # out= takes the same path
    assert exe(arg, x, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_bad_arguments_keep_their_typed_errors() -> None:
    exe = _add_exe()
    a = np.ones((4, 8), np.float32)
    with pytest.raises(rlx.ArgumentError, match="compiled for f32"):
        exe(np.ones((3, 8), np.float32), a)
    with pytest.raises(rlx.ArgumentError, match="2 argument"):
        exe(a)
    with pytest.raises(rlx.ArgumentError, match="compiled for f32"):
        exe(np.ones((4, 8), np.int32) > 0, a)
    # program.run called directly is not behind the Executable's check: it checks for itself
    with pytest.raises(rlx.ArgumentError, match="2 input"):
        exe.program.run([a], {})
    with pytest.raises(rlx.ArgumentError, match="shape"):
        exe.program.run([a, np.ones((2, 8), np.float32)], {})


def test_bf16_inputs_are_converted_by_the_programs_own_run() -> None:
    """A bf16 input's host form (f32) is not its storage form (the top 16 bits), so such a
    program offers no run_checked_fn and run converts it."""
    x = np.array([1.0, 2.5, -3.0, 1e-3], np.float32)
    exe = rlx.compile(lambda v: v * 2, rlx.spec((4,), "bf16"), target="cpu", record=False)
    assert exe.program.run_checked_fn is None
    got = np.asarray(exe(x), np.float32)
    want = np.asarray(rlx.compile(lambda v: v * 2, rlx.spec((4,), "bf16"), target="numpy",
                                  record=False)(x), np.float32)
    np.testing.assert_array_equal(got, want)
