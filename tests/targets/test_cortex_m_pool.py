"""cortex-m: int8 max_pool2d in the firmware (rlx_maxpool_nhwc of csrc/rlx_conv.h, NCHW through
the scratch buffers), alone and after int_conv2d -> requantize, bit for bit against the numpy
int8 reference under QEMU; the IR's i8 / u8 max_pool2d against torch's float pooling."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import DTypeError
from rlx_core.quant import ops as qops
from rlx_core.targets.registry import get_target

OK, WHY = get_target("cortex-m").available()
needs_tools = pytest.mark.skipif(not OK, reason=f"cortex-m cannot run here: {WHY}")


def _inputs(rng, npt, shape, calls=3):
    info = np.iinfo(npt)
    xs = [rng.integers(info.min, int(info.max) + 1, shape).astype(npt) for _ in range(calls)]
    xs[0][:] = info.min  # every tap the least value: padding must still not win
    return xs


def test_int8_max_pool_reference_matches_torch():
    """Max commutes with the int -> float map: the reference (and its decomposition on the
    cpu target) equals torch's float max pooling cast back."""
    import torch

    rng = np.random.default_rng(7)
    for npt in (np.int8, np.uint8):
        x = _inputs(rng, npt, (2, 3, 7, 6), 1)[0]
        x[1] = rng.integers(np.iinfo(npt).min, int(np.iinfo(npt).max) + 1, x.shape[1:])
        g = rlx.trace(lambda x: rlx.nn.max_pool2d(x, (3, 2), (2, 2), (1, 1)), x)
        want = torch.nn.functional.max_pool2d(torch.tensor(x.astype(np.float32)), (3, 2),
                                              (2, 2), (1, 1)).numpy().astype(npt)
        for target in ("numpy", "cpu"):
            got = np.asarray(rlx.compile(g, target=target)(x))
            assert got.dtype == npt and np.array_equal(got, want), target


def test_avg_pool_stays_float():
    x = np.zeros((1, 1, 4, 4), np.int8)
    with pytest.raises(DTypeError):
        rlx.trace(lambda x: rlx.nn.avg_pool2d(x, (2, 2), (2, 2)), x)


def _run(g, calls):
    from rlx_core.targets.cortex_m.runtime import firmware_of

    exe = rlx.compile(g, target="cortex-m")
    ref = rlx.compile(g, target="numpy")
    res = firmware_of(exe).run_calls([[x] for x in calls])
    for x, got in zip(calls, res.outputs, strict=True):
        want = ref(x)
        for a, b in zip(got, want if isinstance(want, tuple) else (want,), strict=True):
            b = np.asarray(b)
            assert a.dtype == b.dtype and np.array_equal(a, b)
    return exe, res


@needs_tools
@pytest.mark.parametrize("npt,shape,kernel,stride,pad", [
    (np.int8, (2, 3, 7, 6), (3, 3), (2, 2), (1, 1)),  # NCHW -> NHWC -> pool -> NCHW
    (np.uint8, (1, 1, 6, 5), (2, 2), (2, 1), (0, 1)),  # one channel: no layout change
    (np.int8, (1, 4, 4, 4), (4, 4), (1, 1), (0, 0)),  # one output pixel per channel
])
def test_max_pool2d_in_firmware_bit_exact(npt, shape, kernel, stride, pad):
    rng = np.random.default_rng(8)
    g = rlx.trace(lambda x: rlx.nn.max_pool2d(x, kernel, stride, pad), np.zeros(shape, npt))
    exe, res = _run(g, _inputs(rng, npt, shape))
    assert min(res.instructions) > 0
    src = exe.program.sources["model.c"]
    assert f"rlx_maxpool_nhwc_{'u8' if npt is np.uint8 else 's8'}(" in src
    assert ("rlx_nhwc_to_nchw_" in src) == (shape[1] > 1 and kernel != shape[2:])


@needs_tools
def test_conv_requantize_pool_chain_bit_exact():
    """int_conv2d -> requantize -> relu (max with the zero point) -> max_pool2d -> flatten."""
    rng = np.random.default_rng(9)
    w = rng.integers(-127, 128, (4, 2, 3, 3)).astype(np.int8)
    b = rng.integers(-2000, 2000, 4).astype(np.int32)

    def model(x):
        acc = qops.int_conv2d(x, w, b, stride=(1, 1), padding=(1, 1), x_zero_point=3,
                              w_zero_point=0)
        q = qops.requantize(acc, [1 << 30] * 4, [-6] * 4, zero_point=-5, dtype="i8", axis=1)
        h = rlx.nn.max_pool2d(rlx.maximum(q, np.int8(-5)), (2, 2), (2, 2))
        return rlx.reshape(h, (h.shape[0], -1))

    calls = _inputs(rng, np.int8, (1, 2, 6, 6))
    _run(rlx.trace(model, calls[0]), calls)


def test_fpga_refuses_int8_max_pool_with_a_code():
    """The fpga target has no pooling unit: the shared strict check names the node."""
    from rlx_core.targets.cortex_m.errors import NoInt8KernelError

    g = rlx.trace(lambda x: rlx.nn.max_pool2d(x, (2, 2), (2, 2)), np.zeros((1, 2, 4, 4), np.int8))
    with pytest.raises(NoInt8KernelError, match="RLX-U002 %0 max_pool2d"):
        rlx.compile(g, target="fpga")


def test_a_float_max_pool_is_refused_for_its_operand_not_for_float_arithmetic():
    """The firmware has a max pool, on i8 / u8 values: a float one is refused as such (the
    operand's dtype is what is missing), with the fix that gets it there (quantize the model:
    static PTQ pools the int8 codes), not as generic float computation."""
    from rlx_core.targets.cortex_m.errors import FloatOpError

    g = rlx.trace(lambda x: rlx.nn.max_pool2d(x, (2, 2), (2, 2)),
                  np.zeros((1, 2, 4, 4), np.float32))
    with pytest.raises(FloatOpError) as err:
        rlx.compile(g, target="cortex-m")
    text = str(err.value)
    assert "RLX-U001" in text and "max pooling of f32 values: the firmware pools only i8 / u8" in text
    assert "quantize_static" in text and "computes in floating point" not in text
