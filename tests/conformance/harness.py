"""The conformance harness: which targets take part, what they claim, inputs, comparison.

Every target in the registry takes part; one that cannot load, is unavailable here, or only
compile-checks its source is skipped with the reason it gives. ``RLX_CONFORMANCE_CHECK=cuda,
rocm,metal`` builds every case on those compile-check targets instead (their vendor checker
runs over its kernels) and skips it with what passed: a checker rejection fails the case. A target is compared with the
numpy reference: MIR graphs against the op-by-op interpreter (the semantic oracle), HIR graphs
against the numpy target's own compile (same decompositions, so f16/bf16 compare tightly).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import infer_type
from rlx_core.ir.graph import Graph, TensorType
from rlx_core.targets.numpy_ref.executor import interpret
from rlx_core.targets.numpy_ref.semantics import eval_op
from rlx_core.targets.registry import get_target, target_names
from tests.conftest import TOLERANCE

TARGETS: tuple[str, ...] = target_names()
# compile-check targets whose checker runs over every case (see the module docstring)
CHECK_ONLY: tuple[str, ...] = tuple(t for t in os.environ.get("RLX_CONFORMANCE_CHECK",
                                                              "").split(",") if t)
CHECKED = "compiled and checked, not executed here"
TESTED_DTYPES: tuple[str, ...] = tuple(d.name for d in dt.ALL)


def executable_target(name: str) -> Any:
    """The target object, or pytest.skip with the reason it cannot execute here."""
    try:
        tgt = get_target(name)
    except (ImportError, RlxError) as err:
        pytest.skip(f"target {name} cannot be loaded: {err}")
    ok, why = tgt.available()
    if not ok:
        pytest.skip(f"target {name} unavailable here: {why}")
    ok, why = executes_here(tgt)
    if not ok and name not in CHECK_ONLY:
        pytest.skip(f"target {name} is {tgt.verification} here, not executed{why}")
    return tgt


def executes_here(tgt: Any) -> tuple[bool, str]:
    """(True, "") when the target runs kernels on this machine, else (False, ": why")."""
    runs_here = getattr(tgt, "executes_here", None)  # a compile-check target with a device
    if runs_here is not None:
        ok, why = runs_here()
        return ok, ("" if ok else f": {why}")
    return getattr(tgt, "verification", "executes").startswith("executes"), ""  # or (emulated)


def claims(tgt: Any, op: str, *dtypes: str) -> bool:
    """Does the target's table claim ``op`` natively for every dtype given?"""
    caps = tgt.caps
    claim = caps.claim_for(op)
    if claim is None:
        return False
    for d in dtypes:
        rule = caps.dtype_rule(d)
        if d not in claim.dtypes or rule is None or rule.status != "native":
            return False
    return True


def claimed_ops(target: str, d: str, ops: tuple[str, ...]) -> list[str]:
    """The ops of ``ops`` that ``target`` claims natively for ``d``; skips the test when it
    claims none of them."""
    tgt = executable_target(target)
    usable = [op for op in ops if claims(tgt, op, d)]
    if not usable:
        pytest.skip(f"{target} claims none of {', '.join(ops)} for {d}")
    return usable


def claimed_dtypes(tgt: Any, ops: tuple[str, ...]) -> list[str]:
    return [d for d in TESTED_DTYPES if all(claims(tgt, op, d) for op in ops)]


def accepts(op: str, types: list[TensorType], attrs: dict[str, Any]) -> bool:
    """Does the op's shape/dtype rule accept these operands?"""
    try:
        infer_type(op, types, attrs)
    except RlxError:
        return False
    return True


def oracle_defined(op: str, attrs: dict[str, Any], args: list[np.ndarray]) -> bool:
    """Does the reference define ``op`` on these operands (e.g. no erf of complex)?"""
    try:
        full, out = infer_type(op, [TensorType(dt.get(a.dtype.name), a.shape) for a in args],
                               attrs)
        eval_op(op, full, args, out)
    except RlxError:
        return False
    return True


def tolerance(dtype: str) -> float:
    return TOLERANCE.get(dtype, 1e-5)


def compare(name: str, got: Any, want: Any, dtype: str, what: str, scale: float = 1.0) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if got.dtype.kind in "biu" or want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: {what}")
        return
    tol = tolerance(dtype) * scale
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True,
                               err_msg=f"{name}: {what}")


def run_on(name: str, g: Graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    exe = rlx.compile(g, target=name, record=False)
    if name in CHECK_ONLY and not executes_here(get_target(name))[0]:
        pytest.skip(f"{CHECKED}: {exe.program.info.get('checked', '')}")
    out = exe(*inputs)
    return list(out) if isinstance(out, tuple) else [out]


def check_mir(name: str, g: Graph, inputs: list[np.ndarray], labels: list[str]) -> None:
    """Each output of ``g`` on target ``name`` equals the op-by-op reference."""
    want = interpret(g, inputs)
    got = run_on(name, g, inputs)
    types = g.output_types()
    for label, gv, wv, t in zip(labels, got, want, types, strict=True):
        compare(name, gv, wv, t.dtype.name, label)


# ---- inputs -------------------------------------------------------------------------------------


def values(d: str, shape: tuple[int, ...], rng: np.random.Generator, kind: str = "any") -> np.ndarray:
    """Random host values of dtype ``d``; ``kind`` shapes them for the op that reads them:
    ``positive`` (log/sqrt), ``nonzero`` (divisors), ``small`` (exponents), ``wide`` (casts)."""
    t = dt.get(d)
    host = dt.to_numpy_name(t)
    if t == dt.bool_:
        return rng.random(shape) > 0.4
    if t.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(host)
    if t.is_float:
        x = rng.standard_normal(shape)
        if kind == "positive":
            x = np.abs(x) + 0.5
        elif kind == "nonzero":
            x = np.where(x >= 0, x + 0.5, x - 0.5)
        elif kind == "wide":
            x = x * 200.0
            flat = x.reshape(-1)
            specials = [1e10, -1e10, np.nan, np.inf, -np.inf, 2.5, -2.5, 0.5]
            flat[: min(len(specials), flat.size)] = specials[: flat.size]
            x = flat.reshape(shape)
        elif kind == "any":
            flat = x.reshape(-1)
            halves = [0.5, 1.5, 2.5, -0.5, -2.5]
            flat[: min(len(halves), flat.size)] = halves[: flat.size]
            x = flat.reshape(shape)
        with np.errstate(over="ignore"):  # 1e10 -> inf in f16 is the point of "wide"
            arr = x.astype(host)
        if t == dt.bf16:
            from rlx_core.targets.numpy_ref.semantics import round_bf16

            arr = round_bf16(arr)
        return arr
    lo, hi = (-8, 7) if t == dt.i4 else (-20, 20) if t.kind is dt.Kind.INT else (0, 40)
    if kind == "nonzero":
        x = rng.integers(1, 8, shape)
        if t.kind is dt.Kind.INT:
            x = x * rng.choice([-1, 1], shape)
    elif kind == "small":
        x = rng.integers(-1 if t.kind is dt.Kind.INT else 0, 4, shape)
    elif kind == "wide" and t != dt.i4:
        info = np.iinfo(host)
        x = rng.integers(info.min, info.max, shape, dtype=np.int64 if info.min < 0 else np.uint64,
                         endpoint=True)
    else:
        x = rng.integers(lo, hi + 1, shape)
        if t.kind is dt.Kind.INT and t != dt.i4 and x.size:
            x.reshape(-1)[0] = np.iinfo(host).min  # wrap-around of neg/abs
    return np.asarray(x).astype(host)
