"""ONNX importer: ONNX models (opset 13 and later) to rlx HIR graphs, with ONNX semantics or an
explicit UnsupportedOp listing every node it cannot convert exactly.

    graph = rlx.from_onnx("model.onnx")
    exe = rlx.compile(graph, x, target="cpu")

Needs the ``onnx`` package (``pip install rlx-explorer[onnx]``); rlx_core itself does not.
"""

from __future__ import annotations

from rlx_core.frontend.onnx_import.errors import (
    OnnxImportError,
    Problem,
    UnknownOpsetError,
    UnsupportedOp,
)
from rlx_core.frontend.onnx_import.importer import (
    MIN_OPSET,
    ImportResult,
    from_onnx,
    import_model,
)

__all__ = ["from_onnx", "import_model", "ImportResult", "OnnxImportError", "UnknownOpsetError",
           "UnsupportedOp", "Problem", "MIN_OPSET"]
