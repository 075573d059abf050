"""rlx.from_torch: torch.export programs imported to HIR match torch; MiniLM imported this way
matches the hand-written rlx model; unmapped aten ops are reported together."""

from __future__ import annotations

import os

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.frontend.torch_export import (
    ATEN_OPS,
    TorchImportError,
    UnsupportedTorchOpError,
    from_torch,
)

torch = pytest.importorskip("torch", reason="torch is not installed (pip install '.[torch]')")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.ln(self.fc1(x)))
        h = h.view(x.shape[0], 4, 2, 4).permute(0, 2, 1, 3).reshape(x.shape[0], -1)
        h = torch.softmax(h[:, 1:] * 2.0 - 1.0, dim=-1)
        return torch.tanh(torch.cat([h, h.sum(dim=-1, keepdim=True)], dim=1))


class Attn(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_mlp_block_matches_torch() -> None:
    m = Block().eval()
    x = torch.randn(3, 16)
    g = from_torch(m, x)
    assert g.level.value == "hir"
    assert {"linear", "layer_norm", "gelu", "softmax"} <= set(g.op_counts())
    assert {"fc1.weight", "fc1.bias", "ln.weight", "fc2.bias"} <= {p.name for p in g.params}
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(rlx.compile(g)(x.numpy()), want, rtol=1e-5, atol=1e-6)
    assert not m.training


def test_causal_attention_matches_torch() -> None:
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    g = from_torch(Attn(), q, k, v)
    assert "attention" in g.op_counts()
    want = Attn()(q, k, v).numpy()
    np.testing.assert_allclose(rlx.compile(g)(q.numpy(), k.numpy(), v.numpy()), want,
                               rtol=1e-5, atol=1e-6)


class Unsupported(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(torch.sort(x, dim=-1).values, dim=-1) + torch.cumsum(x, dim=0)


def test_every_unmapped_op_is_reported_together() -> None:
    with pytest.raises(UnsupportedTorchOpError) as info:
        from_torch(Unsupported(), torch.randn(3, 4))
    err = info.value
    assert set(err.ops) == {"aten.cumsum.default", "aten.sort.default"}
    assert err.ops["aten.cumsum.default"] == 2
    assert "aten.sort.default" in err.message and err.hint


def test_export_failure_is_typed() -> None:
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(TorchImportError, match="torch.export failed"):
        from_torch(DataDependent(), torch.randn(3))


def test_table_maps_the_ops_bert_needs() -> None:
    for op in ("aten.linear.default", "aten.layer_norm.default",
               "aten.scaled_dot_product_attention.default", "aten.embedding.default",
               "aten.index.Tensor", "aten.gelu.default"):
        assert op in ATEN_OPS


@pytest.mark.slow  # exports a 6-layer BERT and imports transformers
def test_minilm_from_torch_matches_the_hand_written_model() -> None:
    from rlx_core.models.minilm import MiniLM, ModelNotFoundError

    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    try:
        model = MiniLM.load()
    except ModelNotFoundError as err:
        pytest.skip(f"MiniLM weights not installed: {err.message}")
    bert = transformers.BertModel.from_pretrained(str(model.folder)).eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask, types):
            return self.bert(input_ids=ids, attention_mask=mask,
                             token_type_ids=types).last_hidden_state

    ids, mask, types = model.tokenize(["rlx imports torch programs.", "short"])
    args64 = [a.astype(np.int64) for a in (ids, mask, types)]
    g = from_torch(Hidden().eval(), *(torch.from_numpy(a) for a in args64))
    assert {"linear", "layer_norm", "gelu", "embedding"} <= set(g.op_counts())
    imported = rlx.compile(g)(*args64)
    hand = rlx.compile(model.hidden_fn(), ids, mask, types)(ids, mask, types)
    valid = mask.astype(bool)  # padded query rows are unused (pooling masks them)
    np.testing.assert_allclose(imported[valid], hand[valid], atol=1e-4, rtol=0)
    with torch.no_grad():
        want = Hidden().eval()(*(torch.from_numpy(a) for a in args64)).numpy()
    np.testing.assert_allclose(imported[valid], want[valid], atol=1e-4, rtol=0)
