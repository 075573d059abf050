"""A build's cache key leaves out where the traced code sits: the same function defined a few
lines lower (a notebook cell edited above it, a script with one more import) compiles to the
same shared object, while the kernel sources people read still name each kernel's line."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.c_common.renderer import CLikeRenderer
from rlx_core.targets.cpu.renderer import CpuRenderer
from rlx_core.targets.cpu.target import CpuTarget
from rlx_core.targets.hexagon.renderer import HexagonRenderer

_OK, _WHY = CpuTarget().available()

pytestmark = pytest.mark.usefixtures("fresh_cache_state")

_CELL = "def f(x, w):\n    y = x @ w\n    return rlx.tanh(y) * 2.0 + x\n"


def _defined_at(pad: int):
    """``f`` as a cell ``cell.py`` defines it below ``pad`` blank lines."""
    ns = {"rlx": rlx}
    exec(compile("\n" * pad + _CELL, "cell.py", "exec"), ns)
    return ns["f"]


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    x = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 7) / 7
    return x, np.eye(64, dtype=np.float32) * 0.5


@pytest.mark.skipif(not _OK, reason=f"no C compiler: {_WHY}")
def test_the_same_function_lower_down_finds_the_same_shared_object(tmp_path: Path,
                                                                    monkeypatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    x, w = _inputs()
    first = rlx.compile(_defined_at(0), x, w, target="cpu")
    second = rlx.compile(_defined_at(4), x, w, target="cpu")
    assert first.program.info["cache"] == "miss"
    assert second.program.info["cache"] == "hit"  # no compiler run for the moved cell
    assert first.program.info["so_path"] == second.program.info["so_path"]
    assert len(list(tmp_path.glob("*.so"))) == 1
    np.testing.assert_allclose(second(x, w), np.tanh(x @ w) * 2.0 + x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second(x, w), first(x, w), rtol=0, atol=0)
    # what people read still says where each kernel came from (and the compile trace too)
    shown = [" ".join(exe.sources.values()) for exe in (first, second)]
    assert "from cell.py:2" in shown[0] and "from cell.py:6" in shown[1]
    assert "from cell.py:6" in " ".join(second.trace.kernels.values())
    # and what was compiled does not
    (c_file,) = tmp_path.glob("*.c")
    assert "cell.py" not in c_file.read_text()


@pytest.mark.skipif(not _OK, reason=f"no C compiler: {_WHY}")
def test_a_jitted_function_lower_down_loads_the_same_module(tmp_path: Path, monkeypatch) -> None:
    """@rlx.jit names its C program by the LIR's text: printed without locations, the moved
    function is the same program, and one extension module is built."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    x, w = _inputs()
    jitted = [rlx.jit(_defined_at(pad), target="cpu") for pad in (0, 4)]
    outs = [g(x, w) for g in jitted]
    np.testing.assert_allclose(outs[1], outs[0], rtol=0, atol=0)
    np.testing.assert_allclose(outs[1], np.tanh(x @ w) * 2.0 + x, rtol=1e-5, atol=1e-5)
    assert jitted[0].cache.module_path == jitted[1].cache.module_path
    assert len([p for p in tmp_path.glob("*.so") if "cpython" in p.name]) == 1


def _lir(pad: int):
    x, w = _inputs()
    return rlx.compile(_defined_at(pad), x, w, target="numpy", record=False).lir


@pytest.mark.parametrize("make", [lambda: CLikeRenderer(), lambda: CpuRenderer(None),
                                  lambda: HexagonRenderer()],
                         ids=["c_common", "cpu", "hexagon"])
def test_the_translation_unit_carries_no_locations(make) -> None:
    """Every C renderer: the compiled text is the same at two offsets, and each kernel's shown
    source is its lines of that text, the head with its ``from cell.py:N`` added."""
    a, b = make().render_program(_lir(0)), make().render_program(_lir(4))
    assert a.source == b.source
    assert "cell.py" not in a.source
    located = 0
    for prog, first_line in ((a, 2), (b, 6)):
        lines = prog.source.split("\n")
        for name, text in prog.kernel_sources.items():
            lo, hi = prog.kernel_lines[name]
            compiled = "\n".join(lines[lo - 1:hi]) + "\n"
            head, _, rest = text.partition("\n")
            assert rest == compiled.partition("\n")[2]  # one line each: error lines still match
            m = re.search(r" from cell\.py:(\d+)(?=: )", head)
            if m is not None:  # the matmul's line or the next one's
                located += 1
                assert int(m.group(1)) in (first_line, first_line + 1)
                head = head[:m.start()] + head[m.end():]
            assert head == compiled.partition("\n")[0]
    assert located >= 2  # each program names its kernels' lines


def test_the_hexagon_source_people_read_names_each_kernels_line() -> None:
    """``rlx compile --emit source --target hexagon`` and the explorer's device columns show
    the whole program (render_sources): its kernel heads name the traced line as they did
    before the compiled text left it out, and every other line is the compiled one."""
    from rlx_core.targets.hexagon.target import HexagonTarget

    lir = _lir(4)
    shown = HexagonTarget().render_sources(lir)["program"]
    compiled = HexagonRenderer().render_program(lir, "rlx_" + lir.name).source
    assert "from cell.py:6" in shown and "cell.py" not in compiled
    got, want = shown.split("\n"), compiled.split("\n")
    assert len(got) == len(want)
    differ = [(g, w) for g, w in zip(got, want, strict=True) if g != w]
    assert differ and all(g.startswith("/* kernel ") for g, _ in differ)
    assert all(re.sub(r" from cell\.py:\d+(?=: )", "", g) == w for g, w in differ)
