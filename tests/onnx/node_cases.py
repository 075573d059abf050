"""The official ONNX backend node tests, loaded once and cached on disk.

onnx >= 1.20 no longer ships ``onnx/backend/test/data/node``: the cases are generated in memory
by ``onnx.backend.test.loader.load_model_tests(kind="node")`` (about a minute of numpy work).
Every pytest worker and the report script would pay that again, so the generated cases are
pickled once per onnx version under ``.rlx_cache/`` (git-ignored) and read back in a second.
"""

from __future__ import annotations

import os
import pickle
import warnings
from dataclasses import dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE_DIR = os.environ.get("RLX_ONNX_CACHE", os.path.join(ROOT, ".rlx_cache"))


@dataclass(frozen=True)
class NodeCase:
    """One node test: the serialized model, its data sets (inputs, expected outputs), tolerances."""

    name: str
    model: bytes
    data_sets: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]
    rtol: float
    atol: float


def _normalize(item: Any) -> Any:
    """What the official runner feeds a backend: TensorProto inputs become numpy arrays."""
    import onnx
    from onnx import numpy_helper

    if isinstance(item, onnx.TensorProto):
        return numpy_helper.to_array(item)
    return item


def _generate() -> list[NodeCase]:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    out = []
    for c in cases:
        sets = tuple(
            (tuple(_normalize(x) for x in ins), tuple(_normalize(y) for y in outs))
            for ins, outs in c.data_sets
        )
        out.append(NodeCase(c.name, c.model.SerializeToString(), sets, c.rtol, c.atol))
    out.sort(key=lambda k: k.name)
    return out


def cache_path() -> str:
    import onnx

    return os.path.join(CACHE_DIR, f"onnx-node-tests-{onnx.__version__}.pkl")


def load_cases() -> list[NodeCase]:
    """Every node test case, sorted by name (generated and cached on first use)."""
    path = cache_path()
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                return [NodeCase(*row) for row in pickle.load(f)]
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError):
            pass  # a partial or stale cache: regenerate below
    cases = _generate()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        # plain tuples, not NodeCase: the pickle must not depend on how this module is imported
        rows = [(c.name, c.model, c.data_sets, c.rtol, c.atol) for c in cases]
        pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)  # atomic: parallel workers never read a half-written file
    return cases


def case_names() -> list[str]:
    return [c.name for c in load_cases()]
