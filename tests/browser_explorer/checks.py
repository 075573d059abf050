"""What every host must show, checked the same way in the HTML export, Panel and JupyterLab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import assert_not_blank

ROOT = ".rlx-root[data-ready='1']"


def wait_ready(frame: Any, timeout: float = 60_000) -> None:
    frame.wait_for_selector(ROOT, timeout=timeout)


def check_graphs_and_linking(frame: Any, page: Any, shots: Path, tag: str) -> None:
    """Every level drew a graph; clicking a HIR linear box highlights MIR and LIR boxes."""
    for level in ("hir", "mir", "lir"):
        frame.wait_for_selector(f".rlx-graph[data-graph='{level}'] .rlx-graph-canvas svg g.node",
                                timeout=60_000)
    hir = frame.locator(".rlx-graph[data-graph='hir'] g.node", has_text="linear").first
    hir.click()
    for level in ("hir", "mir", "lir"):
        frame.wait_for_selector(f".rlx-graph[data-graph='{level}'] g.rlx-hl", timeout=10_000)
    assert frame.locator(".rlx-side .rlx-srcsel").count() >= 1  # the user's source line
    shot = shots / f"{tag}-graphs-linked.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)


def check_dispatch(frame: Any, page: Any, shots: Path, tag: str) -> None:
    frame.click("button[data-view='dispatch']")
    frame.wait_for_selector("table.rlx-matrix td.rlx-cell", timeout=10_000)
    routes = set(frame.eval_on_selector_all("table.rlx-matrix td.rlx-cell",
                                            "els => els.map(e => e.dataset.route)"))
    assert "common-IR" in routes or "native" in routes
    frame.locator("table.rlx-matrix td.rlx-cell").first.click()
    frame.wait_for_selector(".rlx-celldetail .rlx-record", timeout=5_000)
    shot = shots / f"{tag}-dispatch.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)


def check_failures(frame: Any, page: Any, shots: Path, tag: str) -> None:
    frame.click("button[data-view='failures']")
    frame.wait_for_selector(".rlx-failure[data-target='webgpu'] .rlx-card", timeout=10_000)
    text = frame.inner_text(".rlx-failure[data-target='webgpu']")
    assert "RLX-L002" in text and "np.tanh(a).T @ a" in text
    # grouped by root cause: the f64 input `a`, the closed-over f64 `table`, the i64 `ids`;
    # one fix each at its source line, the poisoned nodes listed under it
    causes = frame.locator(".rlx-failure[data-target='webgpu'] .rlx-cause")
    assert causes.count() == 3, causes.count()
    assert "cast `table` to f32 at line 12" in text and "fixes 1 node" in text
    table = frame.locator(".rlx-failure[data-target='webgpu'] .rlx-cause[data-cause='table']")
    assert table.locator(".rlx-card").count() == 1
    link = table.locator("a.rlx-code-badge").first.get_attribute("href") or ""
    assert link.endswith("errors.md#rlx-l002--dtype-not-supported-by-the-target"), link
    frame.wait_for_selector(".rlx-failure g.rlx-bad", timeout=60_000)
    shot = shots / f"{tag}-failures.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)
