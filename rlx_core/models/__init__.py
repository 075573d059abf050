"""Models written with rlx blocks: the MNIST MLP and all-MiniLM-L6-v2 (weights loaded, never
downloaded). Submodules import their optional dependencies lazily."""

from rlx_core.models import mlp

__all__ = ["mlp", "minilm", "train_mnist"]


def __getattr__(name: str):  # minilm / train_mnist on first use
    if name in ("minilm", "train_mnist"):
        import importlib

        return importlib.import_module(f"rlx_core.models.{name}")
    raise AttributeError(name)
