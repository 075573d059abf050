"""Random input arrays: ordinary values, and (when the target is fed them) IEEE special values,
subnormals and the extremes of each dtype."""

from __future__ import annotations

import numpy as np

from rlx_core.ir import dtypes as dt
from rlx_core.targets.numpy_ref.semantics import convert, host_dtype

# kinds an op may ask for: "any"; "nonzero" (integer divisors: never 0 or -1, so no C UB);
# "small" (exponents); "index:<n>" / "index+:<n>" (valid indices into an axis of size n, with or
# without negative ones)


def _float_specials(d: dt.DType) -> list[float]:
    info = np.finfo(np.float32 if d == dt.bf16 else host_dtype(d))
    tiny_sub = float(info.smallest_subnormal) if d != dt.bf16 else 9.2e-41
    return [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny_sub, -tiny_sub, float(info.tiny) * 3,
            float(info.max), -float(info.max), float(info.max) / 3, 0.5, -2.5, 1e-30, 1e30]


def _scale(rng: np.random.Generator) -> float:
    return float(rng.choice([1.0, 1.0, 1.0, 4.0, 100.0, 1e-3]))


def array(d: str, shape: tuple[int, ...], rng: np.random.Generator, *, specials: bool,
          kind: str = "any") -> np.ndarray:
    """A host array of dtype ``d`` (its host form: bf16 in f32, i4 in i8)."""
    t = dt.get(d)
    host = host_dtype(t)
    n = int(np.prod(shape, dtype=np.int64))
    if kind.startswith("index"):  # "index:n" may count from the end, "index+:n" may not
        size = int(kind.split(":")[1])
        return rng.integers(0 if kind.startswith("index+") else -size, size, shape).astype(host)
    if t == dt.bool_:
        return rng.random(shape) > 0.5
    if t.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(host)
    if t.is_float:
        x = rng.standard_normal(n) * _scale(rng)
        if rng.random() < 0.3:  # exact halves and integers: round/floor/ceil ties
            x[: n // 2] = np.round(x[: n // 2] * 2) / 2
        if specials and n and rng.random() < 0.5:
            pool = _float_specials(t)
            k = max(1, int(n * rng.uniform(0.05, 0.4)))
            pos = rng.choice(n, size=min(k, n), replace=False)
            x[pos] = rng.choice(pool, size=pos.size)
        with np.errstate(over="ignore", invalid="ignore"):
            return convert(x.reshape(shape), t)
    # integers
    lo, hi = (-8, 7) if t == dt.i4 else (-20, 20) if t.kind is dt.Kind.INT else (0, 40)
    if kind == "nonzero":
        x = rng.integers(1, 8, n)
        if t.kind is dt.Kind.INT:
            x = np.where(x == 1, 1, x * rng.choice([-1, 1], n))  # never -1: INT_MIN / -1 traps
        return x.astype(host).reshape(shape)
    if kind == "small":
        return rng.integers(0, 5, n).astype(host).reshape(shape)
    x = rng.integers(lo, hi + 1, n)
    if specials and n and t != dt.i4 and rng.random() < 0.5:
        info = np.iinfo(host)
        pool = [info.min, info.max, 0, 1, info.max - 1] + ([-1, info.min + 1] if info.min else [])
        k = max(1, int(n * rng.uniform(0.05, 0.4)))
        pos = rng.choice(n, size=min(k, n), replace=False)
        x = x.astype(object)
        x[pos] = rng.choice(pool, size=pos.size)
    return np.array(x.tolist() if x.dtype == object else x, dtype=np.int64 if t.kind is
                    dt.Kind.INT else np.uint64).astype(host).reshape(shape)
