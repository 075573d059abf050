"""XLA through jaxlib's PJRT client: compile StableHLO text once, execute it per call.

The module text goes to the client's ``compile_and_load`` (the same entry point a TPU's PJRT
plugin serves), arguments are placed on the device with ``jax.device_put`` and results come back
from ``execute_sharded``. XLA's TPU backend is used where jax reports one, else its CPU backend.
numpy and jax are imported on first use only.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from rlx_core.errors import ArgumentError, RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.targets.host_args import cast_host, checked_shape
from rlx_core.targets.tpu.renderer import HloModule

_CACHE: dict[tuple[str, str], Any] = {}  # (platform, module text) -> loaded executable
_LOCK = threading.Lock()


class XlaCompileError(RlxError):
    """XLA rejected a generated StableHLO module (parse, verification or compilation)."""

    code = "RLX-H002"


def platform() -> str:
    """``tpu`` when jax has a TPU backend here, else ``cpu``."""
    from jax._src import xla_bridge

    return "tpu" if "tpu" in xla_bridge.backends() else "cpu"


def _client(name: str) -> Any:
    from jax._src import xla_bridge

    return xla_bridge.get_backend(name)


def _located(mod: HloModule, message: str) -> str:
    """The module line an MLIR diagnostic points at (``loc("...":LINE:COL)``) and its node."""
    found = re.search(r":(\d+):(\d+)", message)
    if not found:
        return ""
    line = int(found.group(1))
    lines = mod.text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    where = mod.node_at(line)
    origin = f" (node %{where[0]}, kernel {where[1] or '-'})" if where else ""
    return f"\nmodule line {line}{origin}:\n> {line:5} | {lines[line - 1].strip()}"


def compile_module(mod: HloModule) -> tuple[Any, str, bool]:
    """(loaded executable, platform, cache hit) for ``mod``; XlaCompileError on rejection."""
    plat = platform()
    key = (plat, mod.text)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key], plat, True
    from jaxlib import _jax

    client = _client(plat)
    devices = _jax.DeviceList(tuple(client.local_devices()[:1]))
    try:
        exe = client.compile_and_load(mod.text, devices, _jax.CompileOptions())
    except Exception as err:  # jaxlib raises its own XlaRuntimeError / ValueError types
        msg = str(err).strip()
        raise XlaCompileError(f"XLA ({plat}) rejected the StableHLO module: "
                              f"{msg.splitlines()[0] if msg else type(err).__name__}"
                              f"{_located(mod, msg)}",
                              hint="a renderer bug: report it with `rlx compile FILE --target "
                                   "tpu --emit source`") from err
    with _LOCK:
        _CACHE[key] = exe
    return exe, plat, False


def _to_device_host(arr: Any, t: TensorType, what: str) -> Any:
    """A host array in the XLA element type of ``t`` (bf16 as ml_dtypes.bfloat16)."""
    import numpy as np

    a = checked_shape(arr, t, what)
    if t.dtype == dt.bf16:
        import ml_dtypes

        from rlx_core.targets.numpy_ref.semantics import round_bf16

        return np.ascontiguousarray(round_bf16(a)).astype(ml_dtypes.bfloat16)
    return np.ascontiguousarray(cast_host(a, t.dtype, np.dtype(dt.to_numpy_name(t.dtype))))


class XlaProgram:
    """One compiled module: parameters are put on the device once, inputs on every call."""

    def __init__(self, mod: HloModule, param_data: dict[str, Any],
                 index_checks: tuple[tuple[int, int, str], ...] = ()):
        self.mod = mod
        self.exe, self.platform, self.cache_hit = compile_module(mod)
        self.device = self.exe.local_devices()[0]
        self.param_data = param_data
        self.index_checks = index_checks  # (input position, axis size, op)
        self._params: list[Any] | None = None

    def _put(self, arrays: list[Any]) -> list[Any]:
        import jax
        from jax._src import config

        with config.enable_x64(True):  # keep i64/f64 arguments as they are (no canonicalising)
            return [jax.device_put(a, self.device) for a in arrays]

    def _param_buffers(self, params: dict[str, Any]) -> list[Any]:
        names = self.mod.args[self.mod.n_inputs:]
        types = self.mod.arg_types[self.mod.n_inputs:]
        given = {n: params[n] for n in names if params and params.get(n) is not None}
        if self._params is None or given:
            host = []
            for n, t in zip(names, types, strict=True):
                data = given.get(n, self.param_data.get(n))
                if data is None:
                    raise ArgumentError(f"no data for parameter %{n}",
                                        hint="pass it in the params dict under its name")
                host.append(_to_device_host(data, t, f"parameter %{n}"))
            bufs = self._put(host)
            if given:
                return bufs
            self._params = bufs
        return self._params

    def run(self, inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        import numpy as np

        n_in = self.mod.n_inputs
        if len(inputs) != n_in:
            raise ArgumentError(f"the program takes {n_in} input(s), got {len(inputs)}")
        host = [_to_device_host(x, t, f"input %{n}") for x, t, n in
                zip(inputs, self.mod.arg_types[:n_in], self.mod.args[:n_in], strict=True)]
        for pos, size, op in self.index_checks:
            idx = host[pos]
            if idx.size and (idx.min() < -size or idx.max() >= size):
                from rlx_core.targets.numpy_ref.semantics import IndexOutOfRangeError

                bad = idx[(idx < -size) | (idx >= size)].reshape(-1)[0]
                raise IndexOutOfRangeError(
                    f"{op}: index {int(bad)} in input %{self.mod.args[pos]} is out of range "
                    f"for an axis of size {size}", hint=f"indices must lie in [{-size}, "
                                                         f"{size - 1}]")
        args = self._put(host) + self._param_buffers(params)
        results = self.exe.execute_sharded(args).disassemble_into_single_device_arrays()
        out = []
        for r in results:
            a = np.asarray(r[0])
            if a.dtype.name == "bfloat16":
                a = a.astype(np.float32)
            out.append(np.array(a, copy=True))
        return out
