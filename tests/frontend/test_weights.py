"""safetensors weights: reading, binding into graph parameters, and a clear typed error for
every kind of bad file or mismatch (corrupted header, truncation, missing, mis-shaped)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.frontend.weights import (
    WeightsFileError,
    WeightsMismatchError,
    bind_weights,
    check_weights,
    load_weights,
    read_header,
    read_safetensors,
)

safetensors_numpy = pytest.importorskip("safetensors.numpy",
                                        reason="the safetensors package is not installed")

RNG = np.random.default_rng(5)


@pytest.fixture
def weights_file(tmp_path):
    tensors = {"fc.weight": RNG.standard_normal((3, 20)).astype(np.float32),
               "fc.bias": RNG.standard_normal(3).astype(np.float32),
               "steps": np.arange(4, dtype=np.int64)}
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(tensors, str(path))
    return path, tensors


def test_read_round_trips(weights_file) -> None:
    path, tensors = weights_file
    got = read_safetensors(path)
    assert set(got) == set(tensors)
    for k in tensors:
        np.testing.assert_array_equal(got[k], tensors[k])
    assert {i.name: i.shape for i in read_header(path)}["fc.weight"] == (3, 20)


def test_bound_weights_drive_a_compiled_graph(weights_file) -> None:
    path, tensors = weights_file
    w0, b0 = np.zeros((3, 20), np.float32), np.zeros(3, np.float32)

    def model(x):
        return rlx.nn.linear(x, rlx.param(w0, "fc.weight"), rlx.param(b0, "fc.bias"))

    x = RNG.standard_normal((2, 20)).astype(np.float32)
    g = bind_weights(rlx.trace(model, x), load_weights(path))
    got = rlx.compile(g)(x)
    np.testing.assert_allclose(got, x @ tensors["fc.weight"].T + tensors["fc.bias"], rtol=1e-5)


def test_corrupted_header_is_a_typed_error(weights_file) -> None:
    path, _ = weights_file
    raw = bytearray(path.read_bytes())
    raw[8:12] = b"\xff\xfe{{"
    path.write_bytes(bytes(raw))
    with pytest.raises(WeightsFileError, match="not valid JSON"):
        read_safetensors(path)


def test_header_length_beyond_the_file(weights_file) -> None:
    path, _ = weights_file
    raw = bytearray(path.read_bytes())
    raw[:8] = struct.pack("<Q", 10**12)
    path.write_bytes(bytes(raw))
    with pytest.raises(WeightsFileError, match="does not fit"):
        read_safetensors(path)


def test_truncated_file_lists_every_broken_entry(weights_file) -> None:
    path, _ = weights_file
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    path.write_bytes(raw[:8 + n + 16])  # header intact, most data gone
    with pytest.raises(WeightsFileError) as info:
        read_safetensors(path)
    assert "fc.weight" in info.value.message and "corrupted header entr" in info.value.message


def test_tiny_and_missing_files(tmp_path) -> None:
    (tmp_path / "tiny.safetensors").write_bytes(b"abc")
    with pytest.raises(WeightsFileError, match="too short"):
        read_safetensors(tmp_path / "tiny.safetensors")
    with pytest.raises(WeightsFileError, match="cannot read"):
        read_safetensors(tmp_path / "absent.safetensors")


def test_unknown_dtype_in_header(tmp_path) -> None:
    header = json.dumps({"x": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})
    raw = struct.pack("<Q", len(header)) + header.encode() + b"\0\0"
    (tmp_path / "f8.safetensors").write_bytes(raw)
    with pytest.raises(WeightsFileError, match="unsupported dtype F8_E4M3"):
        read_safetensors(tmp_path / "f8.safetensors")


def test_mismatches_are_all_listed(weights_file) -> None:
    path, _ = weights_file
    w = read_safetensors(path)
    expected = {"fc.weight": ((3, 21), None), "fc.bias": ((3,), "f64"),
                "head.weight": ((2, 3), None), "head.bias": ((2,), None)}
    with pytest.raises(WeightsMismatchError) as info:
        check_weights(w, expected, allow_unexpected=False)
    err = info.value
    assert err.missing == ("head.weight", "head.bias")
    assert [m[0] for m in err.mismatched] == ["fc.weight", "fc.bias"]
    assert "expected ?[3,21], found f32[3,20]" in err.message
    assert err.unexpected == ("steps",)
    assert err.code == "RLX-F002" and err.hint


def test_bind_weights_checks_graph_parameter_shapes(weights_file) -> None:
    path, _ = weights_file
    w_small = np.zeros((3, 19), np.float32)

    def model(x):
        return rlx.nn.linear(x, rlx.param(w_small, "fc.weight"))

    g = rlx.trace(model, np.zeros((1, 19), np.float32))
    with pytest.raises(WeightsMismatchError, match="fc.weight: expected f32\\[3,19\\]"):
        bind_weights(g, load_weights(path))
