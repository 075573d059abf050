"""rlx_core: a tensor compiler and runtime. Imports with the standard library alone.

    import rlx_core as rlx

    @rlx.jit
    def block(x, w):
        return rlx.nn.softmax(x @ w, axis=-1)
"""

from __future__ import annotations

from typing import Any

# rlx.targets() is the subpackage, callable (rlx_core/targets/__init__.py), not a function
# bound over it: `import rlx_core.targets.cpu.toolchain as tc` must find the package
from rlx_core import nn, targets
from rlx_core.api import JitFunction, TargetInfo, compile, jit, lower
from rlx_core.compile_trace import CompileTrace
from rlx_core.errors import (
    ArgumentError,
    AxisError,
    DTypeError,
    IRParseError,
    RlxError,
    ShapeError,
    TargetUnavailableError,
    TraceError,
    VerifyError,
)
from rlx_core.frontend import elementwise as _ew
from rlx_core.frontend.ops import (
    arange,
    argmax,
    asarray,
    astype,
    broadcast_to,
    concat,
    iota,
    matmul,
    mean,
    ones,
    param,
    reshape,
    stack,
    swapaxes,
    take,
    transpose,
    where,
    zeros,
)
from rlx_core.frontend.tensor import Tensor
from rlx_core.frontend.tracer import TensorSpec, block, spec, trace
from rlx_core.ir.dtypes import (
    DType,
    bf16,
    bool_,
    c64,
    f16,
    f32,
    f64,
    i4,
    i8,
    i16,
    i32,
    i64,
    u8,
    u32,
)
from rlx_core.runtime.executable import Executable

exp, log, sqrt, rsqrt, tanh, erf, sin, cos, abs, floor, ceil, sign = (
    _ew.exp, _ew.log, _ew.sqrt, _ew.rsqrt, _ew.tanh, _ew.erf, _ew.sin, _ew.cos, _ew.abs,
    _ew.floor, _ew.ceil, _ew.sign)
maximum, minimum, sigmoid = _ew.maximum, _ew.minimum, _ew.sigmoid

# Outside a trace these compute eagerly on plain arrays (rlx_core/frontend/eager.py).
from rlx_core.frontend.eager import eager as _eager  # noqa: E402

(arange, argmax, astype, broadcast_to, concat, iota, matmul, mean, ones, reshape, stack, swapaxes,
 take, transpose, where, zeros, exp, log, sqrt, rsqrt, tanh, erf, sin, cos, abs, floor, ceil, sign,
 maximum, minimum, sigmoid) = (_eager(f) for f in (
    arange, argmax, astype, broadcast_to, concat, iota, matmul, mean, ones, reshape, stack,
    swapaxes, take, transpose, where, zeros, exp, log, sqrt, rsqrt, tanh, erf, sin, cos, abs,
    floor, ceil, sign, maximum, minimum, sigmoid))

__version__ = "0.1.0"

# Names from the dispatch layer are resolved lazily so that `import rlx_core` stays cheap.
_LAZY = {
    "LegalizationError": ("rlx_core.dispatch.errors", "LegalizationError"),
    "explain": ("rlx_core.dispatch.explain", "explain"),
    "set_policy": ("rlx_core.dispatch.policy", "set_policy"),
    # Pyodide in a browser: `await rlx.init_webgpu()` opens the page's GPU before compiling
    "init_webgpu": ("rlx_core.targets.webgpu.runtime_browser", "init"),
    # autodiff, optimizers, importers and models (attr None: the module itself)
    "grad": ("rlx_core.autodiff.api", "grad"),
    "value_and_grad": ("rlx_core.autodiff.api", "value_and_grad"),
    "from_torch": ("rlx_core.frontend.torch_export", "from_torch"),
    "from_onnx": ("rlx_core.frontend.onnx_import", "from_onnx"),
    "UnsupportedOp": ("rlx_core.frontend.onnx_import", "UnsupportedOp"),
    "load_weights": ("rlx_core.frontend.weights", "load_weights"),
    "optim": ("rlx_core.optim", None),
    "quant": ("rlx_core.quant", None),
    "models": ("rlx_core.models", None),
    "autodiff": ("rlx_core.autodiff", None),
    "distributed": ("rlx_core.distributed", None),
    "splat": ("rlx_core.splat", None),
    "linalg": ("rlx_core.linalg", None),
    "sparse": ("rlx_core.sparse", None),
}


# The public names: the eager re-exports above and the lazily resolved ones.
__all__ = [
    "nn", "JitFunction", "TargetInfo", "compile", "jit", "lower", "targets", "CompileTrace",
    "ArgumentError", "AxisError", "DTypeError", "IRParseError", "RlxError", "ShapeError",
    "TargetUnavailableError", "TraceError", "VerifyError",
    "arange", "argmax", "asarray", "astype", "broadcast_to", "concat", "iota", "matmul", "mean",
    "ones", "param", "reshape", "stack", "swapaxes", "take", "transpose", "where", "zeros",
    "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "abs", "floor", "ceil", "sign",
    "maximum", "minimum", "sigmoid",
    "Tensor", "TensorSpec", "block", "spec", "trace",
    "DType", "bf16", "bool_", "c64", "f16", "f32", "f64", "i4", "i8", "i16", "i32", "i64", "u8",
    "u32", "Executable", "__version__", *_LAZY,
]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        mod = importlib.import_module(module)
        return mod if attr is None else getattr(mod, attr)
    raise AttributeError(f"module 'rlx_core' has no attribute {name!r}")
