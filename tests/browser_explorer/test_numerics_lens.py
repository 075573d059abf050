"""The numerics lens in the offline HTML export, in headless Chromium: the tab lists every
node's error, a row shows its error on every target, a click elsewhere shows it in the side
panel too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlx_explorer import explore

from .checks import wait_ready
from .conftest import assert_not_blank

W = (np.random.default_rng(1).standard_normal((16, 8)) * 0.5).astype(np.float32)


def _f16_matmul(x):
    return (x.astype("f16") @ W.astype(np.float16)).astype("f32")


def test_numerics_lens_in_the_html_export(page: Any, tmp_path: Path, artifacts: Path) -> None:
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
    out = explore(_f16_matmul, x, targets=("numpy", "cpu"), numerics=True,
                  run=False).save_html(tmp_path / "numerics.html")
    page.goto(out.as_uri())
    wait_ready(page)
    page.click("button[data-view='numerics']")
    pane = ".rlx-pane[data-pane='numerics']"
    page.wait_for_selector(f"{pane} table.rlx-num-table", timeout=10_000)
    assert page.locator(f"{pane} tr.rlx-num-entry").count() == 1  # the f32 -> f16 cast
    page.locator(f"{pane} tr.rlx-num-entry").click()
    detail = page.locator(f"{pane} .rlx-num-detail")
    assert "precision lost here: cast f32 -> f16" in detail.inner_text()
    assert {detail.locator("tr[data-target]").nth(i).get_attribute("data-target")
            for i in range(2)} == {"numpy", "cpu"}
    # the selection reaches the side panel: the same node's errors on every target
    assert page.locator(".rlx-side .rlx-num-detail tr[data-target]").count() == 2
    shot = artifacts / "numerics-html.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)
    assert not page.errors, page.errors
