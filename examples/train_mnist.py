"""Train the 784-512-512-10 MLP on MNIST with rlx (one compiled graph per step: forward, backward and Adam update); prints progress, images/s and the test accuracy.

    python examples/train_mnist.py --epochs 2              # on cpu (generated C) where it builds
    python examples/train_mnist.py --target numpy          # the reference interpreter
    RLX_MNIST_DIR=/path/to/mnist python examples/train_mnist.py
"""

from __future__ import annotations

import argparse
import os

from rlx_core.api import default_jit_target
from rlx_core.data.mnist import load_mnist
from rlx_core.models.train_mnist import train_mlp
from rlx_core.targets.registry import target_names


def main() -> None:
    ci = os.environ.get("CI") == "true"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=float, default=0.05 if ci else 2.0,
                    help="passes over the training set (fractions allowed; default %(default)s)")
    ap.add_argument("--batch", type=int, default=128, help="batch size (default %(default)s)")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default %(default)s)")
    ap.add_argument("--target", default=default_jit_target(),
                    help=f"one of {', '.join(target_names())} (default %(default)s: the fastest "
                         "target that builds here)")
    ap.add_argument("--data", default=None, help="directory with the MNIST IDX files "
                    "(default: $RLX_MNIST_DIR, else the bundled sample)")
    ap.add_argument("--max-test", type=int, default=2000 if ci else None,
                    help="evaluate on at most this many test images (default: all)")
    args = ap.parse_args()

    data = load_mnist(args.data)
    print(f"data: {data.source} ({len(data.train_labels)} train, {len(data.test_labels)} test)")

    def report(i: int, loss: float) -> None:
        if i % 100 == 0:
            print(f"step {i:5d}  loss {loss:.4f}", flush=True)

    res = train_mlp(data, epochs=args.epochs, batch=args.batch, lr=args.lr, target=args.target,
                    max_test=args.max_test, on_step=report)
    print(f"{res.steps} steps in {res.seconds:.1f} s: {res.images_per_s:,.0f} images/s "
          f"on {args.target}")
    print(f"test accuracy: {res.test_accuracy:.4f}")


if __name__ == "__main__":
    main()
