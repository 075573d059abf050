"""Load a compiled program with ctypes and run it on numpy arrays (the CPU device runtime).

numpy is imported here on first use only: ``rlx_core`` itself imports with the standard
library alone. Arguments arrive in host form (the Executable converts them); bf16 values are
turned into their 16-bit storage form on the way in and widened back to float32 on the way out.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import Any

from rlx_core.errors import ArgumentError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.targets.c_common.program import CProgram

_LIBS: dict[str, ctypes.CDLL] = {}
ALIGN = 64


def load_library(path: str) -> ctypes.CDLL:
    """dlopen once per path per process (a cache hit in a second call costs nothing)."""
    if path not in _LIBS:
        _LIBS[path] = ctypes.CDLL(path)
    return _LIBS[path]


def _storage_dtype(t: TensorType) -> Any:
    import numpy as np

    return np.dtype(np.uint16) if t.dtype == dt.bf16 else np.dtype(dt.to_numpy_name(t.dtype))


def to_storage(arr: Any, t: TensorType, what: str) -> Any:
    """Host array -> contiguous storage-form array of ``t`` (bf16: rounded top 16 bits)."""
    import numpy as np

    a = np.asarray(arr)
    if a.shape != t.shape:
        raise ArgumentError(f"{what} has shape {list(a.shape)}, expected {t}",
                            hint="pass an array of the compiled shape")
    if t.dtype == dt.bf16:
        from rlx_core.targets.numpy_ref.semantics import round_bf16

        bits = np.ascontiguousarray(round_bf16(a)).view(np.uint32) >> 16
        return bits.astype(np.uint16)
    want = _storage_dtype(t)
    if a.dtype != want:
        if t.dtype.is_int and a.dtype.kind == "f":
            from rlx_core.targets.numpy_ref.semantics import convert

            a = convert(a, t.dtype)
        else:
            a = a.astype(want)
    return np.ascontiguousarray(a)


def from_storage(arr: Any, t: TensorType) -> Any:
    import numpy as np

    if t.dtype == dt.bf16:
        return (arr.astype(np.uint32) << 16).view(np.float32).reshape(t.shape)
    return arr


class NativeProgram:
    """A loaded program: call ``run(inputs, params)`` with host arrays, get host arrays back."""

    def __init__(self, cprog: CProgram, path: str, param_data: dict[str, Any]):
        self.cprog = cprog
        self.lib = load_library(path)
        self.entry = getattr(self.lib, cprog.entry)
        self.entry.restype = None
        self.entry.argtypes = [ctypes.c_void_p] * 4
        self.error = getattr(self.lib, cprog.error_fn)
        self.error.restype = ctypes.c_int
        self.error.argtypes = [ctypes.c_void_p]
        self.param_data = param_data
        self._params: dict[str, tuple[Any, Any]] = {}  # name -> (source object, storage array)
        self._lock = threading.Lock()
        self._arena: Any = None

    def _param(self, name: str, t: TensorType, params: dict[str, Any]) -> Any:
        src = params.get(name) if params else None
        if src is None:
            src = self.param_data.get(name)
        if src is None:
            raise ArgumentError(f"no data for parameter %{name}",
                                hint="pass it in the params dict under its name")
        cached = self._params.get(name)
        if cached is not None and cached[0] is src:
            return cached[1]  # weights are bound once; converting them per call would dominate
        arr = to_storage(src, t, f"parameter %{name}")
        self._params[name] = (src, arr)
        return arr

    def _aligned_arena(self) -> Any:
        import numpy as np

        n = self.cprog.arena_bytes
        if self._arena is None:
            raw = np.zeros(n + ALIGN, dtype=np.uint8)
            start = (-raw.ctypes.data) % ALIGN
            self._arena = (raw, raw[start:start + n])
        return self._arena[1]

    def run(self, inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        import numpy as np

        cp = self.cprog
        if len(inputs) != len(cp.input_types):
            raise ArgumentError(f"the program takes {len(cp.input_types)} input(s), got "
                                f"{len(inputs)}")
        ins = [to_storage(x, t, f"input {i}") for i, (x, t) in
               enumerate(zip(inputs, cp.input_types, strict=True))]
        pars = [self._param(n, t, params) for n, t in zip(cp.param_names, cp.param_types, strict=True)]
        outs = [np.empty(t.shape, _storage_dtype(t)) for t in cp.output_types]
        in_ptrs = (ctypes.c_void_p * max(1, len(ins)))(*[a.ctypes.data for a in ins])
        par_ptrs = (ctypes.c_void_p * max(1, len(pars)))(*[a.ctypes.data for a in pars])
        out_ptrs = (ctypes.c_void_p * max(1, len(outs)))(*[a.ctypes.data for a in outs])
        info = (ctypes.c_int64 * 2)()
        with self._lock:  # one arena per program: calls from several threads take turns
            arena = self._aligned_arena()
            self.entry(in_ptrs, par_ptrs, out_ptrs, arena.ctypes.data)
            failed = self.error(info)
        if failed:
            from rlx_core.targets.numpy_ref.semantics import IndexOutOfRangeError

            kernel = list(cp.kernel_sources)[failed - 1] if cp.kernel_sources else str(failed)
            raise IndexOutOfRangeError(
                f"kernel {kernel}: index {info[0]} is out of range for an axis of size "
                f"{info[1]}", hint=f"indices must lie in [{-info[1]}, {info[1] - 1}]")
        return [from_storage(o, t) for o, t in zip(outs, cp.output_types, strict=True)]
