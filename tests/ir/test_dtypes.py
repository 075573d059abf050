"""The dtype table and its one promotion lattice."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rlx_core.errors import DTypeError
from rlx_core.ir import dtypes as dt

MIXABLE = tuple(d for d in dt.ALL if d != dt.i4)  # packed i4 never promotes


def test_promotion_is_commutative_and_idempotent() -> None:
    for a, b in itertools.product(MIXABLE, MIXABLE):
        assert dt.promote(a, b) == dt.promote(b, a), (a, b)
    for a in dt.ALL:
        assert dt.promote(a, a) == a


def test_promotion_is_associative_and_an_upper_bound() -> None:
    for a, b, c in itertools.product(MIXABLE, repeat=3):
        assert dt.promote(dt.promote(a, b), c) == dt.promote(a, dt.promote(b, c)), (a, b, c)
    for a, b in itertools.product(MIXABLE, MIXABLE):
        p = dt.promote(a, b)
        # p sits above both: mixing it with either operand changes nothing
        assert dt.promote(p, a) == p and dt.promote(p, b) == p


def test_bool_is_the_bottom_and_c64_the_top() -> None:
    for d in MIXABLE:
        assert dt.promote(dt.bool_, d) == d
        assert dt.promote(dt.c64, d) == dt.c64


def test_named_promotions() -> None:
    assert dt.promote(dt.f16, dt.bf16) == dt.f32  # neither 16-bit float holds the other
    assert dt.promote(dt.u8, dt.i8) == dt.i16
    assert dt.promote(dt.u32, dt.i32) == dt.i64
    assert dt.promote(dt.i64, dt.f16) == dt.f16  # ints become floats on mixing, as in JAX
    assert dt.promote(dt.f64, dt.c64) == dt.c64


def test_promotion_never_loses_kind_against_numpy() -> None:
    """Where numpy holds both types, our result is at least as general a kind as numpy's
    (bool < int < float < complex): mixing never turns a float into an int."""
    rank = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
    ours_rank = {
        dt.Kind.BOOL: 0,
        dt.Kind.UINT: 1,
        dt.Kind.INT: 1,
        dt.Kind.FLOAT: 2,
        dt.Kind.COMPLEX: 3,
    }
    numpy_ok = [d for d in MIXABLE if d != dt.bf16]
    for a, b in itertools.product(numpy_ok, numpy_ok):
        ref = np.result_type(dt.to_numpy_name(a), dt.to_numpy_name(b))
        assert ours_rank[dt.promote(a, b).kind] >= rank[ref.kind], (a, b, ref)


def test_i4_does_not_mix() -> None:
    for d in MIXABLE:
        with pytest.raises(DTypeError, match="packed i4 does not mix") as info:
            dt.promote(dt.i4, d)
        assert "dequantize" in (info.value.hint or "")
        with pytest.raises(DTypeError):
            dt.promote(d, dt.i4)


def test_get_by_name_numpy_name_and_numpy_dtype() -> None:
    for d in dt.ALL:
        assert dt.get(d.name) is d and dt.get(d) is d
    for name, want in [
        ("float32", dt.f32),
        ("int64", dt.i64),
        ("uint8", dt.u8),
        ("complex64", dt.c64),
        ("bool", dt.bool_),
        ("float16", dt.f16),
        ("bfloat16", dt.bf16),
        ("int4", dt.i4),
    ]:
        assert dt.get(name) is want
        if name not in ("bfloat16", "int4"):
            assert dt.get(np.dtype(name)) is want  # a numpy dtype object, by its .name
    # every dtype numpy can hold maps back to itself through its host numpy name
    for d in dt.ALL:
        if d not in (dt.bf16, dt.i4):
            assert dt.get(np.dtype(dt.to_numpy_name(d))) is d


def test_get_unknown_name_lists_the_dtypes() -> None:
    with pytest.raises(DTypeError, match="unknown dtype 'f31'") as info:
        dt.get("f31")
    assert info.value.code == "RLX-T002"
    for d in dt.ALL:
        assert d.name in (info.value.hint or "")


def test_itemsize_and_table() -> None:
    assert dt.i4.itemsize == 0.5 and dt.c64.itemsize == 8 and dt.bf16.itemsize == 2
    for d in dt.ALL:
        if d not in (dt.bf16, dt.i4, dt.bool_):
            assert np.dtype(dt.to_numpy_name(d)).itemsize == d.itemsize
    table = dt.promotion_table().splitlines()
    assert len(table) == 2 + len(MIXABLE)
    assert "| **f16** |" in table[2 + MIXABLE.index(dt.f16)]



@pytest.mark.parametrize("d", dt.ALL, ids=str)
def test_python_scalar_has_the_dtypes_python_kind(d: dt.DType) -> None:
    # numpy scalars come in from importers; bool is checked first (a bool is an int)
    kind = bool if d == dt.bool_ else int if d.is_int else complex if d.is_complex else float
    for v in (np.float32(3.0), np.int64(3), 3, 3.0):
        out = dt.python_scalar(v, d)
        assert type(out) is kind, (d, v, out)
        assert out == kind(3)
    assert type(dt.python_scalar(0, d)) is kind and not dt.python_scalar(0, d)
