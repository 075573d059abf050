"""const_eval against numpy: every op class on every dtype class (int wrap, f32/f16 rounding,
IEEE specials, comparisons, casts), and against the numpy reference target's semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.passes.const_eval import (
    MAX_ELEMENTS,
    ConstData,
    NotFoldable,
    eval_binary,
    eval_cast,
    eval_compare,
    eval_op,
    eval_unary,
    store,
)

INTS = [dt.i8, dt.i16, dt.i32, dt.i64, dt.u8, dt.u32]
FLOATS = [dt.f16, dt.f32, dt.f64]
EXACT_UNARY = ["neg", "abs", "sqrt", "floor", "ceil", "round", "sign", "reciprocal"]
LIBM_UNARY = ["exp", "log", "tanh", "sin", "cos", "logistic", "rsqrt", "erf"]


def npd(d: dt.DType) -> np.dtype:
    return np.dtype(dt.to_numpy_name(d))


def int_samples(d: dt.DType, seed: int, n: int = 48) -> np.ndarray:
    info = np.iinfo(npd(d))
    rng = np.random.default_rng(seed)
    edges = np.array([info.min, info.max, 0, 1, info.max - 1, 2, 3], dtype=npd(d))
    return np.concatenate([edges, rng.integers(info.min, info.max, n, npd(d), endpoint=True)])


def float_samples(d: dt.DType, seed: int, n: int = 48) -> np.ndarray:
    special = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 1e-3, 3.0, np.inf, -np.inf, np.nan]
    rng = np.random.default_rng(seed)
    rand = rng.standard_normal(n) * rng.choice([1e-2, 1.0, 30.0], n)
    return np.concatenate([special, rand]).astype(npd(d))


def assert_same(got: list, want: np.ndarray, d: dt.DType) -> None:
    """Bitwise agreement (NaN equals NaN; the sign of zero counts)."""
    g = np.array(got, dtype=npd(d))
    assert np.array_equal(g, want, equal_nan=True), (g, want)
    if d.is_float:
        real = ~np.isnan(want)
        assert np.array_equal(np.signbit(g[real]), np.signbit(want[real])), (g, want)


def elementwise(fn, *cols: np.ndarray) -> list:
    return [fn(*row) for row in zip(*(c.tolist() for c in cols), strict=True)]


# ---- integers: wrap-around, truncating division ------------------------------------------


@pytest.mark.parametrize("d", INTS, ids=str)
@pytest.mark.parametrize(
    "op,fn",
    [
        ("add", np.add),
        ("sub", np.subtract),
        ("mul", np.multiply),
        ("max", np.maximum),
        ("min", np.minimum),
        ("and", np.bitwise_and),
        ("or", np.bitwise_or),
        ("xor", np.bitwise_xor),
    ],
)
def test_int_binary_wraps_like_numpy(d, op, fn) -> None:
    a, b = int_samples(d, 1), int_samples(d, 2)
    with np.errstate(all="ignore"):
        want = fn(a, b)
    assert_same(elementwise(lambda x, y: eval_binary(op, d, x, y), a, b), want, d)


@pytest.mark.parametrize("d", INTS, ids=str)
def test_int_div_truncates_and_rem_takes_dividend_sign(d) -> None:
    a, b = int_samples(d, 3), int_samples(d, 4)
    info = np.iinfo(npd(d))
    keep = (b != 0) & ~((a == info.min) & (b == -1) & (info.min < 0))
    a, b = a[keep], b[keep]
    rem = np.fmod(a, b)
    with np.errstate(all="ignore"):
        quo = (a - rem) // b  # exact: a - rem is a multiple of b
    assert_same(elementwise(lambda x, y: eval_binary("div", d, x, y), a, b), quo, d)
    assert_same(elementwise(lambda x, y: eval_binary("rem", d, x, y), a, b), rem, d)
    if info.min < 0:
        assert eval_binary("div", d, -7, 2) == -3  # numpy's // would give -4
        assert eval_binary("rem", d, -7, 2) == -1
        assert eval_binary("div", d, info.min, -1) == info.min  # wraps
    with pytest.raises(NotFoldable):
        eval_binary("div", d, 1, 0)
    with pytest.raises(NotFoldable):
        eval_binary("rem", d, 1, 0)


@pytest.mark.parametrize("d", INTS, ids=str)
def test_int_pow_wraps(d) -> None:
    base = np.array([0, 1, 2, 3, 5, 7, 11, 100], dtype=npd(d))
    exp = np.array([0, 9, 31, 15, 20, 3, 8, 4], dtype=npd(d))
    with np.errstate(all="ignore"):
        want = np.power(base, exp)
    assert_same(elementwise(lambda x, y: eval_binary("pow", d, x, y), base, exp), want, d)


@pytest.mark.parametrize("d", INTS, ids=str)
@pytest.mark.parametrize(
    "op,fn", [("neg", np.negative), ("abs", np.abs), ("sign", np.sign), ("logical_not", np.invert)]
)
def test_int_unary(d, op, fn) -> None:
    a = int_samples(d, 5)
    if d.kind is dt.Kind.UINT and op in ("neg", "abs"):
        a = a[a >= 0]
    with np.errstate(all="ignore"):
        want = fn(a)
    assert_same(elementwise(lambda x: eval_unary(op, d, x), a), want, d)


# ---- floats: rounding once to the storage type, IEEE specials -----------------------------


@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize(
    "op,fn", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.true_divide)]
)
def test_float_arithmetic_is_correctly_rounded(d, op, fn) -> None:
    a, b = float_samples(d, 6), float_samples(d, 7)
    b = np.concatenate([b, np.zeros(4, npd(d)), -np.zeros(4, npd(d))])
    a = np.concatenate([a, np.array([1, -1, 0, np.nan] * 2, npd(d))])
    with np.errstate(all="ignore"):
        want = fn(a, b)
    assert_same(elementwise(lambda x, y: eval_binary(op, d, x, y), a, b), want, d)


@pytest.mark.parametrize("d", FLOATS, ids=str)
def test_float_rem_is_fmod_and_max_propagates_nan(d) -> None:
    a, b = float_samples(d, 8), float_samples(d, 9)
    for op, fn in (("rem", np.fmod), ("max", np.maximum), ("min", np.minimum)):
        got, want = [], []
        with np.errstate(all="ignore"):
            ref = fn(a, b)
        for x, y, w in zip(a.tolist(), b.tolist(), ref.tolist(), strict=True):
            try:
                got.append(eval_binary(op, d, x, y))
            except NotFoldable:
                # only where IEEE/numpy have answers a target may not share
                assert (op == "rem" and (y == 0 or math.isinf(x))) or (
                    op != "rem" and x == y == 0.0
                )
                continue
            want.append(w)
        assert_same(got, np.array(want, npd(d)), d)


@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize("op", EXACT_UNARY)
def test_float_unary_exact(d, op) -> None:
    fns = {
        "neg": np.negative,
        "abs": np.abs,
        "sqrt": np.sqrt,
        "floor": np.floor,
        "ceil": np.ceil,
        "round": np.round,
        "sign": np.sign,
        "reciprocal": lambda x: np.ones_like(x) / x,
    }
    a = float_samples(d, 10)
    with np.errstate(all="ignore"):
        want = fns[op](a)
    assert_same(elementwise(lambda x: eval_unary(op, d, x), a), want, d)


@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize("op", LIBM_UNARY)
def test_float_unary_libm_within_two_ulp(d, op) -> None:
    erf = np.vectorize(math.erf, otypes=[np.float64])
    fns = {
        "exp": np.exp,
        "log": np.log,
        "tanh": np.tanh,
        "sin": np.sin,
        "cos": np.cos,
        "logistic": lambda x: 1 / (1 + np.exp(-x)),
        "rsqrt": lambda x: 1 / np.sqrt(x),
        "erf": erf,
    }
    a = float_samples(d, 11)
    with np.errstate(all="ignore"):
        # the oracle in f64, rounded once: what a correctly rounded libm would give
        want = fns[op](a.astype(np.float64)).astype(npd(d))
    got = np.array(elementwise(lambda x: eval_unary(op, d, x), a), npd(d))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite], want[~finite], equal_nan=True)
    np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=2)


def test_f32_and_f16_rounding_of_stored_values() -> None:
    values = [
        0.1,
        1 / 3,
        3.4028234663852886e38,
        3.4028235677973366e38,
        3.5e38,
        -1e39,
        65504.0,
        65519.0,
        65520.0,
        1e-8,
        5.960464477539063e-08,
        1e-50,
    ]
    with np.errstate(all="ignore"):
        want32 = np.array(values, np.float64).astype(np.float32)
        want16 = np.array(values, np.float64).astype(np.float16)
    assert_same([store(dt.f32, v) for v in values], want32, dt.f32)
    assert_same([store(dt.f16, v) for v in values], want16, dt.f16)
    assert store(dt.i8, 200) == -56 and store(dt.u8, -1) == 255 and store(dt.bool_, 3) is True
    with pytest.raises(NotFoldable):
        store(dt.bf16, 1.0)


# ---- comparisons and casts ----------------------------------------------------------------


@pytest.mark.parametrize("d", [dt.i32, dt.u8, dt.f16, dt.f32, dt.f64], ids=str)
@pytest.mark.parametrize(
    "op,fn",
    [
        ("eq", np.equal),
        ("ne", np.not_equal),
        ("lt", np.less),
        ("le", np.less_equal),
        ("gt", np.greater),
        ("ge", np.greater_equal),
    ],
)
def test_compare(d, op, fn) -> None:
    gen = float_samples if d.is_float else int_samples
    a, b = gen(d, 12), gen(d, 13)
    b[:10] = a[:10]  # some equal pairs (and NaN == NaN, which is false)
    assert elementwise(lambda x, y: eval_compare(op, x, y), a, b) == fn(a, b).tolist()


@pytest.mark.parametrize("src", [dt.bool_, *INTS, *FLOATS], ids=str)
@pytest.mark.parametrize("dst", [dt.bool_, *INTS, *FLOATS], ids=str)
def test_cast(src, dst) -> None:
    if src == dt.bool_:
        a = np.array([True, False, True])
    elif src.is_int:
        a = int_samples(src, 14)
        if dst.is_float:  # huge ints to narrow floats would round twice through f64
            a = a[np.abs(a.astype(np.float64)) <= 2.0**53]
    else:
        a = float_samples(src, 15)
    got = elementwise(lambda x: eval_cast(x, src, dst), a)
    if dst.is_int and src.is_float:
        info = np.iinfo(npd(dst))
        f = a.astype(np.float64)
        inside = (f > float(info.min) - 1) & (f < float(info.max))
        assert [g for g, k in zip(got, inside, strict=True) if k] == a[inside].astype(
            npd(dst)
        ).tolist()  # numpy truncates toward zero in range
        for g, x in zip(got, f.tolist(), strict=True):  # outside: saturate, NaN -> 0
            if math.isnan(x):
                assert g == 0
            elif x >= float(info.max):
                assert g == info.max
            elif x <= float(info.min) - 1:
                assert g == info.min
        return
    with np.errstate(all="ignore"):
        want = (a != 0) if dst == dt.bool_ else a.astype(npd(dst))
    assert_same(got, want, dst)


# ---- whole ops: splats, tuples, movement, size limits -------------------------------------


def test_splat_stays_splat_at_any_size() -> None:
    two = ConstData(dt.f32, (), 2.0)
    big = TensorType(dt.f32, (512, 512))
    out = eval_op("broadcast_in_dim", {"shape": (512, 512), "dims": ()}, [two], big)
    assert out.is_splat and out.value == 2.0 and out.shape == (512, 512)
    summed = eval_op("add", {}, [out, out], big)
    assert summed.is_splat and summed.value == 4.0


def test_too_large_tuple_results_are_not_folded() -> None:
    n = MAX_ELEMENTS + 1
    vals = ConstData(dt.i32, (n,), tuple(range(n)))
    with pytest.raises(NotFoldable):
        eval_op("neg", {}, [vals], TensorType(dt.i32, (n,)))
    with pytest.raises(NotFoldable):
        eval_op("iota", {"shape": (n,), "dim": 0, "dtype": dt.i32}, [], TensorType(dt.i32, (n,)))


@pytest.mark.parametrize(
    "op,attrs,shape",
    [
        ("transpose", {"perm": (2, 0, 1)}, (4, 2, 3)),
        ("reshape", {"shape": (6, 4)}, (6, 4)),
        ("slice", {"start": (0, 1, 0), "limit": (2, 3, 4), "stride": (1, 1, 2)}, (2, 2, 2)),
        ("broadcast_in_dim", {"shape": (5, 2, 3, 4), "dims": (1, 2, 3)}, (5, 2, 3, 4)),
    ],
)
def test_movement_of_tuples_matches_numpy(op, attrs, shape) -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4) * 3 - 20
    want = {
        "transpose": lambda: np.transpose(x, attrs["perm"]),
        "reshape": lambda: x.reshape(attrs["shape"]),
        "slice": lambda: x[0:2, 1:3, 0:4:2],
        "broadcast_in_dim": lambda: np.broadcast_to(x, attrs["shape"]),
    }[op]()
    src = ConstData(dt.i32, (2, 3, 4), tuple(x.reshape(-1).tolist()))
    out = eval_op(op, attrs, [src], TensorType(dt.i32, shape))
    assert out.shape == want.shape and out.value == tuple(want.reshape(-1).tolist())


def test_broadcast_of_size_one_axes_and_iota() -> None:
    col = ConstData(dt.f32, (3, 1), (1.0, 2.0, 3.0))
    out = eval_op(
        "broadcast_in_dim", {"shape": (3, 2), "dims": (0, 1)}, [col], TensorType(dt.f32, (3, 2))
    )
    assert out.value == (1.0, 1.0, 2.0, 2.0, 3.0, 3.0)
    io = eval_op(
        "iota", {"shape": (2, 3), "dim": 0, "dtype": dt.f16}, [], TensorType(dt.f16, (2, 3))
    )
    assert io.value == tuple(np.broadcast_to(np.arange(2)[:, None], (2, 3)).reshape(-1) * 1.0)


def test_select_and_unsupported_dtypes() -> None:
    p = ConstData(dt.bool_, (3,), (True, False, True))
    a = ConstData(dt.i32, (3,), (1, 2, 3))
    b = ConstData(dt.i32, (), 9)
    out = eval_op("select", {}, [p, a, b], TensorType(dt.i32, (3,)))
    assert out.value == (1, 9, 3)
    for d in (dt.bf16, dt.c64, dt.i4):
        with pytest.raises(NotFoldable):
            eval_op("neg", {}, [ConstData(d, (), 1)], TensorType(d, ()))


# ---- agreement with the numpy reference target (the semantic oracle) -----------------------


def _reference():
    return pytest.importorskip("rlx_core.targets.numpy_ref.semantics")


@pytest.mark.parametrize("d", [dt.bool_, dt.i8, dt.u32, dt.i64, dt.f16, dt.f32, dt.f64], ids=str)
def test_agrees_with_numpy_reference(d) -> None:
    ref = _reference()
    from rlx_core.ir.ops.mir import BINARY, COMPARE, UNARY

    gen = (
        (lambda d, s: np.array([True, False, True, False]))
        if d == dt.bool_
        else (float_samples if d.is_float else int_samples)
    )
    a, b = gen(d, 16), gen(d, 17)
    if d.is_int:
        b = np.where(b == 0, 3, b).astype(npd(d))  # division by zero is left to the target
    t_in = TensorType(d, (a.size,))
    ca = ConstData(d, t_in.shape, tuple(a.tolist()))
    cb = ConstData(d, t_in.shape, tuple(b.tolist()))
    checked = 0
    for op in (*UNARY, *BINARY, *COMPARE):
        arity = 1 if op in UNARY else 2
        out_t = TensorType(dt.bool_ if op in COMPARE else d, t_in.shape)
        try:
            got = eval_op(op, {}, [ca, cb][:arity], out_t)
        except NotFoldable:
            continue
        want = ref.eval_op(op, {}, [a, b][:arity], out_t)
        g = np.array(got.elements(), want.dtype)
        if op in LIBM_UNARY or op == "pow" and d.is_float:
            fin = np.isfinite(want)
            assert np.array_equal(g[~fin], want[~fin], equal_nan=True), op
            np.testing.assert_array_max_ulp(g[fin], want[fin], maxulp=2)
        else:
            assert np.array_equal(g, want, equal_nan=True), (op, g, want)
        checked += 1
    assert checked >= 10
