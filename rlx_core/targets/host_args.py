"""Host arrays handed to a compiled program: the shape check and the element cast that the
cpu, tpu and Hexagon runtimes and the numpy reference share.

numpy is imported on first use only (``rlx_core`` imports with the standard library alone).
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import ArgumentError
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import TensorType


def checked_shape(arg: Any, t: TensorType, what: str) -> Any:
    """``arg`` as a numpy array; ArgumentError (naming it ``what``) when its shape is not
    ``t``'s."""
    import numpy as np

    a = np.asarray(arg)
    if a.shape != t.shape:
        raise ArgumentError(f"{what} has shape {list(a.shape)}, expected {t}",
                            hint="pass an array of the compiled shape")
    return a


def cast_host(a: Any, d: DType, want: Any) -> Any:
    """``a`` in the numpy dtype ``want`` (the host form of ``d``): floats into an integer
    ``d`` by the reference's cast (NaN to 0, saturated at the type's bounds), anything else
    by ``astype``; ``a`` itself when it is of ``want`` already."""
    if a.dtype == want:
        return a
    if d.is_int and a.dtype.kind == "f":
        from rlx_core.targets.numpy_ref.semantics import convert

        return convert(a, d)
    return a.astype(want)
