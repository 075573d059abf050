"""Models written with rlx blocks: the MNIST MLP, all-MiniLM-L6-v2 and a GPT-2 decode step
(weights loaded, never downloaded). Submodules import their optional dependencies lazily."""

from rlx_core.models import mlp

__all__ = ["mlp", "minilm", "train_mnist", "gpt2"]


def __getattr__(name: str):  # minilm / train_mnist / gpt2 on first use
    if name in ("minilm", "train_mnist", "gpt2"):
        import importlib

        return importlib.import_module(f"rlx_core.models.{name}")
    raise AttributeError(name)
