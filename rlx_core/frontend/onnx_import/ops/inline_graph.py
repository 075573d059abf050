"""Graph attributes applied as functions: a subgraph (FlexAttention's score_mod, ...) is
converted in place, its inputs bound to rlx values, its outer-scope names read from the
enclosing graph. Any node of it that cannot be converted rejects the op that holds it."""

from __future__ import annotations

from typing import Any

from rlx_core.errors import RlxError
from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir.graph import TensorType, Value


def inline_graph(n: NodeCtx, graph: Any, args: list[Value], what: str) -> list[Value]:
    """The outputs of ``graph`` applied to ``args`` (one rlx value per graph input)."""
    import onnx
    from onnx import numpy_helper

    from rlx_core.frontend.onnx_import.importer import DEFAULT_DOMAINS, _convert
    from rlx_core.frontend.onnx_import.ops.table import CONVERTERS

    cx = n.cx
    opset = getattr(cx, "opset", 0)
    if len(graph.input) != len(args):
        raise Reject(f"{what} takes {len(graph.input)} inputs; {len(args)} are given")
    saved = dict(cx.env)  # the subgraph's names are local to it
    try:
        for vi, a in zip(graph.input, args, strict=False):
            cx.env[vi.name] = a
        for t in graph.initializer:
            d = odt.to_rlx(t.data_type)
            if d is None:
                raise Reject(f"{what}: initializer {t.name!r} has element type "
                             f"{odt.onnx_type_name(t.data_type)}")
            data = numpy_helper.to_array(t)
            cx.add_param(t.name, data, TensorType(d, tuple(int(s) for s in data.shape)))
        for i, node in enumerate(graph.node):
            where = f"{what}.{node.name or i}"
            if node.domain not in DEFAULT_DOMAINS or node.op_type not in CONVERTERS:
                raise Reject(f"{what}: {node.op_type} ({node.domain or 'ai.onnx'}) has no "
                             f"converter")
            try:
                version = onnx.defs.get_schema(node.op_type, opset, "").since_version
            except onnx.defs.SchemaError:
                raise Reject(f"{what}: {node.op_type} is not defined in opset {opset}") from None
            if CONVERTERS[node.op_type].at(version) is None:
                raise Reject(f"{what}: {node.op_type} version {version} is not implemented")
            try:
                outs = _convert(cx, node, version, opset, where)
            except Reject as r:
                raise Reject(f"{what}: {node.op_type}: {r.reason}") from None
            except RlxError as err:
                raise Reject(f"{what}: {node.op_type}: {err.message.splitlines()[0]}") from None
            for oname, val in zip(node.output, outs, strict=False):
                if oname and val is not None:
                    cx.env[oname] = val
        missing = [o.name for o in graph.output if o.name not in cx.env]
        if missing:
            raise Reject(f"{what}: output(s) {', '.join(missing)} are never computed")
        return [cx.env[o.name] for o in graph.output]
    finally:
        cx.env.clear()
        cx.env.update(saved)
