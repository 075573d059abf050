"""Training the MNIST MLP end to end: the loop the example script and notebook share."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlx_core.models.mlp import MNIST_SIZES, init_mlp, mlp_loss, mlp_predict


@dataclass
class TrainResult:
    """What one training run produced: parameters, per-step losses, throughput, accuracy."""

    params: Any
    losses: list[float] = field(default_factory=list)
    images_per_s: float = 0.0
    test_accuracy: float = 0.0
    steps: int = 0
    seconds: float = 0.0


def accuracy(params: Any, x: Any, y: Any, target: str | None = None,
             batch: int = 1000) -> float:
    """Fraction of rows of ``x`` whose predicted class equals ``y`` (one compile per shape, on
    ``target``; None: the fastest target available here)."""
    import numpy as np

    import rlx_core.api as api
    from rlx_core.targets.registry import resolve_target

    target = resolve_target(target)

    def predict(t: Any) -> Any:
        return mlp_predict(params, t)  # the parameters become bound weights of the executable

    exes: dict[int, Any] = {}
    correct = 0
    for start in range(0, len(x), batch):
        xb = x[start:start + batch]
        if len(xb) not in exes:
            exes[len(xb)] = api.compile(predict, xb, target=target, name="mlp_predict")
        correct += int((np.asarray(exes[len(xb)](xb)) == y[start:start + batch]).sum())
    return correct / max(len(x), 1)


def train_mlp(data: Any, epochs: float = 1.0, batch: int = 128, lr: float = 1e-3,
              sizes: tuple[int, ...] = MNIST_SIZES, target: str | None = None, seed: int = 0,
              max_train: int | None = None, max_test: int | None = None,
              on_step: Callable[[int, float], None] | None = None) -> TrainResult:
    """Adam on shuffled mini-batches of ``data`` (an Mnist); one compiled step graph, on
    ``target`` (None: the fastest target available here)."""
    import numpy as np

    from rlx_core.optim import Adam, compile_step
    from rlx_core.targets.registry import resolve_target

    target = resolve_target(target)
    x, y = data.flat("train")
    xt, yt = data.flat("test")
    if max_train:
        x, y = x[:max_train], y[:max_train]
    if max_test:
        xt, yt = xt[:max_test], yt[:max_test]
    params = init_mlp(sizes, seed)
    step = compile_step(mlp_loss, Adam(lr), params, x[:batch], y[:batch], target=target)
    rng = np.random.default_rng(seed)
    n_steps = max(1, int(epochs * (len(x) // batch)))
    order = np.concatenate([rng.permutation(len(x)) for _ in range(int(epochs) + 1)])
    start = time.perf_counter()
    for i in range(n_steps):
        idx = order[i * batch:(i + 1) * batch]
        loss = step(x[idx], y[idx])
        if on_step is not None:
            on_step(i, loss)
    seconds = time.perf_counter() - start
    result = TrainResult(step.params, list(step.losses), n_steps * batch / seconds, 0.0,
                         n_steps, seconds)
    result.test_accuracy = accuracy(step.params, xt, yt, target=target)
    return result
