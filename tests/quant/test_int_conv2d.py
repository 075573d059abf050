"""int_conv2d: the integer convolution (rlx_core/ir/ops/quant.py).

Its numpy reference equals a float64 convolution of the centred operands (exact: every sum is
an integer far below 2^53), and its decomposition (conv2d's im2col / depthwise / grouped GEMM
on centred i32) equals the reference bit for bit on the numpy and cpu targets."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.quant import ops as Q
from rlx_core.targets.numpy_ref import quant_semantics as qs

# (x dtype, C, O, groups, kernel, stride, padding, dilation, bias)
GEOMETRIES = [
    ("u8", 3, 4, 1, (3, 3), (1, 1), (1, 1), (1, 1), True),
    ("i8", 4, 4, 4, (3, 3), (2, 1), (1, 0), (1, 1), False),  # depthwise
    ("i8", 4, 6, 2, (2, 3), (1, 2), (0, 1), (2, 1), True),  # grouped, dilated
    ("u8", 1, 8, 1, (3, 3), (2, 2), (1, 1), (1, 1), True),  # an MNIST-style first layer
    ("u8", 5, 3, 1, (1, 1), (1, 1), (0, 0), (1, 1), False),  # pointwise
]


def _case(rng, xdt, c, o, g, k, with_bias):
    info = np.iinfo(np.dtype({"i8": "int8", "u8": "uint8"}[xdt]))
    x = rng.integers(info.min, info.max, (2, c, 7, 6), endpoint=True).astype(info.dtype)
    w = rng.integers(-128, 127, (o, c // g, *k), endpoint=True).astype(np.int8)
    bias = rng.integers(-5000, 5000, o).astype(np.int32) if with_bias else None
    return x, w, bias


@pytest.mark.parametrize("xdt,c,o,g,k,stride,pad,dil,with_bias", GEOMETRIES)
def test_reference_is_the_centred_float_convolution(xdt, c, o, g, k, stride, pad, dil,
                                                    with_bias):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, w, bias = _case(rng, xdt, c, o, g, k, with_bias)
    xzp, wzp = (9 if xdt == "u8" else -4), 2
    attrs = {"stride": stride, "padding": pad, "dilation": dil, "groups": g,
             "a_zero_point": xzp, "b_zero_point": wzp}
    got = qs.int_conv2d(attrs, [x, w] + ([bias] if bias is not None else []))
    want = torch.nn.functional.conv2d(
        torch.tensor(x.astype(np.float64) - xzp), torch.tensor(w.astype(np.float64) - wzp),
        None if bias is None else torch.tensor(bias.astype(np.float64)),
        stride=stride, padding=pad, dilation=dil, groups=g).numpy()
    assert got.shape == want.shape and np.array_equal(got, want.astype(np.int64))


@pytest.mark.parametrize("target", ["numpy", "cpu"])
@pytest.mark.parametrize("xdt,c,o,g,k,stride,pad,dil,with_bias", GEOMETRIES)
def test_decomposition_matches_reference(target, xdt, c, o, g, k, stride, pad, dil,
                                         with_bias):
    rng = np.random.default_rng(2)
    x, w, bias = _case(rng, xdt, c, o, g, k, with_bias)
    xzp = 0 if xdt == "u8" else 3

    def f(v):
        return Q.int_conv2d(v, w, bias, stride=stride, padding=pad, dilation=dil, groups=g,
                            x_zero_point=xzp, w_zero_point=-1)

    got = np.asarray(rlx.compile(f, x, target=target)(x))
    attrs = {"stride": stride, "padding": pad, "dilation": dil, "groups": g,
             "a_zero_point": xzp, "b_zero_point": -1}
    want = qs.int_conv2d(attrs, [x, w] + ([bias] if bias is not None else []))
    assert got.dtype == np.int32 and np.array_equal(got, want)


def test_accumulator_wraps_like_i32():
    """Sums past 2^31 wrap once to i32 in the reference, as the decomposition's i32 adds do."""
    x = np.full((1, 64, 3, 3), 255, np.uint8)
    w = np.full((1, 64, 3, 3), -128, np.int8)
    bias = np.int32([-(2**31)])

    def f(v):
        return Q.int_conv2d(v, w, bias, x_zero_point=0, w_zero_point=127)

    got = np.asarray(rlx.compile(f, x, target="cpu")(x))
    exact = int(qs.int_conv2d({"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                               "groups": 1, "a_zero_point": 0, "b_zero_point": 127},
                              [x, w, bias])[0, 0, 0, 0])
    assert exact < -(2**31) and got[0, 0, 0, 0] == (exact + 2**31) % 2**32 - 2**31


def test_bad_int_conv2d_inputs_are_typed():
    w = np.zeros((4, 3, 3, 3), np.int8)
    with pytest.raises(rlx.DTypeError):  # float activations: quantize first
        rlx.compile(lambda v: Q.int_conv2d(v, w), np.zeros((1, 3, 5, 5), np.float32))
    x = np.zeros((1, 2, 5, 5), np.int8)
    with pytest.raises(rlx.ShapeError):  # 2 input channels, a weight for 3
        rlx.compile(lambda v: Q.int_conv2d(v, w), x)
    with pytest.raises(rlx.ShapeError):  # the window does not fit
        rlx.compile(lambda v: Q.int_conv2d(v, np.zeros((1, 2, 7, 7), np.int8)), x)
    with pytest.raises(rlx.ShapeError):  # a u8 zero point outside [0, 255]
        rlx.compile(lambda v: Q.int_conv2d(v, np.zeros((1, 2, 3, 3), np.int8),
                                           x_zero_point=-1), x.astype(np.uint8))
