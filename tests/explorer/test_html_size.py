"""The offline HTML export stays small: the bundle and the Graphviz build are gzipped and
base64-encoded (the tour page was 5.0 MB with them as escaped JSON; issue 30 asks <= 1.5 MB)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

from rlx_core.cli import TOUR_MODEL, load_model_file
from rlx_explorer import explore
from rlx_explorer.assets import viz_source


def test_tour_export_is_under_one_and_a_half_megabytes(tmp_path: Path) -> None:
    fn, inputs, _ = load_model_file(TOUR_MODEL)
    ex = explore(fn, *inputs, targets=("numpy", "webgpu"), title="tour", run=False)
    page = ex.save_html(tmp_path / "tour.html").read_text()
    assert len(page.encode()) <= 1_500_000, len(page.encode())
    # what the page carries is exactly the bundle and the vendored Graphviz build
    blobs = dict(re.findall(r'id="(rlx-data|rlx-viz)">"([A-Za-z0-9+/=]+)"<', page))
    unpack = lambda k: gzip.decompress(base64.b64decode(blobs[k])).decode()
    assert json.loads(unpack("rlx-data")) == json.loads(json.dumps(ex.bundle))
    assert unpack("rlx-viz") == viz_source()
