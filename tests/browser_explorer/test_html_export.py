"""The offline HTML export in headless Chromium: every view renders, nodes link across levels,
the f64-on-WebGPU failure is explained, hostile names stay text, MiniLM opens quickly."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlx_core.cli import REPO_ROOT, load_model_file
from rlx_explorer import explore
from rlx_explorer.html_export import save_html
from rlx_explorer.session import Session

from ..explorer.conftest import hostile_graph
from .checks import check_dispatch, check_failures, check_graphs_and_linking, wait_ready
from .conftest import assert_not_blank

MODELS = REPO_ROOT / "examples" / "models"
HERE = Path(__file__).resolve().parent


def _open(page: Any, path: Path) -> None:
    page.goto(path.as_uri())
    wait_ready(page)


def test_export_renders_graphs_dispatch_and_links(page: Any, tmp_path: Path,
                                                 artifacts: Path) -> None:
    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    out = explore(fn, *ins, targets=("numpy", "webgpu")).save_html(tmp_path / "mlp.html")
    _open(page, out)
    check_graphs_and_linking(page, page, artifacts, "html")
    check_dispatch(page, page, artifacts, "html")
    # offline policy what-if: the precomputed probe says which kinds moved
    page.select_option("select.rlx-policy", "force-native")
    page.wait_for_selector(".rlx-moved", timeout=5_000)
    assert "moved" in page.inner_text(".rlx-moved")
    for view in ("text", "passes", "kernels", "memory", "profile", "cache"):
        page.click(f"button[data-view='{view}']")
        page.wait_for_selector(f".rlx-pane[data-pane='{view}'] *", timeout=10_000)
    page.click("button[data-view='passes']")
    page.click("button.rlx-step:has-text('fuse')")
    page.locator(".rlx-rules li").first.click()
    page.wait_for_selector(".rlx-diff g.rlx-hl", timeout=60_000)  # the rule's nodes, marked
    page.click("button[data-view='memory']")
    assert page.locator("svg.rlx-timeline rect.rlx-slot").count() > 0
    # labelled without hovering: buffers, offsets, kernel indices
    assert page.locator("svg.rlx-timeline text.rlx-slot-label").count() > 0
    assert page.locator("svg.rlx-timeline text.rlx-kernel-tick").count() > 0
    # fit-to-view and zoom on a graph pane
    page.click("button[data-view='graph']")
    hir = page.locator(".rlx-graph[data-graph='hir']")
    hir.locator("button[data-zoom='fit']").click()
    fit = float(hir.locator(".rlx-graph-canvas").get_attribute("data-zoom") or 0)
    hir.locator("button[data-zoom='+']").click()
    assert float(hir.locator(".rlx-graph-canvas").get_attribute("data-zoom") or 0) > fit > 0
    # every target's column of the dispatch matrix is in view, not behind a scroll
    page.click("button[data-view='dispatch']")
    last = page.locator("table.rlx-matrix tr").first.locator("th").last.bounding_box()
    assert last and last["x"] + last["width"] <= page.viewport_size["width"], last
    # one level over the whole width, the others a click away
    page.click("button[data-view='graph']")
    page.click("button[data-layout='mir']")
    assert page.locator(".rlx-graph[data-graph='mir']").is_visible()
    assert not page.locator(".rlx-graph[data-graph='hir']").is_visible()
    page.click("button[data-layout='all']")
    assert page.locator(".rlx-graph[data-graph='hir']").is_visible()
    page.click("button[data-view='text']")
    assert page.locator(".rlx-loc").first.is_visible()
    page.uncheck("input.rlx-locs-toggle")
    assert not page.locator(".rlx-loc").first.is_visible()
    page.click("button[data-view='memory']")
    shot = artifacts / "html-memory.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)
    assert not page.errors, page.errors


def test_export_shows_the_legalization_failure(page: Any, tmp_path: Path,
                                               artifacts: Path) -> None:
    fn, ins, _ = load_model_file(MODELS / "illegal_f64.py")
    out = explore(fn, *ins, targets=("webgpu", "numpy")).save_html(tmp_path / "illegal.html")
    _open(page, out)
    check_failures(page, page, artifacts, "html")
    assert not page.errors, page.errors


def test_hostile_names_stay_text_and_wasm_layout_works(page: Any, tmp_path: Path,
                                                       artifacts: Path) -> None:
    s = Session(hostile_graph(), (np.ones((2, 3), np.float32),), ("numpy",))
    bundle = s.bundle()
    bundle["svg"] = {}  # no server-side layout: the bundled Graphviz WASM must draw
    out = save_html(bundle, tmp_path / "evil.html")
    _open(page, out)
    page.wait_for_selector(".rlx-graph[data-graph='hir'] svg g.cluster", timeout=60_000)
    assert "wasm" in page.inner_text(".rlx-graph[data-graph='hir'] .rlx-graph-head")
    page.locator(".rlx-graph[data-graph='hir'] g.node").nth(1).click()
    page.click("button[data-view='failures']")
    page.click("button[data-view='text']")
    assert page.locator("img").count() == 0
    assert page.locator(".rlx-root script").count() == 0
    assert not page.dialogs, page.dialogs
    assert "alert(2)" in page.inner_text(".rlx-pane[data-pane='text']")  # shown, as text
    shot = artifacts / "html-hostile.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)
    assert not page.errors, page.errors


@pytest.mark.slow
def test_minilm_opens_quickly(page: Any, tmp_path: Path, artifacts: Path) -> None:
    fn, ins, _ = load_model_file(HERE / "minilm.py")
    ex = explore(fn, *ins, targets=("numpy",), title="MiniLM-L6")
    out = ex.save_html(tmp_path / "minilm.html")
    start = time.perf_counter()
    _open(page, out)
    page.wait_for_selector(".rlx-graph[data-graph='hir'] svg g.node", timeout=60_000)
    wall = time.perf_counter() - start
    opened = page.get_attribute(".rlx-root", "data-open-ms")
    print(f"\nMiniLM ({len(ex.bundle['levels']['mir']['nodes'])} MIR nodes): viewer opened in "
          f"{opened} ms after load; page load to first graph {wall * 1000:.0f} ms")
    # expanding one block lays out with WASM and stays interactive
    page.locator(".rlx-graph[data-graph='hir'] g.node", has_text="layer0").first.click()
    page.wait_for_selector(".rlx-graph[data-graph='hir'] g.cluster", timeout=60_000)
    shot = artifacts / "html-minilm.png"
    page.screenshot(path=str(shot))
    assert_not_blank(shot)
    assert not page.errors, page.errors


def test_output_html_fallback_in_a_page_with_no_extension(page: Any, tmp_path: Path) -> None:
    """Two saved explorer outputs' text/html, as a renderer without the extension or a widget
    manager puts them in a page: with scripts off, the static summary (root causes and fixes);
    with scripts on, each boots the full viewer from its own bundle."""
    from rlx_explorer.mime import mimebundle

    fn, ins, _ = load_model_file(MODELS / "illegal_f64.py")
    bad = explore(fn, *ins, targets=("webgpu", "numpy"), run=False, title="illegal").bundle
    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    ok = explore(fn, *ins, targets=("numpy",), run=False, title="mlp").bundle
    body = "".join(f"<div class='cell'>{mimebundle(b)['text/html']}</div>" for b in (bad, ok))
    out = tmp_path / "fallback.html"
    out.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}"
                   "</body></html>", encoding="utf-8")
    static = page.context.browser.new_context(java_script_enabled=False).new_page()
    static.goto(out.as_uri())
    text = static.inner_text("body")
    assert "RLX Explorer · illegal" in text and "cast `table` to f32 at line 12" in text
    assert "RLX Explorer · mlp" in text
    static.close()
    page.goto(out.as_uri())
    page.wait_for_function("() => document.querySelectorAll(\".rlx-root[data-ready='1']\")"
                           ".length === 2", timeout=60_000)
    first = page.locator(".cell").nth(0)
    first.locator("button[data-view='failures']").click()
    assert first.locator(".rlx-cause").count() == 3
    assert not page.errors, page.errors


def test_every_device_side_by_side_and_the_roofline(page: Any, tmp_path: Path,
                                                    artifacts: Path) -> None:
    """The devices tab: a column per registered target headed by its verification level, the
    int8 targets' "what would it take", the same kernel in every language with lines that
    select their nodes in the graphs; the profile tab's roofline with the measured kernels."""
    from rlx_core.targets.registry import target_names

    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    out = explore(fn, *ins, targets=("cpu",), calibrate=True).save_html(tmp_path / "dev.html")
    _open(page, out)
    page.click("button[data-view='devices']")
    page.wait_for_selector(".rlx-dev", timeout=10_000)
    cards = page.locator(".rlx-dev")
    assert cards.count() == len(target_names())
    metal = page.locator(".rlx-dev[data-target='metal']")
    assert metal.locator(".rlx-verif").inner_text() == "syntax-checked"
    assert "quantize the model first" in page.inner_text(".rlx-dev[data-target='cortex-m'] .rlx-takes")
    cols = page.locator(".rlx-sbs-col")
    assert cols.count() == len(target_names())
    for t, marker in (("cuda", "__global__"), ("metal", "kernel void"), ("webgpu", "@compute"),
                      ("tpu", "stablehlo."), ("opencl", "__kernel")):
        assert marker in page.inner_text(f".rlx-sbs-col[data-target='{t}'] pre"), t
    line = page.locator(".rlx-sbs-col[data-target='cuda'] pre span.rlx-link").first
    line.click()
    assert "rlx-hl" in (line.get_attribute("class") or "")
    # the same nodes light up in the other languages' columns (and in the graphs)
    assert page.locator(".rlx-sbs-col[data-target='metal'] .rlx-hl").count() > 0
    assert page.locator(".rlx-sbs-col[data-target='webgpu'] .rlx-hl").count() > 0
    page.select_option("select.rlx-sbs-pick", "1")
    page.wait_for_selector(".rlx-sbs-col[data-target='cuda'] pre", timeout=5_000)
    shot = artifacts / "html-devices.png"
    page.screenshot(path=str(shot))
    assert_not_blank(shot)
    page.click("button[data-view='profile']")
    page.wait_for_selector("svg.rlx-roof", timeout=10_000)
    assert page.locator("svg.rlx-roof polyline.roof").count() == 1  # calibrated: a roof
    assert page.locator("svg.rlx-roof rect.pt-meas").count() >= 1  # measured kernels on it
    assert "calibrated" in page.inner_text("table.rlx-rooftable")
    assert not page.errors, page.errors


@pytest.mark.slow
def test_resnet50_class_graph_opens_and_stays_responsive(page: Any, tmp_path: Path) -> None:
    """A full-depth ResNet-50 (ONNX, exported by PyTorch; 1/8 of the channels, so the weights
    stay small: the graph is what is measured) opens and answers clicks. The open time is
    printed, not asserted (tests never assert on wall-clock time; issue 30 asks <= 2 s):
    benchmarks/bench_explorer_open.py measures it and commits the numbers."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from benchmarks.bench_explorer_open import measure, resnet_page

    out, sizes = resnet_page(tmp_path)
    got = measure(page, out)
    print(f"\nResNet-50 ({sizes['hir']} HIR / {sizes['mir']} MIR nodes): viewer opened in "
          f"{got['open_ms']:.0f} ms after load; page load to first graph "
          f"{got['first_graph_ms']:.0f} ms; click to side panel + fit {got['click_fit_ms']:.0f} "
          "ms (committed: benchmarks/results/explorer-open-*.md)")
    assert not page.errors, page.errors
