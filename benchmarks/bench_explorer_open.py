"""How fast the explorer opens a large graph: a ResNet-50-class ONNX model in the offline HTML
export, in headless system Chromium (issue 30 asks <= 2 s and a responsive page).

The model is a full-depth ResNet-50 exported by PyTorch (benchmarks/cnn_nets.py) at 1/8 of the
channels, so the file stays small: the graph (its ~120 HIR and ~900 MIR nodes) is what is
measured, not the weights. Each run opens the saved page in a fresh tab and records

- ``viewer mount``: the viewer's own ``data-open-ms`` (its render() call to the viewer mounted;
  the graphs are laid out and drawn after that);
- ``first graph``: ``page.goto`` to the HIR graph's nodes in the DOM — what a user waits for,
  and what the goal is about (the 2.5 MB page parsed, Graphviz's WASM started, the layout);
- ``click + fit``: a click on a node until the side panel answers, then fit-to-view.

    python benchmarks/bench_explorer_open.py            # 5 opens, writes results/explorer-open-<cpu>.*
    python benchmarks/bench_explorer_open.py --runs 1 --no-write

The browser test tests/browser_explorer/test_html_export.py runs ``measure`` once and prints
it (tests never assert wall-clock time); this script is where the numbers are committed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    end_of_run,
    isa,
    machine,
    machine_stem,
    markdown_table,
    stamp,
    write_results,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
GOAL_S = 2.0


def resnet_page(folder: Path) -> tuple[Path, dict[str, int]]:
    """The explorer of the ResNet-50-class model saved as one HTML file; its graph sizes."""
    import numpy as np
    import torch

    import rlx_core as rlx
    from benchmarks.cnn_nets import build, export
    from rlx_explorer import explore

    net = build("resnet50", width=0.125, classes=10, short=False)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    model = folder / "resnet50.onnx"
    model.write_bytes(export(net, torch.from_numpy(x), 17))
    graph = rlx.from_onnx(model)
    # devices=False: the opening is measured; fifteen more lowerings would only add build time
    ex = explore(graph, x, targets=("numpy",), run=False, title="resnet50", devices=False)
    out = ex.save_html(folder / "resnet50.html")
    levels = ex.bundle["levels"]
    return out, {level: len(levels[level]["nodes"]) for level in ("hir", "mir", "lir")}


def measure(page: Any, path: Path) -> dict[str, float]:
    """Open ``path`` in ``page``; the three times above, in ms."""
    start = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector(".rlx-graph[data-graph='hir'] svg g.node", timeout=60_000)
    first = time.perf_counter() - start
    opened = float(page.get_attribute(".rlx-root", "data-open-ms") or "nan")
    t0 = time.perf_counter()
    page.locator(".rlx-graph[data-graph='hir'] g.node").first.click()
    page.wait_for_selector(".rlx-side .rlx-detail, .rlx-side pre", timeout=10_000)
    page.locator(".rlx-graph[data-graph='hir'] button[data-zoom='fit']").click()
    click = time.perf_counter() - t0
    return {"open_ms": opened, "first_graph_ms": first * 1e3, "click_fit_ms": click * 1e3}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    info = {**machine(), "isa": isa(), "chromium": CHROMIUM}
    with tempfile.TemporaryDirectory() as tmp:
        page_path, sizes = resnet_page(Path(tmp))
        size_kb = page_path.stat().st_size / 1e3
        runs = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            info["chromium_version"] = browser.version
            errors: list[str] = []
            for _ in range(args.runs):
                ctx = browser.new_context(viewport={"width": 1500, "height": 950})
                page = ctx.new_page()
                page.on("pageerror", lambda e: errors.append(str(e)))
                runs.append(measure(page, page_path))
                if errors:
                    raise SystemExit(f"page errors: {errors}")
                ctx.close()
            browser.close()
    end_of_run(info)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    rows = [[i + 1, f"{r['open_ms']:.0f}", f"{r['first_graph_ms']:.0f}",
             f"{r['click_fit_ms']:.0f}"] for i, r in enumerate(runs)]
    rows.append(["median", f"{med['open_ms']:.0f}", f"{med['first_graph_ms']:.0f}",
                 f"{med['click_fit_ms']:.0f}"])
    verdict = "within" if med["first_graph_ms"] <= GOAL_S * 1e3 else "over"
    md = (f"# Explorer: opening a ResNet-50-class graph\n\n{stamp(info)}; Chromium "
          f"{info['chromium_version']} headless.\n\n"
          f"ResNet-50 (full depth, 1/8 channels, ONNX opset 17 exported by PyTorch): "
          f"{sizes['hir']} HIR / {sizes['mir']} MIR / {sizes['lir']} LIR nodes; the offline "
          f"HTML export is {size_kb:.0f} kB.\n\n"
          + markdown_table(["run", "viewer mount (ms)", "page load to first graph (ms)",
                            "click + fit (ms)"], rows)
          + f"\nGoal (issue 30): open in <= {GOAL_S:g} s: the median page load to the first "
            f"graph is {med['first_graph_ms'] / 1e3:.2f} s, {verdict} the goal on this machine "
            f"under this load.\n\nRegenerate: `python benchmarks/bench_explorer_open.py`\n")
    print(md)
    if not args.no_write:
        js, mdp = write_results(machine_stem("explorer-open"),
                                {"machine": info, "sizes": sizes, "html_kb": size_kb,
                                 "runs": runs, "median": med, "goal_s": GOAL_S}, md)
        print(f"wrote {js} and {mdp}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
