"""``@rlx.jit(donate=...)`` (rlx_core/runtime/donation.py): an output computed elementwise from a
donated argument alone is written into that array on the CPU target, and only when that is safe.

Every result is checked against numpy; the donated path and the fresh-output path must give the
same values."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.runtime.donation import DonationError, donated_positions, inplace_outputs
from rlx_core.targets.registry import get_target

_ok, _why = get_target("cpu").available()
cpu = pytest.mark.skipif(not _ok, reason=f"CPU target unavailable: {_why}")

X = np.array([1, -1, 2, -2, 0.5, -0.5, 3, -3], np.float32)


def _step(x, cache):
    """A decoding step's shape of update: a select keeps the cache where the mask is off."""
    return x * 2.0, rlx.where(x > 0, x, cache)


def _want(x, cache):
    return x * 2.0, np.where(x > 0, x, cache)


@cpu
def test_donated_cache_is_updated_in_place_and_returned() -> None:
    f = rlx.jit(_step, target="cpu", donate=(1,))
    for step in range(3):  # the first call compiles, then hits
        cache = np.arange(8, dtype=np.float32) + 10 * step
        want = _want(X, cache.copy())
        doubled, new = f(X, cache)
        assert new is cache  # the same array, written in place
        np.testing.assert_array_equal(new, want[1])
        np.testing.assert_array_equal(doubled, want[0])
    assert f.cache.specializations[0].program.aliases == (-1, 1)


@cpu
@pytest.mark.parametrize("case", ["read-only", "same array twice", "view of another argument",
                                  "not contiguous"])
def test_unsafe_donations_get_a_fresh_output(case: str) -> None:
    """An argument the runtime must not write (read-only, or sharing memory with another
    argument) gets a new output and keeps its contents; the values are the same."""
    f = rlx.jit(_step, target="cpu", donate=(1,))
    base = np.arange(16, dtype=np.float32)
    if case == "read-only":
        x, cache = X, base[:8].copy()
        cache.flags.writeable = False
    elif case == "same array twice":
        x = cache = base[:8].copy()
    elif case == "view of another argument":
        x, cache = base[:8], base[4:12]
    else:
        x, cache = X, base[::2]
    before = cache.copy()
    want = _want(np.array(x), before)
    doubled, new = f(x, cache)
    assert new is not cache
    np.testing.assert_array_equal(cache, before)
    np.testing.assert_array_equal(new, want[1])
    np.testing.assert_array_equal(doubled, want[0])


@cpu
def test_only_safe_outputs_alias() -> None:
    """No alias where another kernel reads the donated input too, where the input is read at
    another index (a transpose), or where the output has another type."""
    def two_readers(x, c):
        return c.sum(), rlx.where(x > 0, x, c)

    def transposed_read(x, c):
        return rlx.where(x > 0, x, rlx.transpose(c))

    def other_type(x, c):
        return rlx.astype(rlx.where(x > 0, x, c), "f64")

    for fn in (two_readers, other_type):
        exe = rlx.jit(fn, target="cpu", donate=(1,))
        cache = np.arange(8, dtype=np.float32)
        out = exe(X, cache)
        assert max(exe.cache.specializations[0].program.aliases) == -1
        assert all(o is not cache for o in (out if isinstance(out, tuple) else (out,)))
    exe = rlx.jit(transposed_read, target="cpu", donate=(1,))
    x2, cache = X.reshape(4, 2).repeat(2, 1), np.arange(16, dtype=np.float32).reshape(4, 4)
    got = exe(x2, cache)
    assert got is not cache
    np.testing.assert_array_equal(got, np.where(x2 > 0, x2, np.arange(16).reshape(4, 4).T))
    lir = exe.cache.specializations[0].executable.lir
    assert inplace_outputs(lir, (1,)) == (-1,)


def test_numpy_target_ignores_donate() -> None:
    f = rlx.jit(_step, target="numpy", donate=(1,))
    cache = np.arange(8, dtype=np.float32)
    before = cache.copy()
    _, new = f(X, cache)
    np.testing.assert_array_equal(cache, before)
    np.testing.assert_array_equal(new, _want(X, before)[1])


@pytest.mark.parametrize("bad", ["x", (1, 1), (-1,), (1.5,), (True,)])
def test_bad_donate_is_a_typed_error(bad) -> None:
    with pytest.raises(DonationError, match="donate") as err:
        rlx.jit(_step, target="numpy", donate=bad)
    assert err.value.code == "RLX-R024" and err.value.hint


@cpu
def test_donated_position_past_the_arguments_is_a_typed_error() -> None:
    f = rlx.jit(_step, target="cpu", donate=(5,))
    with pytest.raises(DonationError, match="past the 2 argument"):
        f(X, np.zeros(8, np.float32))
    assert donated_positions(3) == (3,) and donated_positions([4, 2]) == (2, 4)
