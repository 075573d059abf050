"""Checks the cpu target's tests share: a result's error relative to a reference, and which
kernel implementations a compiled program picked."""

from __future__ import annotations

import numpy as np


def rel_error(got, want) -> float:
    """The largest absolute difference of ``got`` from ``want`` over ``want``'s largest
    magnitude (1e-30 at the least: an all-zero reference)."""
    want = np.asarray(want)
    return float(np.abs(np.asarray(got) - want).max() / max(np.abs(want).max(), 1e-30))


def impl_set(exe) -> set[str]:
    """The implementations of the kernels of ``exe``'s program (``info["kernels"]``)."""
    return {k["impl"] for k in exe.program.info["kernels"].values()}
