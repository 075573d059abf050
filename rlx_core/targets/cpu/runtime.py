"""Load a compiled program with ctypes and run it on numpy arrays (the CPU device runtime).

numpy is imported here on first use only: ``rlx_core`` itself imports with the standard
library alone. Arguments arrive in host form (the Executable converts them); bf16 values are
turned into their 16-bit storage form on the way in and widened back to float32 on the way out.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from typing import Any

from rlx_core.errors import ArgumentError, RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.targets.c_common.program import CProgram
from rlx_core.targets.host_args import cast_host, checked_shape

_LIBS: dict[str, ctypes.CDLL] = {}
# one lock per loaded library: a program's statics (its team barrier, error slot) are shared
# by every NativeProgram loaded from the same file, so calls into one file never overlap
_LOCKS: dict[str, threading.Lock] = {}
ALIGN = 64


def openmp_defaults() -> None:
    """Wait-policy defaults for libgomp, set before the first program loads (libgomp reads
    them once, when it starts); a variable the user set is left alone.

    Idle workers sleep (they must not hold cores other code needs between calls) but first
    spin briefly (10,000 pause instructions: 0.28-0.34 ms on the 2-core Zen 4 VM): a program
    called again soon (a training loop) then finds its workers awake. Woken from sleep each
    call, the MLP step ran ~15% slower (0.56 vs 0.47 ms p50 over six runs of 784-128-10/128
    at 2 threads; 0.34 vs 0.30 ms on the Zen 4 VM). OMP_WAIT_POLICY=PASSIVE set without
    GOMP_SPINCOUNT means libgomp's spin count 0: every call then wakes the workers.
    """
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        os.environ.setdefault("GOMP_SPINCOUNT", "10000")


class LibraryLoadError(RlxError):
    """A compiled program's shared object does not load (dlopen failed: a foreign or damaged
    file, a missing library it links against)."""

    code = "RLX-R015"


def load_library(path: str) -> ctypes.CDLL:
    """dlopen once per path per process (a cache hit in a second call costs nothing)."""
    if path not in _LIBS:
        openmp_defaults()
        try:
            _LIBS[path] = ctypes.CDLL(path)
        except OSError as err:
            raise LibraryLoadError(f"cannot load the compiled program {path}: {err}",
                                   hint="delete the file so that it is built again "
                                        "(RLX_CACHE_DIR); if the error comes back, check the "
                                        "libraries it links against (ldd) and report it") from None
    return _LIBS[path]


def _storage_dtype(t: TensorType) -> Any:
    import numpy as np

    return np.dtype(np.uint16) if t.dtype == dt.bf16 else np.dtype(dt.to_numpy_name(t.dtype))


def to_storage(arr: Any, t: TensorType, what: str) -> Any:
    """Host array -> contiguous storage-form array of ``t`` (bf16: rounded top 16 bits)."""
    import numpy as np

    a = checked_shape(arr, t, what)
    if t.dtype == dt.bf16:
        from rlx_core.targets.numpy_ref.semantics import round_bf16

        bits = np.ascontiguousarray(round_bf16(a)).view(np.uint32) >> 16
        return bits.astype(np.uint16)
    return np.ascontiguousarray(cast_host(a, t.dtype, _storage_dtype(t)))


def from_storage(arr: Any, t: TensorType) -> Any:
    import numpy as np

    if t.dtype == dt.bf16:
        return (arr.astype(np.uint32) << 16).view(np.float32).reshape(t.shape)
    return arr


def data_address(np: Any) -> Any:
    """A function returning a C-contiguous numpy array's data pointer, cheaper than
    ``a.ctypes.data`` (which builds numpy's Python-level ctypes helper per call): the ``data``
    field that follows the object header in NumPy's array struct (PyArrayObject_fields,
    what PyArray_DATA reads). Checked once here against ``a.ctypes.data``; where it does not
    agree (another Python implementation) ``a.ctypes.data`` is used."""
    head = object.__basicsize__  # PyObject_HEAD: the reference count and the type
    probe = np.empty(3, np.float32)
    try:
        if ctypes.c_void_p.from_address(id(probe) + head).value == probe.ctypes.data:
            from_address = ctypes.c_void_p.from_address

            def address(a: Any) -> int:
                return from_address(id(a) + head).value

            return address
    except (ValueError, OverflowError):
        pass
    return lambda a: a.ctypes.data


class NativeProgram:
    """A loaded program: call ``run(inputs, params)`` with host arrays, get host arrays back."""

    def __init__(self, cprog: CProgram, path: str, param_data: dict[str, Any]):
        self.cprog = cprog
        self.lib = load_library(path)
        # this program's own handle on the entry point (lib[name] is a new one, lib.name the
        # library's shared one), without argtypes: run passes the three pointer arrays and a
        # c_void_p arena, which ctypes hands to C as they are (with argtypes [c_void_p] * 4
        # each went through c_void_p.from_param: ~0.5 us of a 5-10 us call)
        self.entry = self.lib[cprog.entry]
        self.entry.restype = None
        self.error = getattr(self.lib, cprog.error_fn)
        self.error.restype = ctypes.c_int
        self.error.argtypes = [ctypes.c_void_p]
        from rlx_core.targets.cpu.threads import attach

        attach(self.lib, f"{cprog.prefix}_threads")  # explicit pool sizes (threads.py)
        self.param_data = param_data
        self._params: dict[str, tuple[Any, Any]] = {}  # name -> (source object, storage array)
        self._lock = _LOCKS.setdefault(path, threading.Lock())
        self._arena: Any = None

    def profile(self) -> dict[str, dict[str, float]]:
        """Profiling mode: {kernel: {"seconds": total, "calls": n, "impl": label}} so far."""
        cp = self.cprog
        if not cp.profile_fn:
            return {}
        fn = getattr(self.lib, cp.profile_fn)
        n = max(1, len(cp.kernel_impl))
        secs, calls = (ctypes.c_double * n)(), (ctypes.c_int64 * n)()
        fn(secs, calls)
        return {k: {"seconds": secs[i], "calls": calls[i], "impl": cp.kernel_impl[k]}
                for i, k in enumerate(cp.kernel_impl)}

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

    def _prepare(self) -> None:
        """Per-program constants of ``run``, computed once (the per-call path stays short)."""
        import numpy as np

        cp = self.cprog
        self._np = np
        self._in_specs = [(t.shape, _storage_dtype(t), t.dtype == dt.bf16) for t in cp.input_types]
        self._out_specs = [(t.shape, _storage_dtype(t)) for t in cp.output_types]
        self._plain_out = not any(t.dtype == dt.bf16 for t in cp.output_types)
        self._in_ptrs = (ctypes.c_void_p * max(1, len(cp.input_types)))()
        self._par_ptrs = (ctypes.c_void_p * max(1, len(cp.param_types)))()
        self._out_ptrs = (ctypes.c_void_p * max(1, len(cp.output_types)))()
        self._info = (ctypes.c_int64 * 2)()
        self._par_key: tuple[Any, ...] | None = None
        self._no_params = (0,) * len(cp.param_names)  # the key when run gets no params
        self._keep: list[Any] = []
        self._arena_ptr = ctypes.c_void_p(self._aligned_arena().ctypes.data)  # never moves
        # a program none of whose kernels reports an index error needs no error check
        self._can_fail = cp.source.count(f"{cp.prefix}_fail(") > 1
        self._addr = data_address(np)

    def _numpy(self) -> Any:
        """numpy, once ``_prepare`` has made the per-program constants (on the first run)."""
        try:
            return self._np
        except AttributeError:
            self._prepare()
            return self._np

    def run(self, inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        """The per-call path is kept to a few Python steps: after a kernel that streams more
        than the caches hold (a one-row GEMM over 9 MB of weights), every object it touches is
        a cache miss. With an ``a.ctypes.data`` per buffer (numpy's Python-level ctypes
        helper) and an error check per call, ``run`` took 70-90 us more than the entry point
        on a 1 x 768 x 3072 GEMV (Zen 1, one thread), 22 us with warm caches."""
        cp = self.cprog
        np = self._numpy()
        if len(inputs) != len(cp.input_types):
            raise ArgumentError(f"the program takes {len(cp.input_types)} input(s), got "
                                f"{len(inputs)}")
        ins = []
        for i, (x, (shape, want, bf16)) in enumerate(zip(inputs, self._in_specs, strict=True)):
            # the common case (a contiguous array of the storage dtype) is passed as it is
            # (a dtype of the host's byte order is one object: `is` settles most calls)
            if (bf16 or type(x) is not np.ndarray or (x.dtype is not want and x.dtype != want)
                    or x.shape != shape or not x.flags.c_contiguous):
                x = to_storage(x, cp.input_types[i], f"input {i}")
            ins.append(x)
        return self.run_checked(ins, params)

    def run_checked(self, ins: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        """``run`` on inputs already checked and in storage form: each a C-contiguous numpy
        array of its input's shape and storage dtype (what the Executable's checks leave for a
        program without bf16 inputs; see CpuTarget.build), so that a call checks them once."""
        cp = self.cprog
        np = self._numpy()
        outs = [np.empty(shape, want) for shape, want in self._out_specs]
        addr = self._addr
        failed = 0
        with self._lock:  # one arena and one set of pointer arrays per program
            key = tuple([id(params.get(n)) for n in cp.param_names]) if params \
                else self._no_params
            if key != self._par_key:
                pars = [self._param(n, t, params)
                        for n, t in zip(cp.param_names, cp.param_types, strict=True)]
                for j, a in enumerate(pars):
                    self._par_ptrs[j] = a.ctypes.data
                self._par_key, self._keep = key, pars
                at, nbytes = cp.bind_state
                self._aligned_arena()[at:at + nbytes] = 0  # packed again (prepack.py)
            for j, a in enumerate(ins):
                self._in_ptrs[j] = addr(a)
            for j, a in enumerate(outs):
                self._out_ptrs[j] = addr(a)
            self.entry(self._in_ptrs, self._par_ptrs, self._out_ptrs, self._arena_ptr)
            if self._can_fail:
                failed = self.error(self._info)
                info = (self._info[0], self._info[1])
        if failed:
            from rlx_core.targets.numpy_ref.semantics import IndexOutOfRangeError

            kernel = list(cp.kernel_sources)[failed - 1] if cp.kernel_sources else str(failed)
            raise IndexOutOfRangeError(
                f"kernel {kernel}: index {info[0]} is out of range for an axis of size "
                f"{info[1]}", hint=f"indices must lie in [{-info[1]}, {info[1] - 1}]")
        if self._plain_out:
            return outs
        return [from_storage(o, t) for o, t in zip(outs, cp.output_types, strict=True)]
