"""Typed, user-facing errors: each carries a stable code, what went wrong and how to fix it."""

from __future__ import annotations


class RlxError(Exception):
    """Base of every error rlx raises on purpose.

    ``code`` is stable (documented in docs/errors.md), ``hint`` says what to do.
    """

    code: str = "RLX-E000"

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None):
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class RlxWarning(UserWarning):
    """Base of every warning rlx gives on purpose: something was worked around (a fallback, a
    read-only cache) rather than refused. Like an error it has a stable code (docs/errors.md)
    and a hint; ``warnings.filterwarnings("error", category=RlxWarning)`` turns them into
    failures."""

    code: str = ""

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        text = f"[{self.code}] {message}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class IRParseError(RlxError):
    """Malformed IR text; ``line`` and ``col`` are 1-based."""

    code = "RLX-P001"

    def __init__(self, message: str, line: int, col: int, source_line: str = "", **kw):
        self.line = line
        self.col = col
        pointer = f"\n  {line:>4} | {source_line}\n       | {' ' * (col - 1)}^" if source_line else ""
        super().__init__(f"line {line}, column {col}: {message}{pointer}", **kw)


class VerifyError(RlxError):
    """The IR broke an invariant of its level; the message shows the IR around the node."""

    code = "RLX-V001"


class ConstantValueError(VerifyError):
    """A ``constant``'s value is not a literal of its dtype ("x", none, a dtype, complex for a
    real dtype, an integer out of range): no target could run it, so the IR is refused."""

    code = "RLX-V003"


class TraceError(RlxError):
    """A user program is ill-typed: raised at trace time, naming op, shapes and source line."""

    code = "RLX-T000"


class ShapeError(TraceError):
    """Operand shapes do not fit the op (broadcasting, contraction, reshape sizes)."""

    code = "RLX-T001"


class DTypeError(TraceError):
    """An unknown dtype, or a dtype the op does not accept."""

    code = "RLX-T002"


class AxisError(TraceError):
    """An axis or permutation out of range for the operand's rank."""

    code = "RLX-T003"


class InvalidShapeError(ShapeError):
    """A shape with a negative, non-integer or otherwise unusable dimension, rejected where it
    enters rlx (``rlx.spec``, an ONNX input, a TensorType) instead of compiling to nonsense."""

    code = "RLX-T004"


class ArgumentError(RlxError):
    """Arguments passed to a compiled function do not match what it was compiled for."""

    code = "RLX-R001"


class IndexOutOfRangeError(RlxError):
    """A gather/scatter/embedding index falls outside the indexed axis at run time.

    Defined here, not in a target, so that every target (the numpy reference, the C runtime,
    the numpy-free WebGPU host layer) raises the one class behind RLX-R002.
    """

    code = "RLX-R002"


class TargetUnavailableError(RlxError):
    """The requested target cannot run on this machine (no compiler, no adapter, ...)."""

    code = "RLX-X001"
