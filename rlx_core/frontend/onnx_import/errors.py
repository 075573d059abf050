"""Typed errors of the ONNX importer: a malformed model, an opset it does not know, and the one
report listing every node it cannot convert exactly."""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.errors import RlxError


class OnnxImportError(RlxError):
    """The model cannot be read: truncated or corrupt protobuf, missing values, bad graph."""

    code = "RLX-O001"


class UnknownOpsetError(OnnxImportError):
    """The model imports an opset (or a domain) the importer has no rules for."""

    code = "RLX-O002"


@dataclass(frozen=True)
class Problem:
    """One node the importer refuses: which node, which op, and exactly why."""

    node: str
    op_type: str
    reason: str

    def __str__(self) -> str:
        return f"{self.node or '<unnamed>'} ({self.op_type}): {self.reason}"


class UnsupportedOp(OnnxImportError):
    """Some nodes use an op, an op version, an attribute or a dtype the importer does not
    convert exactly. ``problems`` lists all of them, not only the first: the importer never
    guesses, so a model either imports with ONNX semantics or fails here."""

    code = "RLX-O003"

    def __init__(self, problems: tuple[Problem, ...], *, hint: str | None = None):
        self.problems = problems
        ops = sorted({p.op_type for p in problems})
        lines = "\n".join(f"  - {p}" for p in problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(
            f"{len(problems)} node(s) cannot be imported exactly (op types: {', '.join(ops)}):\n"
            f"{lines}{more}",
            hint=hint or "rewrite these nodes with supported ops (onnx.version_converter, "
                         "onnxsim), or add a converter in rlx_core/frontend/onnx_import/ops/",
        )


class Reject(Exception):
    """Raised inside a converter to refuse one node; the importer turns it into a Problem and
    carries on, so that every unsupported node ends up in one UnsupportedOp."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class MalformedOnnxError(OnnxImportError):
    """The model breaks the ONNX format's own rules: text that is not UTF-8, a value defined
    twice, an attribute of another type than its op's schema declares."""

    code = "RLX-O020"


class ExternalDataError(OnnxImportError):
    """An initializer keeps its data in an external file that cannot be read: missing, outside
    the model's folder, shorter than it says, or no folder to look in (the model came as bytes)."""

    code = "RLX-O021"


class NodeImportError(UnsupportedOp):
    """Converting some node failed in a way the importer did not foresee (the last resort: any
    exception inside a node's conversion). ``problems`` names each such node, with the rest."""

    code = "RLX-O022"
