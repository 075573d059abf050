"""The GPT-2 decode step (rlx_core/models/gpt2.py): logits equal HuggingFace's, one compile.

A tiny GPT2LMHeadModel (2 layers, 64 wide, seeded random weights, nothing downloaded) is the
oracle: its full forward pass over the generated ids gives every position's logits, which the
rlx step, fed one token at a time through its fixed-size KV cache, must reproduce within 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.models.gpt2 import (
    DecodeArgumentsError,
    DecodeLengthError,
    DecoderConfig,
    DecoderConfigError,
    GPT2Decoder,
    weights_from_torch,
)
from tests.models.conftest import target_or_skip

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def tiny_config(**kw):
    base = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=32,
                bos_token_id=0, eos_token_id=0)
    return transformers.GPT2Config(**{**base, **kw})


@pytest.fixture(scope="module")
def hf_model():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(tiny_config()).eval()


def test_steps_match_huggingface_and_compile_once(hf_model) -> None:
    dec = GPT2Decoder(DecoderConfig.from_hf(hf_model.config, n_ctx=16),
                      weights_from_torch(hf_model), target=target_or_skip("cpu"))
    logits: list[np.ndarray] = []
    ids = dec.generate([5, 17, 3], 6, logits)
    steps = len(ids) - 1
    with torch.no_grad():
        ref = hf_model(torch.tensor([ids[:-1]])).logits[0].numpy()
    got = np.concatenate(logits, 0)
    assert got.shape == ref.shape == (steps, 512)
    assert np.abs(got - ref).max() <= 1e-4
    # greedy: every generated token is the argmax of the previous position's logits
    assert ids[3:] == [int(i) for i in ref[2:].argmax(-1)]
    # same shapes every step: one specialization, compiled on the first call, hit after
    assert (dec.step.misses, dec.step.hits) == (1, steps - 1)
    assert len(dec.step.specializations) == 1


def test_cpu_step_updates_the_donated_caches_in_place(hf_model) -> None:
    """On the CPU target the step's caches come back as the arrays passed in (donated, one row
    written), with the values of the numpy reference, which returns new arrays."""
    cfg = DecoderConfig.from_hf(hf_model.config, n_ctx=16)
    weights = weights_from_torch(hf_model)
    dec = GPT2Decoder(cfg, weights, target=target_or_skip("cpu"))
    ref = GPT2Decoder(cfg, weights, target="numpy")
    caches, ref_caches = dec.empty_cache(), ref.empty_cache()
    for pos, tok in enumerate([5, 17, 3, 9]):
        args = (np.array([tok], np.int32), np.array([pos], np.int32))
        logits, *new = dec.step(*args, *caches)
        want, *ref_caches = ref.step(*args, *ref_caches)
        assert all(a is b for a, b in zip(new, caches, strict=True))
        for got, exp in zip(new, ref_caches, strict=True):
            np.testing.assert_allclose(got, exp, atol=1e-5)
        np.testing.assert_allclose(logits, want, atol=1e-4)
        caches = new


def test_cache_too_short_is_a_typed_error(hf_model) -> None:
    dec = GPT2Decoder(DecoderConfig.from_hf(hf_model.config, n_ctx=4),
                      weights_from_torch(hf_model), target="numpy")
    with pytest.raises(DecodeLengthError, match="does not fit") as err:
        dec.generate([1, 2], 3)
    assert err.value.code == "RLX-J007" and dec.step.misses == 0  # raised before any compile


def test_unsupported_configs_are_typed_errors() -> None:
    with pytest.raises(DecoderConfigError, match="activation_function"):
        DecoderConfig.from_hf(tiny_config(activation_function="relu"))
    with pytest.raises(DecoderConfigError, match="n_ctx=64"):
        DecoderConfig.from_hf(tiny_config(), n_ctx=64)


def test_wrong_cache_count_is_a_typed_error(hf_model) -> None:
    cfg = DecoderConfig.from_hf(hf_model.config, n_ctx=4)
    dec = GPT2Decoder(cfg, weights_from_torch(hf_model), target="numpy")
    one = np.zeros(1, np.int32)
    with pytest.raises(DecodeArgumentsError, match="takes 4 cache arrays"):
        dec.step(one, one, *dec.empty_cache()[:3])
