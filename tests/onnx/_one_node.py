"""Build a one-node ONNX model and compare rlx with onnx.reference.ReferenceEvaluator."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from rlx_core.frontend.onnx_backend import backend_for


def model(op: str, inputs: dict[str, np.ndarray], n_out: int = 1, opset: int = 22,
          domain: str = "", consts: dict[str, np.ndarray] | None = None,
          out_type: int = onnx.TensorProto.UNDEFINED, **attrs: Any) -> onnx.ModelProto:
    """``op`` over graph inputs ``inputs`` and initializers ``consts`` (in that input order
    where the names say so: pass them all in ``order``-preserving dicts)."""
    consts = consts or {}
    names = list(inputs) + list(consts)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    g = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, out_type, None) for o in outs],
        initializer=[onnx.numpy_helper.from_array(v, k) for k, v in consts.items()])
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(g, opset_imports=imports)


def check(m: onnx.ModelProto, inputs: dict[str, np.ndarray], target: str = "numpy",
          rtol: float = 1e-5, atol: float = 1e-6) -> list[np.ndarray]:
    want = ReferenceEvaluator(m).run(None, inputs)
    got = backend_for(target).prepare(m, "CPU").run(list(inputs.values()))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)
    return got


def check_exact(m: onnx.ModelProto, inputs: dict[str, np.ndarray],
                target: str = "numpy") -> list[np.ndarray]:
    """Like ``check``, but every output must equal the reference's bit for bit (integer and
    quantized ops, index outputs)."""
    want = ReferenceEvaluator(m).run(None, inputs)
    got = backend_for(target).prepare(m, "CPU").run(list(inputs.values()))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)
    return got
