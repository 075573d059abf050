"""Embedded views (rlx_explorer/views/embedded.py): cortex-m flash / RAM per buffer from the
ELF and the arena plan, instructions per inference from a QEMU run; fpga cycles from a
Verilator run, the synthesis report's resources with images/s, and the datapath diagram."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.quant import ptq
from rlx_core.targets.registry import get_target
from rlx_explorer.views.embedded import datapath_dot, embedded_html, embedded_view, fpga_view


def _mlp(argmax: bool):
    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(12, 20)).astype(np.float32) * 0.3
    w2 = rng.normal(size=(5, 12)).astype(np.float32) * 0.3

    def model(x):
        y = rlx.nn.linear(rlx.nn.relu(rlx.nn.linear(x, w1)), w2)
        return rlx.argmax(y, axis=-1) if argmax else y

    x = rng.random((1, 20)).astype(np.float32)
    calib = [(rng.random((1, 20)).astype(np.float32),) for _ in range(8)]
    return ptq.quantize_static(rlx.trace(model, x), data=calib).graph, x


def _needs(target: str) -> None:
    ok, why = get_target(target).available()
    if not ok:
        pytest.skip(f"{target} cannot run here: {why}")


def test_cortex_m_memory_and_instructions():
    _needs("cortex-m")
    g, x = _mlp(argmax=True)
    exe = rlx.compile(g, target="cortex-m", record=False)
    v = embedded_view(exe, args=[x])
    flash, ram = v["regions"]["flash"], v["regions"]["ram"]
    mem = exe.program.info["memory"]
    # the kinds add up to the ELF's totals; the weights are the const arrays the emitter wrote
    assert sum(flash["by_kind"].values()) == flash["used"] == mem["flash_bytes"]
    assert sum(ram["by_kind"].values()) == ram["used"] == mem["ram_bytes"]
    names = {b["name"]: b for b in flash["buffers"]}
    assert names["v_w1_q"]["size"] == 12 * 20 and names["v_w1_q"]["kind"] == "weights"
    assert names["rlx_model"]["kind"] == "code"
    arena = next(b for b in ram["buffers"] if b["name"] == "rlx_arena")
    assert arena["size"] >= v["arena"]["bytes"] and ram["by_kind"]["stack"] == mem["stack_bytes"]
    assert v["arena"]["slots"] and v["arena"]["bytes"] <= v["arena"]["naive_bytes"]
    assert v["instructions"]["count"] == 1 and v["instructions"]["median"] > 0
    html = embedded_html(v)
    assert "v_w1_q" in html and "instructions / inference" in html and "<svg" in html


def test_fpga_cycles_resources_and_diagram():
    """The design of test_fpga's logits test (5 lanes, pipelined): its build is cached."""
    from tests.targets.test_fpga import _mlp_graph, _sim

    _needs("fpga")
    g, rng = _mlp_graph(argmax=False)
    prog, sim = _sim(g, 5, pipeline=True)
    x = rng.random((1, 20)).astype(np.float32)
    v = fpga_view(prog.info, sim.run_calls([[x]]).instructions)
    assert v["cycles"]["source"] == "verilator" and v["cycles"]["per_inference"] > 0
    assert [ly["k"] for ly in v["layers"]] == [20, 12] and v["resources"] == {}
    # a synthesis report (its JSON) gives images/s = fmax / cycles per inference
    rep = {"device": "iCE40 HX8K (ct256)", "luts": 900, "ffs": 400, "brams": 2, "dsps": 0,
           "fmax_mhz": 12.5}
    r = fpga_view(prog.info, [1000], rep)["resources"]
    assert r["images_per_s"] == 12500.0
    dot = datapath_dot(prog.info)
    for part in ("mac0", "mac1", "rq0", "rom1", "buf1", "in ->", "-> out"):
        assert part in dot
    assert "argmax" not in dot
    if v["svg"]:
        assert v["svg"].count("<g id=\"node") >= 8  # in, 2 buffers, 2 ROMs, 2 MACs, rq, out
    assert "cycles / inference" in embedded_html(v)


def test_datapath_dot_with_argmax_and_other_targets():
    info = {"layers": [{"k": 4, "n": 3, "lanes": 2, "requantize": True, "cycles": 20}],
            "argmax": True, "parallelism": [2], "weight_bytes": 12, "cycles_estimate": 26}
    dot = datapath_dot(info)
    assert "rq0 -> argmax" in dot and "argmax -> out" in dot and "buf1" not in dot
    v = fpga_view(info)
    assert v["cycles"] == {"per_inference": 26, "source": "formula", "count": 0}
    assert "no synthesis report" in embedded_html(v)
    exe = rlx.compile(lambda a: a + 1.0, np.ones(3, np.float32), target="numpy", record=False)
    assert embedded_view(exe) == {}


def test_bundle_carries_the_embedded_view():
    """The hook in session.build_bundle: the primary target's view, measured by the run."""
    from rlx_explorer import explore

    _needs("cortex-m")
    g, x = _mlp(argmax=True)
    ex = explore(g, x, targets="cortex-m")
    emb = ex.bundle["embedded"]
    assert emb["target"] == "cortex-m" and emb["instructions"]["count"] == 1
    # without a run (explore(..., run=False)) the view has the memory but no count
    assert embedded_view(ex.session.primary)["instructions"] == {"count": 0}
