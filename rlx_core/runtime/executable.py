"""Executable: a compiled function for one target — the IR at every level, the built program,
the parameters it is bound to, and the CompileTrace that explains it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx_core.compile_trace import CompileTrace
from rlx_core.errors import ArgumentError
from rlx_core.frontend.tracer import type_of_example
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, TensorType
from rlx_core.runtime.narrowed_io import (
    check_inputs,
    narrowed_inputs,
    widen_outputs,
    widened_outputs,
)
from rlx_core.targets.base import Program


def _to_host(arg: Any, want: TensorType) -> Any:
    """Convert one argument to the host array layer (numpy when present)."""
    try:
        import numpy as np
    except ImportError:  # Pyodide without numpy: the target takes buffers / lists as they are
        return arg
    arr = np.asarray(arg)
    host = np.dtype(dt.to_numpy_name(want.dtype))
    if arr.dtype != host:  # by dtype, not name: a big-endian float32 is converted too
        arr = arr.astype(host)
    return np.asarray(arr, order="C")  # np.ascontiguousarray turns 0-d arrays into 1-d


@dataclass
class Executable:
    """Call it like the original function; ``trace`` holds the compile's full record.

    ``params`` overrides the traced weights by name. Device targets bind a weight once per
    array (the WebGPU targets upload it, the CPU target may pack it for its GEMMs): to change
    a weight, assign a new array (``exe.params["fc1.weight"] = w``) rather than writing into
    the bound one in place.
    """

    name: str
    target: str
    hir: Graph
    mir: Graph
    lir: Graph
    program: Program
    trace: CompileTrace
    params: dict[str, Any] = field(default_factory=dict)
    # the memory_limit compile option; resolved and checked once, before the first run
    memory_limit: Any = None
    # value ranges promised for i64 inputs (rlx.compile's input_ranges); see narrowed_io.py
    input_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    _budget_ok: bool = field(default=False, init=False, repr=False)
    _host_types: Any = field(default=None, init=False, repr=False)
    _ndarray: Any = field(default=None, init=False, repr=False)
    _narrowed: list[tuple[int, str, tuple[int, int]]] | None = field(default=None, init=False,
                                                                      repr=False)
    _widen: list[int] | None = field(default=None, init=False, repr=False)
    _direct: Any = field(default=None, init=False, repr=False)  # program.direct_fn, once armed

    @property
    def input_types(self) -> tuple[TensorType, ...]:
        return tuple(v.type for v in self.lir.inputs)

    def check_args(self, args: Sequence[Any]) -> None:
        """Raise ArgumentError unless ``args`` match the compiled shapes and dtypes."""
        want = self.input_types
        if len(args) != len(want):
            raise ArgumentError(f"{self.name} was compiled for {len(want)} argument(s), got "
                                f"{len(args)}")
        for i, (arg, ty) in enumerate(zip(args, want, strict=False)):
            got = type_of_example(arg)
            if got.shape != ty.shape or (got.dtype != ty.dtype and not _compatible(got.dtype, ty.dtype)):
                raise ArgumentError(
                    f"{self.name}: argument {i} ({self.lir.inputs[i].name}) is {got}, "
                    f"compiled for {ty}",
                    hint="call rlx.compile again with this shape, or use @rlx.jit, which "
                         "specialises per shape")

    def check_memory(self) -> None:
        """Raise MemoryBudgetError (RLX-R030) if one run would allocate more than the budget
        (the arena, each output; see runtime/memory_budget.py). Checked for every target here,
        before the program first runs."""
        if self._budget_ok:
            return
        from rlx_core.runtime.memory_budget import check_budget, resolve_limit

        check_budget(self.lir, resolve_limit(self.memory_limit), target=self.target,
                     materializes_nodes=bool(self.program.info.get("materializes_nodes")))
        self._budget_ok = True

    def __call__(self, *args: Any, out: Any = None) -> Any:
        """Run on ``args``. ``out`` (an array, or a tuple with one array or None per output)
        receives the outputs, which are then those arrays: the numpy target writes a
        collective's result straight into it; other targets copy into it."""
        if out is not None and self._direct is not None:
            done = self._direct(args, out)
            if done is not None:
                return done[0] if len(done) == 1 else tuple(done)
        host = self._host_args(args)
        if out is None:
            outs = self._run(host)
            if self._widen:
                outs = widen_outputs(outs, self._widen)
        else:
            outs = self._run_into(host, out)
            # the program's whole-call path, from now on: the checks above hold for good
            if not (self._narrowed or self._widen or self.params):
                self._direct = self.program.direct_fn
        return outs[0] if len(outs) == 1 else tuple(outs)

    async def run_async(self, *args: Any) -> Any:
        """``exe(*args)`` for code that can await (a notebook cell, ``asyncio``): in a browser
        (Pyodide) the WebGPU target reads its results back asynchronously, which ``exe(...)``
        can only wait for where Pyodide can switch stacks; every other target runs at once."""
        runtime = self.program.info.get("runtime")
        if not callable(getattr(runtime, "run_async", None)):
            return self(*args)
        outs = await runtime.run_async(self._host_args(args), self.params)
        if self._widen:
            outs = widen_outputs(outs, self._widen)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _host_args(self, args: Sequence[Any]) -> list[Any]:
        """``args`` checked against the compiled types and converted for the target; the memory
        budget and the value ranges of narrowed i64 inputs checked."""
        host = self._as_is(args)
        if host is None:
            self.check_args(args)
            host = [_to_host(a, t) for a, t in zip(args, self.input_types, strict=False)]
        self.check_memory()
        if self._narrowed is None:  # i64 inputs compiled as i32 (runtime/narrowed_io.py)
            self._narrowed = narrowed_inputs(self.hir, self.lir, self.input_ranges)
            self._widen = widened_outputs(self.hir, self.lir)
        if self._narrowed:
            check_inputs(self.name, args, self._narrowed)
        return host

    def _run(self, host: list[Any]) -> list[Any]:
        """The program on ``host`` (_host_args' result): where numpy is present those are
        checked and converted, so the target's run_checked_fn, if it has one, skips its own
        check of them."""
        checked = self.program.run_checked_fn
        if checked is not None and self._host_types is not None:
            return checked(host, self.params)
        return self.program.run(host, self.params)

    def _as_is(self, args: Sequence[Any]) -> list[Any] | None:
        """``args`` unchanged when each is already a C-contiguous numpy array of the compiled
        shape and host dtype (what check_args and _to_host would accept and pass through),
        else None; a few microseconds instead of tens on the hot path of small programs."""
        want = self._host_types
        if want is None:
            try:
                import numpy as np
            except ImportError:
                return None
            want = self._host_types = [(t.shape, np.dtype(dt.to_numpy_name(t.dtype)))
                                       for t in self.input_types]
            self._ndarray = np.ndarray
        if len(args) != len(want):
            return None
        for a, (shape, dtype) in zip(args, want, strict=True):
            if not (type(a) is self._ndarray and a.shape == shape and a.dtype == dtype
                    and a.flags.c_contiguous):
                return None
        return list(args)

    def _run_into(self, host: list[Any], out: Any) -> list[Any]:
        bufs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(bufs) != len(self.lir.outputs):
            raise ArgumentError(f"{self.name} has {len(self.lir.outputs)} output(s), got "
                                f"{len(bufs)} out= array(s)",
                                hint="pass a tuple with one array (or None) per output")
        if self.program.run_into_fn is not None:
            return self.program.run_into_fn(host, self.params, bufs)
        import numpy as np

        outs = self._run(host)
        done = []
        for name, buf, value in zip(self.lir.outputs, bufs, outs, strict=True):
            if buf is None:
                done.append(value)
                continue
            value = np.asarray(value)
            if not isinstance(buf, np.ndarray) or buf.shape != value.shape \
                    or buf.dtype != value.dtype or not buf.flags.writeable:
                raise ArgumentError(f"out= for output %{name} must be a writable "
                                    f"{value.dtype}{list(value.shape)} array")
            np.copyto(buf, value)
            done.append(buf)
        return done

    @property
    def sources(self) -> dict[str, str]:
        """Generated kernel source per kernel name (empty for interpreters)."""
        return self.program.sources


def _compatible(got: dt.DType, want: dt.DType) -> bool:
    # Python scalars and lists are typed i64/f32 by default; let them feed narrower inputs
    return got.kind == want.kind or (got == dt.i64 and want.is_int)
