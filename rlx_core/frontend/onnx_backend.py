"""The ``onnx.backend.base.Backend`` interface over rlx, so ONNX's own backend test suite (and
any tool written against that interface) runs models through the rlx compiler.

    from rlx_core.frontend.onnx_backend import RlxBackend, backend_for
    rep = RlxBackend.prepare(model, device="CPU")   # the fastest target here: cpu (generated C)
    rep = backend_for("numpy").prepare(model)       # the numpy reference interpreter (the oracle)
    outputs = rep.run([x])

``RlxBackend`` runs on ``rlx_core.targets.registry.default_target()``: the ``cpu`` target when a
C compiler is available, else webgpu; the numpy interpreter only when neither runs (with a
warning). ``backend_for(name)`` binds any target by name.

rlx compiles for static shapes, so a prepared model compiles on its first ``run`` (when the
input shapes are known) and keeps one executable per input signature. Inputs that an op needs
as values at import time (a Reshape's shape, a Slice's starts) are baked into that executable,
and their values are part of its cache key - a call with other values compiles again.

Needs the ``onnx`` package, which brings numpy; rlx_core itself imports neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx.backend.base import Backend, BackendRep

from rlx_core.frontend.onnx_import import Problem, UnsupportedOp, import_model
from rlx_core.frontend.onnx_import.importer import _load


@dataclass
class _Compiled:
    exe: Any
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    folded: tuple[str, ...]


@dataclass
class RlxBackendRep(BackendRep):
    """A prepared model for one rlx target; ``run`` compiles per input signature."""

    model: Any
    target: str
    options: dict[str, Any] = field(default_factory=dict)
    compiled: list[tuple[tuple[Any, ...], _Compiled]] = field(default_factory=list)
    folded: tuple[str, ...] = ()  # inputs the last import needed as values
    _narrows: bool | None = None  # does the target narrow i64 to i32 (see _ranges)

    def __post_init__(self) -> None:
        inits = {t.name for t in self.model.graph.initializer}
        self.input_names = tuple(i.name for i in self.model.graph.input if i.name not in inits)
        odd = [(vi.name, vi.type.WhichOneof("value")) for vi in self.model.graph.input
               if vi.type.WhichOneof("value") != "tensor_type"]
        odd += [(vi.name, vi.type.WhichOneof("value")) for vi in self.model.graph.output
                if vi.type.WhichOneof("value") not in ("tensor_type", None)]
        if odd:
            raise UnsupportedOp(tuple(Problem(name, "value", f"a {kind}; only tensors are "
                                                             f"supported") for name, kind in odd))

    def _key(self, feeds: dict[str, Any]) -> tuple[Any, ...]:
        sig = tuple((k, tuple(v.shape), v.dtype.str) for k, v in sorted(feeds.items()))
        vals = tuple((k, feeds[k].tobytes()) for k in self.folded if k in feeds)
        return sig + vals + tuple(sorted(self._ranges(feeds).items()))

    def _ranges(self, feeds: dict[str, Any]) -> dict[str, tuple[int, int]]:
        """On targets without i64 kernels: each int64 input's values, rounded out to a
        power-of-two bucket, promised to the compiler so it can narrow them to i32 (the
        executable checks every call against the promise; another bucket compiles again)."""
        if self._narrows is None:
            from rlx_core.dispatch.registry import caps_for

            rule = caps_for(self.target).dtype_rule("i64")
            self._narrows = rule is not None and rule.status == "narrow"
        if not self._narrows:
            return {}
        return {k: r for k, v in feeds.items()
                if v.dtype.name == "int64" and (r := _bucket(v)) is not None}

    def _compile(self, feeds: dict[str, Any]) -> _Compiled:
        import rlx_core as rlx

        key = self._key(feeds)
        for k, c in self.compiled:
            if k == key:
                return c
        res = import_model(self.model, input_shapes={k: v.shape for k, v in feeds.items()},
                           static_inputs=feeds)
        args = [feeds[name] for name in res.input_names]
        exe = rlx.compile(res.graph, *args, target=self.target, record=False,
                          input_ranges=self._ranges(feeds), **self.options)
        c = _Compiled(exe, res.input_names, res.output_names, res.folded_inputs)
        self.folded = res.folded_inputs
        self.compiled.append((self._key(feeds), c))
        return c

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        import numpy as np

        if isinstance(inputs, dict):
            feeds = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            items = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {name: np.asarray(v) for name, v in zip(self.input_names, items, strict=False)}
        c = self._compile(feeds)
        outs = c.exe(*[feeds[n] for n in c.input_names])
        if len(c.exe.lir.outputs) == 1:
            outs = (outs,)
        return tuple(_onnx_array(o, vi) for o, vi in zip(outs, self.model.graph.output, strict=False))


def _bucket(arr: Any) -> tuple[int, int] | None:
    """[lo, hi] of ``arr`` widened to [-2^k, 2^k - 1] style bounds (0 stays a floor), or None
    when that does not fit i32."""
    if not arr.size:
        return (0, 0)
    lo, hi = int(arr.min()), int(arr.max())
    lo_b = 0 if lo >= 0 else -(1 << (-lo - 1).bit_length())
    hi_b = -1 if hi < 0 else (1 << hi.bit_length()) - 1
    return (lo_b, hi_b) if -(2 ** 31) <= lo_b and hi_b <= 2 ** 31 - 1 else None


def _onnx_array(value: Any, vi: Any) -> Any:
    """An rlx result as the numpy array ONNX expects (its declared element type)."""
    import numpy as np
    from onnx import helper

    arr = np.asarray(value)
    elem = vi.type.tensor_type.elem_type
    want = helper.tensor_dtype_to_np_dtype(elem) if elem else arr.dtype
    return arr if arr.dtype == want else arr.astype(want)


class RlxBackend(Backend):
    """ONNX backend running on the rlx target named by ``target`` (a class attribute; None is
    the fastest target available here; ``backend_for(name)`` binds another target)."""

    target: str | None = None

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return True  # incompatibility is reported by prepare/run as a typed UnsupportedOp

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> RlxBackendRep:
        from rlx_core.targets.registry import resolve_target

        proto = _load(model)
        return RlxBackendRep(proto, resolve_target(cls.target), dict(kwargs))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Sequence[Any], device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, Any]] | None = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Run one NodeProto on ``inputs`` (a one-node model typed by the inputs)."""
        import numpy as np
        from onnx import helper

        arrays = [np.asarray(x) for x in inputs]
        vis = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                             a.shape)
               for name, a in zip(node.input, arrays, strict=False) if name]
        outs = [helper.make_tensor_value_info(o, 0, None) for o in node.output if o]
        graph = helper.make_graph([node], "run_node", vis, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(
            "", kwargs.pop("opset_version", onnx.defs.onnx_opset_version()))])
        feeds = {name: a for name, a in zip(node.input, arrays, strict=False) if name}
        rep = cls.prepare(model, device, **kwargs)
        return rep.run(feeds)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        # the ONNX device is where inputs and outputs live: the host; the rlx target decides
        # where kernels run
        return device == "CPU"


def backend_for(target: str) -> type[RlxBackend]:
    """An RlxBackend subclass bound to ``target`` ("numpy", "cpu", "webgpu", ...)."""
    return type(f"RlxBackend_{target}", (RlxBackend,), {"target": target})


__all__ = ["RlxBackend", "RlxBackendRep", "backend_for"]
