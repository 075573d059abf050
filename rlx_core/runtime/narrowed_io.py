"""The host side of i64 -> i32 narrowing (rlx_core/dispatch/narrow.py) at a graph's boundary.

On targets without i64 kernels an i64 input with a promised range (``input_ranges``) is compiled
as i32, and an i64 output whose range was proven is computed as i32. ``Executable`` calls
``check_inputs`` before a run, so a value outside the promise is a typed error instead of a
silent wrap to 32 bits, and ``widen_outputs`` after it, so the caller gets the i64 it traced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlx_core.errors import ArgumentError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph

I32 = (-(2 ** 31), 2 ** 31 - 1)


class NarrowedInputRangeError(ArgumentError):
    """An i64 argument holds a value outside the range its i32 kernel was compiled for."""

    code = "RLX-G002"


def narrowed_inputs(hir: Graph, lir: Graph, promised: dict[str, tuple[int, int]],
                    ) -> list[tuple[int, str, tuple[int, int]]]:
    """(position, name, range) of every input traced as i64 and compiled as i32."""
    out = []
    for i, (h, low) in enumerate(zip(hir.inputs, lir.inputs, strict=False)):
        if h.type.dtype == dt.i64 and low.type.dtype == dt.i32:
            out.append((i, low.name, promised.get(low.name, I32)))
    return out


def _min_max(arg: Any) -> tuple[int, int] | None:
    try:
        import numpy as np

        arr = np.asarray(arg)
        return (int(arr.min()), int(arr.max())) if arr.size else None
    except ImportError:  # no numpy: nested lists / array.array
        from rlx_core.frontend.tracer import flatten_nested

        flat = flatten_nested(arg)[0] if not isinstance(arg, int) else [arg]
        return (int(min(flat)), int(max(flat))) if flat else None


def check_inputs(name: str, args: Sequence[Any],
                 narrowed: list[tuple[int, str, tuple[int, int]]]) -> None:
    for i, value, (lo, hi) in narrowed:
        mm = _min_max(args[i])
        if mm is not None and (mm[0] < lo or mm[1] > hi):
            raise NarrowedInputRangeError(
                f"{name}: argument {i} (%{value}) holds values in [{mm[0]}, {mm[1]}], outside "
                f"[{lo}, {hi}], the range its i64 values were narrowed to i32 for",
                hint="compile again with input_ranges covering these values (the ONNX backend "
                     "does so itself), or use target cpu for full i64")


def widened_outputs(hir: Graph, lir: Graph) -> list[int]:
    """Positions of the outputs traced as i64 but computed as i32."""
    return [k for k, (want, got) in enumerate(zip(hir.output_types(), lir.output_types(),
                                                   strict=False))
            if want.dtype == dt.i64 and got.dtype == dt.i32]


def widen_outputs(outs: Sequence[Any], positions: list[int]) -> list[Any]:
    """Those outputs back as int64 arrays."""
    res = list(outs)
    for k in positions:
        try:
            import numpy as np

            res[k] = np.asarray(res[k]).astype(np.int64)
        except ImportError:  # a HostArray: Python ints are already unbounded
            from dataclasses import replace

            res[k] = replace(res[k], dtype="i64")
    return res
