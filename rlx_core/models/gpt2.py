"""A GPT-2 decoder step with a fixed-size KV cache, written with rlx blocks.

One call of ``decode_step`` is one token of greedy decoding: the token at position ``pos`` goes
in with every layer's key and value cache, its logits and the updated caches come out. The caches
always hold ``n_ctx`` positions, so every step has the same shapes and a jitted step compiles
once: the new key/value row is written at ``pos`` by a select
(``where(slot == pos, new, cache)``) and attention sees every position with a mask that
hides those after ``pos``. ``GPT2Decoder`` donates the caches to its jitted step, so on the
CPU target the select writes into the arrays passed in (runtime/donation.py). The weights are a HuggingFace ``GPT2LMHeadModel``'s (``from_torch``
below), so the logits can be checked against HuggingFace's own forward pass.

    cfg = DecoderConfig.from_hf(hf_model.config, n_ctx=128)
    dec = GPT2Decoder(cfg, weights_from_torch(hf_model))
    ids = dec.generate([50256, 464], 64)          # greedy, each step one @rlx.jit call
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import rlx_core.frontend.nn as nn
from rlx_core.errors import RlxError
from rlx_core.frontend import ops
from rlx_core.frontend.tracer import block
from rlx_core.models.named_params import layer_norm, linear, param


class DecoderConfigError(RlxError):
    """The GPT-2 config asks for something the step does not implement."""

    code = "RLX-J006"


class DecodeLengthError(RlxError):
    """The prompt and the tokens to generate do not fit the KV cache."""

    code = "RLX-J007"


class DecodeArgumentsError(RlxError):
    """The step was given another number of cache arrays than its config has layers for."""

    code = "RLX-J008"


@dataclass(frozen=True)
class DecoderConfig:
    """The fields of a HuggingFace GPT2Config the step needs, and the cache length ``n_ctx``."""

    n_layer: int = 12
    n_embd: int = 768
    n_head: int = 12
    vocab_size: int = 50257
    n_ctx: int = 128  # positions the KV cache holds (<= the model's n_positions)
    layer_norm_epsilon: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def cache_shape(self) -> tuple[int, int, int, int]:
        """(batch 1, heads, n_ctx, head_dim): one layer's key (or value) cache."""
        return (1, self.n_head, self.n_ctx, self.head_dim)

    @classmethod
    def from_hf(cls, hf: Any, n_ctx: int | None = None) -> DecoderConfig:
        """From a ``transformers.GPT2Config`` (GPT-2's tanh GELU and scaled attention only)."""
        act = getattr(hf, "activation_function", "gelu_new")
        if act not in ("gelu_new", "gelu_pytorch_tanh"):
            raise DecoderConfigError(f"GPT-2 config: activation_function {act!r} is not "
                                     "implemented", hint="use gelu_new (GPT-2's tanh GELU)")
        if not getattr(hf, "scale_attn_weights", True) or \
                getattr(hf, "scale_attn_by_inverse_layer_idx", False):
            raise DecoderConfigError("GPT-2 config: only the 1/sqrt(head_dim) attention "
                                     "scaling is implemented",
                                     hint="scale_attn_weights=True, "
                                          "scale_attn_by_inverse_layer_idx=False")
        if hf.n_embd % hf.n_head:
            raise DecoderConfigError(f"GPT-2 config: n_embd {hf.n_embd} is not a multiple of "
                                     f"n_head {hf.n_head}", hint="pick heads that divide n_embd")
        ctx = int(n_ctx or hf.n_positions)
        if not 1 <= ctx <= hf.n_positions:
            raise DecoderConfigError(f"KV cache length n_ctx={ctx} is outside 1..n_positions "
                                     f"({hf.n_positions})",
                                     hint="the cache cannot hold positions the model has no "
                                          "position embedding for")
        return cls(hf.n_layer, hf.n_embd, hf.n_head, hf.vocab_size, ctx,
                   float(hf.layer_norm_epsilon))


def weights_from_torch(hf_model: Any) -> dict[str, Any]:
    """float32 host arrays, HuggingFace names without ``transformer.``; GPT-2's Conv1D weights
    (in, out) are transposed once to the (out, in) of ``nn.linear``; ``lm_head`` is tied to
    ``wte`` and not copied."""
    import numpy as np

    out: dict[str, Any] = {}
    for name, t in hf_model.transformer.state_dict().items():
        if name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue  # the causal-mask buffers of older transformers versions
        a = t.detach().cpu().float().numpy()
        if a.ndim == 2 and any(name.endswith(s) for s in (
                "attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                "mlp.c_proj.weight")):
            a = a.T
        out[name] = np.ascontiguousarray(a, dtype=np.float32)
    return out


def decode_step(weights: Mapping[str, Any], cfg: DecoderConfig, tok: Any, pos: Any,
                *caches: Any) -> tuple[Any, ...]:
    """(logits (1, vocab), k_0', v_0', k_1', v_1', ...) for token ``tok`` (1,) i32 at position
    ``pos`` (1,) i32, given each layer's key and value cache (``cfg.cache_shape``), in that
    order. One array per layer and kind rather than one stacked array: a layer's update then
    reads its own input and writes its own output, with no slice or concatenation copies."""
    c, nh, dh, t = cfg.n_embd, cfg.n_head, cfg.head_dim, cfg.n_ctx
    eps = cfg.layer_norm_epsilon
    if len(caches) != 2 * cfg.n_layer:
        raise DecodeArgumentsError(f"the step takes {2 * cfg.n_layer} cache arrays (a key and a "
                                f"value cache per layer), got {len(caches)}",
                                hint="pass GPT2Decoder.empty_cache()'s arrays, in order")
    with block("embeddings"):
        x = nn.embedding(tok, param(weights, "wte.weight")) + \
            nn.embedding(pos, param(weights, "wpe.weight"))  # (1, C)
        slots = ops.iota((1, t), 1, "i32")
        at = ops.broadcast_to(ops.reshape(pos, (1, 1)), (1, t))
        # (1, 1, T, 1): true at the row this step writes; keys after pos are masked out
        here = ops.reshape(slots == at, (1, 1, t, 1))
        visible = slots <= at  # (1, T)
    new: list[Any] = []
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        with block(f"layer{i}"):
            with block("attention"):
                qkv = linear(weights, layer_norm(weights, x, p + "ln_1", eps), p + "attn.c_attn")
                q, k, v = (qkv[:, j * c:(j + 1) * c].reshape(1, nh, 1, dh) for j in range(3))
                # a select, not the blend cache * (1 - onehot) + new * onehot: one loop
                # that reads the cache once and writes it once (the blend's two products
                # fused into two kernels and a (1, H, T, dh) temporary), and exact
                kc = ops.where(here, ops.broadcast_to(k, (1, nh, t, dh)), caches[2 * i])
                vc = ops.where(here, ops.broadcast_to(v, (1, nh, t, dh)), caches[2 * i + 1])
                new += [kc, vc]
                ctx = nn.attention(q, kc, vc, mask="padding", padding_mask=visible,
                                   scale=1.0 / math.sqrt(dh))  # (1, H, 1, dh)
                x = x + linear(weights, ctx.reshape(1, c), p + "attn.c_proj")
            with block("mlp"):
                h = layer_norm(weights, x, p + "ln_2", eps)
                h = nn.gelu(linear(weights, h, p + "mlp.c_fc"), approximate="tanh")
                x = x + linear(weights, h, p + "mlp.c_proj")
    with block("lm_head"):
        # tied to the token embedding: x @ wte.T is a linear layer with wte as its weight
        logits = nn.linear(layer_norm(weights, x, "ln_f", eps), param(weights, "wte.weight"))
    return (logits, *new)


class GPT2Decoder:
    """Greedy decoding with one ``@rlx.jit`` step per token (compiled once: fixed shapes).
    ``step`` donates its cache arguments (``jit(donate=...)``): on the CPU target the caches
    it returns are the arrays passed in, updated in place."""

    def __init__(self, cfg: DecoderConfig, weights: Mapping[str, Any], target: str | None = None):
        from rlx_core.api import jit

        self.config = cfg
        self.weights = dict(weights)

        def gpt2_step(tok: Any, pos: Any, *caches: Any) -> Any:
            return decode_step(self.weights, cfg, tok, pos, *caches)

        # the caches are donated: on the CPU target each comes back as the same array with
        # its row written in place (runtime/donation.py), not as a fresh copy
        self.step = jit(gpt2_step, target=target, donate=tuple(range(2, 2 + 2 * cfg.n_layer)))

    def empty_cache(self) -> list[Any]:
        """Zeroed caches: layer 0's keys, layer 0's values, layer 1's keys, ..."""
        import numpy as np

        return [np.zeros(self.config.cache_shape, np.float32)
                for _ in range(2 * self.config.n_layer)]

    def generate(self, prompt: Sequence[int], new_tokens: int,
                 logits_out: list[Any] | None = None) -> list[int]:
        """``prompt`` then ``new_tokens`` greedy tokens; each prompt token is one step too (the
        same step, so nothing else compiles). ``logits_out`` collects every step's logits."""
        import numpy as np

        if not prompt or len(prompt) + new_tokens > self.config.n_ctx:
            raise DecodeLengthError(
                f"a prompt of {len(prompt)} token(s) + {new_tokens} new token(s) does not fit "
                f"a KV cache of {self.config.n_ctx} positions",
                hint="give at least one prompt token, and build the decoder with a larger "
                     "n_ctx (DecoderConfig.from_hf(config, n_ctx=...)) or generate fewer")
        caches = self.empty_cache()
        ids = list(prompt)
        for p in range(len(prompt) + new_tokens - 1):
            logits, *caches = self.step(np.array([ids[p]], np.int32), np.array([p], np.int32),
                                        *caches)
            if logits_out is not None:
                logits_out.append(logits)
            if p + 1 >= len(prompt):
                ids.append(int(np.argmax(logits[0])))
        return ids
