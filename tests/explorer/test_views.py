"""View-model JSON tests: every view, checked against the compile it came from (and numpy)."""

from __future__ import annotations

import json

import numpy as np

import rlx_core as rlx
from rlx_core.cli import load_model_file
from rlx_explorer.profiling import profile_executable
from rlx_explorer.views.dot import quote, to_dot
from rlx_explorer.views.graphs import graph_view

from .conftest import MODELS


def test_bundle_is_json_with_every_view(mlp_bundle: dict) -> None:
    text = json.dumps(mlp_bundle)
    again = json.loads(text)
    for key in ("levels", "texts", "passes", "dispatch", "failures", "kernels", "memory",
                "profile", "cache", "links", "source", "svg"):
        assert key in again, key
    assert again["schema"] == 1 and again["primary"] == "numpy"


def test_graph_views_match_the_ir(mlp_bundle: dict) -> None:
    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    exe = rlx.compile(fn, *ins)
    for level, g in (("hir", exe.hir), ("mir", exe.mir), ("lir", exe.lir)):
        view = mlp_bundle["levels"][level]
        ops = [n for n in view["nodes"] if n["kind"] == "node"]
        assert [n["name"] for n in ops] == [n.name for n in g.nodes]
        assert len(view["edges"]) == sum(len(n.inputs) for n in g.nodes)
        ids = [n["id"] for n in view["nodes"]]
        assert len(set(ids)) == len(ids)
    hir = mlp_bundle["levels"]["hir"]
    assert [c["scope"] for c in hir["clusters"]] == ["fc1", "fc2"]
    lir = mlp_bundle["levels"]["lir"]
    assert len(lir["kernels"]) == len(exe.lir.kernels)
    assert sum(len(k["nodes"]) for k in lir["kernels"]) == len(exe.lir.nodes)


def test_ir_text_lines_link_to_nodes(mlp_bundle: dict) -> None:
    for level, tv in mlp_bundle["texts"].items():
        ids = {n["id"] for n in mlp_bundle["levels"][level]["nodes"]}
        linked = [ln["node"] for ln in tv["lines"] if ln["node"]]
        assert linked and set(linked) <= ids | {k["id"] for k in
                                                 mlp_bundle["levels"][level]["kernels"]}
        text = "".join("".join(t for _, t in ln["tokens"]) + "\n" for ln in tv["lines"])
        assert text.startswith(f"{level} @model")


def test_pass_stepper_marks_graph_changes(mlp_bundle: dict) -> None:
    steps = mlp_bundle["passes"]["steps"]
    names = [s["name"] for s in steps]
    assert "legalize" in names and "fuse" in names
    leg = steps[names.index("legalize")]
    assert leg["changed"] and leg["graph"] is not None
    statuses = {n["status"] for n in leg["graph"]["nodes"]}
    assert "added" in statuses  # the decompositions' new primitives
    fuse = steps[names.index("fuse")]
    assert fuse["rules"] and all(r["file"].endswith(".py") and r["line"] > 0
                                 for r in fuse["rules"])
    assert any(r["touched"] for r in fuse["rules"])


def test_dispatch_matrix_rows_and_policies(mlp_bundle: dict) -> None:
    d = mlp_bundle["dispatch"]
    assert d["current"] == "prefer-native"
    m = d["matrices"]["prefer-native"]
    names = [t["name"] for t in m["targets"]]
    assert "numpy" in names
    hir_ops = [n["name"] for n in mlp_bundle["levels"]["hir"]["nodes"] if n["kind"] == "node"]
    assert [r["node"] for r in m["rows"]] == hir_ops
    linear = next(r for r in m["rows"] if r["op"] == "linear")
    cell = linear["cells"]["numpy"]
    assert cell["route"] == "common-IR" and cell["record"]["rejected"]
    assert cell["nested"] and all(x["parent"] == linear["node"] for x in cell["nested"])
    # force-native leaves composites without a route on the reference: they moved
    moved = d["moved"]["force-native"]
    assert any(mv["kind"] == "linear" and mv["after"]["unsupported"] for mv in moved)


def test_failure_view_for_f64_on_webgpu(illegal_bundle: dict) -> None:
    fails = illegal_bundle["failures"]
    assert [f["target"] for f in fails] == ["webgpu"]
    f = fails[0]
    assert f["count"] >= 2 and "RLX-L002" in f["codes"]
    hir_ids = {n["id"] for n in illegal_bundle["levels"]["hir"]["nodes"]}
    for item in f["failures"]:
        assert item["hint"] and item["code"].startswith("RLX-L")
        assert item["file"].endswith("illegal_f64.py") and item["line"] > 0
        assert item["source_line"].strip()  # the user's line, read from the model file
        assert item["hir_id"] in hir_ids
    tanh = next(i for i in f["failures"] if i["op"] == "tanh")
    assert "np.tanh(a).T @ a" in tanh["source_line"]
    # numpy compiled, so the executable views exist for it
    assert illegal_bundle["primary"] == "numpy"


def test_kernel_view_links_lines_to_lir_nodes(mlp_bundle: dict) -> None:
    kv = mlp_bundle["kernels"]["numpy"]
    lir = mlp_bundle["levels"]["lir"]
    assert [k["name"] for k in kv["kernels"]] == [k["name"] for k in lir["kernels"]]
    for k, lk in zip(kv["kernels"], lir["kernels"], strict=False):
        assert k["nodes"] == lk["nodes"]
        assert all(ln["nodes"] for ln in k["lines"])  # interpreted: one node per line


def test_memory_view_matches_plan(mlp_bundle: dict) -> None:
    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    plan = rlx.compile(fn, *ins).lir.plan
    mem = mlp_bundle["memory"]
    assert mem["peak_bytes"] == plan.peak_bytes and mem["naive_bytes"] == plan.naive_bytes
    assert len(mem["slots"]) == len(plan.slots)
    assert max(mem["live_bytes"]) <= mem["naive_bytes"]
    for s in mem["slots"]:
        assert s["offset"] + s["size"] <= plan.peak_bytes and s["id"]


def test_profile_runs_every_kernel_and_matches_numpy() -> None:
    fn, ins, _ = load_model_file(MODELS / "mlp.py")
    exe = rlx.compile(fn, *ins)
    prof = profile_executable(exe, ins, repeats=2)
    assert [k["name"] for k in prof["kernels"]] == [k.name for k in exe.lir.kernels]
    assert all(k["seconds"] >= 0 for k in prof["kernels"])
    from rlx_explorer.profiling import _numpy_kernel_times

    _, outs = _numpy_kernel_times(exe, ins)
    np.testing.assert_allclose(outs[0], exe(*ins), rtol=1e-6)


def test_cache_view_records_hits_misses_and_guard(jit_bundle: dict) -> None:
    c = jit_bundle["cache"]
    assert c["present"] and c["hits"] == 1 and c["misses"] == 2
    assert [e["hit"] for e in c["events"]] == [False, True, False]
    assert "shape" in c["events"][2]["failed_guard"]
    assert c["specializations"][0]["guards"] == ["arg 0: f32[2,4]"]


def test_links_join_every_level(mlp_bundle: dict) -> None:
    links = mlp_bundle["links"]
    hir_linear = next(n for n in mlp_bundle["levels"]["hir"]["nodes"] if n["op"] == "linear")
    entry = links["origins"][hir_linear["name"]]
    assert entry["hir"] == [hir_linear["id"]]
    assert len(entry["mir"]) >= 2 and entry["lir"]  # dot_general + bias add
    assert entry["file"].endswith("mlp.py") and entry["line"] > 0
    assert entry["kernels"] and entry["kernels"][0]["target"] == "numpy"
    for _kid, origins in links["kernel_origins"].items():
        assert origins and all(o in links["origins"] for o in origins)


def test_dot_quoting_and_collapse(mlp_bundle: dict) -> None:
    assert quote('a"b\\N\n') == '"a\\"b\\\\N\\n"'
    hir = mlp_bundle["levels"]["hir"]
    open_dot = to_dot(hir)
    closed = to_dot(hir, collapsed=[c["id"] for c in hir["clusters"]])
    assert "subgraph cluster_c0" in open_dot and "subgraph" not in closed
    assert "box3d" in closed


def test_graph_view_of_parsed_text_roundtrips() -> None:
    from rlx_core.ir.parser import parse
    from rlx_core.ir.printer import print_graph

    fn, ins, _ = load_model_file(MODELS / "bert_layer.py")
    exe = rlx.compile(fn, *ins)
    a = graph_view(exe.lir)
    b = graph_view(parse(print_graph(exe.lir)))
    assert set(_host_kinds(a).values()) == {"numpy"} and not _host_kinds(b)
    assert a == b


def _host_kinds(view: dict) -> dict[str, str]:
    """Pop each weight's kind of host array from a graph view. Text carries no weight data, so
    only a compiled graph's view has them (the fix hints' spelling): that field alone may
    differ between a graph and its text."""
    return {n["name"]: n.pop("host") for n in view["nodes"] if "host" in n}


def test_fast_text_reader_agrees_with_the_parser() -> None:
    from rlx_core.ir.printer import print_graph
    from rlx_explorer.views.textgraph import text_graph_view

    for model in ("bert_layer", "illegal_f64"):
        fn, ins, _ = load_model_file(MODELS / f"{model}.py")
        exe = rlx.compile(fn, *ins)
        for g in (exe.hir, exe.mir, exe.lir):
            want = graph_view(g)
            _host_kinds(want)
            assert text_graph_view(print_graph(g)) == want
    assert text_graph_view("not ir") is None


def test_ir_text_keeps_locations_apart_and_names_notebook_cells() -> None:
    from rlx_explorer.views.ir_text import ir_text_view

    text = ('mir @f(%x : f32[2]) {\n'
            '  %0 : f32[2] = exp(%x) {} loc("/tmp/ipykernel_4242/3141592653.py":7 scope="fc1")\n'
            '  %1 : f32[2] = neg(%0) {} loc("model.py":3)\n}')
    lines = ir_text_view(text, None)["lines"]
    assert [ln["loc"] for ln in lines] == ["", 'loc("cell":7 scope="fc1")', 'loc("model.py":3)', ""]
    assert "loc" not in "".join(t for _, t in lines[1]["tokens"])  # the viewer can hide it


def test_cell_label_uses_the_kernels_execution_count(monkeypatch) -> None:
    import IPython

    from rlx_explorer.views import ir_text

    path = "/tmp/ipykernel_1/27.py"

    class Shell:
        class compile:  # noqa: N801 - IPython's attribute name
            _filename_map = {path: 12}

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    assert ir_text.cell_label(path) == "cell [12]"
    from rlx_explorer.views.sources import SourceIndex

    src = SourceIndex({path: "x = 1\n"})
    src.line(path, 1)
    assert src.to_json()["files"][0]["label"] == "cell [12]"  # the source pane's heading
    assert ir_text.cell_label("model.py") == "model.py"


def test_collapsed_blocks_passing_values_both_ways_draw_one_edge_not_a_cycle() -> None:
    import rlx_core as rlx
    from rlx_explorer.views.dot import BOTH_WAYS
    from rlx_explorer.views.graphs import graph_view

    def f(x):
        with rlx.block("attn"):
            y = rlx.exp(x)
        with rlx.block("ffn"):
            z = y * 2
        with rlx.block("attn"):  # back into attn: the residual pattern
            return z + y

    view = graph_view(rlx.trace(f, rlx.spec((4,))))
    dot = to_dot(view, collapsed=[c["id"] for c in view["clusters"]])
    edges = [ln for ln in dot.splitlines() if "->" in ln]
    between = [e for e in edges if "c0" in e and "c1" in e]
    assert len(between) == 1 and BOTH_WAYS in between[0], edges
