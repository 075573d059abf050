"""Every code documented in docs/errors.md is produced by real code paths here, and every code
the source tree defines is documented, once."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlx_core.errors import RlxError
from tests.dispatch.graphs import GraphMaker

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "errors.md"
# where codes are defined or mentioned: the packages, and the JupyterLab extension's sources
SOURCES = (ROOT / "rlx_core", ROOT / "rlx_explorer", ROOT / "extension" / "src")
CODE = re.compile(r"RLX-[A-Z]\d{3}")


def documented_codes() -> list[str]:
    return re.findall(r"^## (RLX-[A-Z]\d{3}) ", DOC.read_text(), flags=re.M)


def _legalization(graph, target, **opts):
    from rlx_core.dispatch.legalize import legalize_graph
    from rlx_core.passes.base import CompileOptions

    return legalize_graph(graph, target, CompileOptions(**opts), raise_errors=False)


def _codes_of_failures(graph, target, **opts) -> list[str]:
    return [f.decision.code for f in _legalization(graph, target, **opts).failures]


def _one(op, specs, **attrs):
    m = GraphMaker()
    ins = [m.input(f"a{i}", d, s) for i, (d, s) in enumerate(specs)]
    return m.graph(m.op(op, ins, **attrs))


# ---- legalization (dispatch) ----------------------------------------------------------------

def p_l000():
    from rlx_core.dispatch.legalize import legalize_graph

    legalize_graph(_one("tanh", [("f64", (3,))]), "webgpu")  # f64 tanh: not emulated there


def p_l001():
    from rlx_core.ir.ops import MIR_OPS
    from tests.dispatch.graphs import make_caps

    caps = make_caps("mydev", mir=tuple(op for op in MIR_OPS if op != "scatter_add"))
    return _codes_of_failures(_one("scatter_add", [("f32", (4,)), ("i32", (2,)), ("f32", (2,))],
                                   axis=0), caps)


def p_l002():
    return _codes_of_failures(_one("tanh", [("f64", (3,))]), "webgpu")


def p_l003():
    return _codes_of_failures(_one("exp", [("f16", (3,))]), "webgpu")


def p_l004():
    return _codes_of_failures(_one("gather", [("f32", (4, 2)), ("i64", (3,))], axis=0), "webgpu")


def p_l005():
    return _codes_of_failures(_one("neg", [("f32", (33 * 1024 * 1024,))]), "webgpu")


def p_l006():
    from rlx_core.dispatch.capabilities import Constraint, OpClaim
    from tests.dispatch.graphs import make_caps

    caps = make_caps(extra=(OpClaim(("neg",), ("f32",), (Constraint("max_elements", limit=2),)),))
    return _codes_of_failures(_one("neg", [("f32", (3,))]), caps)


def p_l007():
    # silu: the CPU claims no native form (it keeps softmax whole, so that one no longer fails)
    return _codes_of_failures(_one("silu", [("f32", (2, 3))]), "cpu",
                              policy={"silu": "force-native"})


def p_l008():
    from rlx_core.dispatch.capabilities import Constraint, OpClaim
    from tests.dispatch.graphs import make_caps

    caps = make_caps(extra=(OpClaim(("gelu",), ("f32",),
                                    (Constraint("static_attr", "approximate", ("tanh",)),)),))
    return _codes_of_failures(_one("gelu", [("f32", (3,))]), caps, policy="force-native")


def p_l009():
    from rlx_core.dispatch.policy import set_policy

    set_policy("fastest")


def p_l010(monkeypatch):
    from rlx_core.dispatch import decompositions
    from rlx_core.dispatch.legalize import legalize_graph

    def broken(node, ins, b):
        return b.emit("reduce_sum", [ins[0]], {"axes": (1,)})

    monkeypatch.setitem(decompositions.DECOMPOSITIONS, "silu", broken)
    legalize_graph(_one("silu", [("f32", (2, 5))]), "cpu")


# ---- IR text, verifier, ops, passes ---------------------------------------------------------

def p_p001():
    from rlx_core.ir.parser import parse

    parse("garbage")


def p_v001():
    from rlx_core.ir.graph import Level
    from rlx_core.ir.verifier import verify

    verify(_one("softmax", [("f32", (2, 3))]).with_nodes(
        _one("softmax", [("f32", (2, 3))]).nodes, level=Level.MIR))


def p_v002():
    from rlx_core.ir.ops import opdef

    opdef("sofmax")


def p_v003():
    from rlx_core.ir.parser import parse
    from rlx_core.ir.verifier import verify

    verify(parse('hir @g {\n  %0 : f32[] = constant() {dtype=f32, shape=(), value="x"}\n'
                 '  return %0\n}\n'))


def p_w001():
    from rlx_core.passes.base import PassContext
    from rlx_core.passes.rewrite_engine import rewrite

    def widen(node, view):  # an f64 value for an f32 node: breaks the engine's contract
        return [view.emit("cast", list(node.inputs), {"dtype": "f64"})]

    m = GraphMaker()
    rewrite(m.graph(m.op("neg", [m.input("x", "f32", (3,))])), (("neg", widen),), PassContext())


def p_w002():
    import rlx_core as rlx
    from rlx_core.passes.cse import CSE

    _, _, lir, ctx = rlx.lower(lambda x: x * 2.0, np.ones(3, np.float32), target="numpy",
                               record=False)
    CSE().run(lir, ctx)


# ---- tracing user programs ------------------------------------------------------------------

def p_t000():
    import rlx_core as rlx

    rlx.trace(lambda x: 3, np.ones(3, np.float32))


def p_t001():
    _one("add", [("f32", (2, 3)), ("f32", (3, 2))])


def p_t002():
    from rlx_core.ir import dtypes as dt

    dt.get("f99")


def p_t003():
    _one("softmax", [("f32", (2, 3))], axis=5)


def p_t010():
    import rlx_core as rlx

    rlx.trace(lambda x: np.einsum("i->", x), np.ones(3, np.float32))


def p_t011():
    import rlx_core as rlx

    rlx.trace(lambda x: np.asarray(x), np.ones(3, np.float32))


# ---- autodiff and training ------------------------------------------------------------------

def p_a001():
    import rlx_core as rlx

    rlx.grad(lambda x: x * 2.0)(np.ones(3, np.float32))  # not a scalar loss


def p_a002(monkeypatch):
    import rlx_core as rlx
    from rlx_core.autodiff import rules

    # an op added to MIR without a VJP rule: the registry is complete today, so take one out
    monkeypatch.delitem(rules.VJP_RULES, "tanh")
    rlx.grad(lambda x: rlx.tanh(x).sum())(np.ones(3, np.float32))


def p_a101():
    from rlx_core.optim import SGD

    SGD(lr=-0.1)


# ---- frontends: model files, data, weights, models, importers -------------------------------

def p_c001(tmp_path):
    from rlx_core.cli import load_model_file

    f = tmp_path / "model.py"
    f.write_text("x = 1\n")  # neither model() nor example_inputs()
    load_model_file(f)


def p_c002(tmp_path):
    from rlx_core.cli import load_model_file

    f = tmp_path / "model.py"
    f.write_text("def model(x):\n    return x +\n")
    load_model_file(f)


def p_c003(tmp_path):
    from rlx_core.cli import main

    f = tmp_path / "model.py"
    f.write_text("def model(x):\n    return x\ndef example_inputs():\n    return (1.0,)\n")
    try:
        main(["explore", str(f), "--html", str(tmp_path / "missing" / "x.html")])
    except SystemExit:
        pass
    from rlx_core.cli import _check_output

    _check_output(tmp_path / "missing" / "x.html")


def p_d001(tmp_path):
    from rlx_core.data.mnist import read_idx

    f = tmp_path / "train-images-idx3-ubyte"
    header = b"".join(n.to_bytes(4, "big") for n in (2051, 1, 28, 28))  # one 28x28 image
    f.write_bytes(header + bytes(100))  # ... of which only 100 bytes arrived
    read_idx(f)


def p_f001(tmp_path):
    from rlx_core.frontend.weights import read_safetensors

    f = tmp_path / "model.safetensors"
    f.write_bytes((64).to_bytes(8, "little") + b'{"w": ')  # header longer than the file
    read_safetensors(f)


def p_f002():
    from rlx_core.frontend.weights import check_weights

    check_weights({"w": np.zeros((3, 2), np.float32)}, {"w": ((2, 3), "f32"), "b": ((3,), None)})


def p_m001(tmp_path):
    from rlx_core.models.minilm import find_model_dir

    find_model_dir(tmp_path)  # an empty folder: no config.json, no model.safetensors


def _gpt2_config(**kw):
    transformers = pytest.importorskip("transformers")
    return transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16,
                                   n_positions=8, **kw)


def p_j006():
    from rlx_core.models.gpt2 import DecoderConfig

    DecoderConfig.from_hf(_gpt2_config(), n_ctx=64)  # longer than the position table


def p_j007():
    from rlx_core.models.gpt2 import DecoderConfig, GPT2Decoder

    cfg = DecoderConfig(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_ctx=4)
    GPT2Decoder(cfg, {}, target="numpy").generate([1, 2], 3)  # 5 positions > 4


def p_j008():
    from rlx_core.models.gpt2 import DecoderConfig, GPT2Decoder

    cfg = DecoderConfig(n_layer=2, n_embd=8, n_head=2, vocab_size=16, n_ctx=4)
    dec = GPT2Decoder(cfg, {}, target="numpy")
    one = np.zeros(1, np.int32)
    dec.step(one, one, *dec.empty_cache()[:3])  # 3 caches for 2 layers (4 wanted)


def p_i101():
    torch = pytest.importorskip("torch")
    from rlx_core.frontend.torch_export import from_torch

    class Sorts(torch.nn.Module):
        def forward(self, x):
            return torch.sort(x).values  # aten.sort has no rlx mapping

    from_torch(Sorts(), torch.ones(4))


def p_i102():
    from rlx_core.frontend.torch_export import rlx_dtype

    rlx_dtype("torch.complex128")  # str(torch.complex128), without importing torch


def _onnx_model(op_type: str, domain: str = ""):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"], domain=domain)], "g",
                              [x], [y])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=onnx.IR_VERSION)


def p_o001():
    pytest.importorskip("onnx")
    from rlx_core.frontend.onnx_import import import_model

    import_model(b"\x08\x07this is not protobuf")


def p_o002():
    from rlx_core.frontend.onnx_import import import_model

    import_model(_onnx_model("Relu", domain="com.example.custom"))


def p_o003():
    from rlx_core.frontend.onnx_import import import_model

    import_model(_onnx_model("Frobnicate"))


def p_o020():
    from rlx_core.frontend.onnx_import import import_model

    m = _onnx_model("Relu")
    m.graph.node.append(m.graph.node[0])  # a second node writing "y"
    import_model(m.SerializeToString())


def p_o021():
    from rlx_core.frontend.onnx_import import import_model

    m = _onnx_model("Relu")
    w = m.graph.initializer.add()
    w.name, w.data_type, w.data_location = "w", 1, 1  # FLOAT, EXTERNAL
    w.dims.append(2)
    w.external_data.add(key="location", value="w.bin")
    import_model(m.SerializeToString())


def p_o022(monkeypatch):
    from dataclasses import replace

    from rlx_core.frontend.onnx_import import import_model
    from rlx_core.frontend.onnx_import.ops.table import CONVERTERS

    def boom(n):
        return 1 / 0

    monkeypatch.setitem(CONVERTERS, "Relu", replace(CONVERTERS["Relu"], fn=boom))
    import_model(_onnx_model("Relu"))


# ---- runtime --------------------------------------------------------------------------------

def p_t004():
    import rlx_core as rlx

    rlx.spec((2.5, 3))


def p_r030():
    import rlx_core as rlx

    a = np.ones((100, 1), np.float32)
    rlx.compile(lambda a, b: a @ b, a, a.T, target="numpy", memory_limit=1000)(a, a.T)


def p_r031(monkeypatch):
    import rlx_core as rlx

    monkeypatch.setenv("RLX_MEMORY_LIMIT", "lots")
    rlx.compile(lambda x: x * 2.0, np.ones(3, np.float32), target="numpy")(np.ones(3, np.float32))



# ---- distributed (MPI) ----------------------------------------------------------------------

def p_n001():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    from rlx_core.distributed import Communicator
    from rlx_core.distributed.deadline import wait_all

    comm = Communicator(timeout=5)  # a singleton world of one rank
    request = comm.comm.Irecv(np.empty(1), source=0, tag=78)  # nobody sends
    try:
        wait_all(comm.mpi, [request], 0.1, "recv", comm.rank)
    finally:
        request.Cancel()
        request.Wait()


def p_n002():
    from rlx_core.distributed.deadline import check_timeout

    check_timeout("soon")


def p_n003(monkeypatch):
    from rlx_core.distributed.mpi import load_mpi

    monkeypatch.setitem(sys.modules, "mpi4py", None)
    load_mpi()


def p_n004():
    from rlx_core.distributed.communicator import compare_signatures, encode_signature

    mine, theirs = "fc1.weight f32[4, 8]", "fc1.weight f32[5, 8]"
    compare_signatures("parameter shapes", 0, mine,
                       np.stack([encode_signature(mine), encode_signature(theirs)]))


def p_n005():
    from rlx_core.distributed import shard_batch

    shard_batch(np.arange(7), 0, 2)


def p_n006():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    import rlx_core as rlx
    from rlx_core.distributed import all_reduce

    x = np.ones(3, np.float32)  # run in a singleton world of one rank
    rlx.compile(lambda a: all_reduce(a, ranks=3), x, target="numpy")(x)


def p_n007():
    import rlx_core as rlx
    from rlx_core.distributed import TensorParallelPlan, partition

    w = np.ones((6, 4), np.float32)
    g = rlx.trace(lambda x, w: rlx.nn.linear(x, w), np.ones((2, 4), np.float32), w)
    partition(g, TensorParallelPlan(column=("w",)), 0, 4)  # 6 outputs over 4 ranks


def p_n008():
    from rlx_core.distributed import split_layers

    split_layers([1.0, 1.0], 3)

def p_n009():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    import time

    from rlx_core.distributed.faults import NOTICE_TAG, _Channel
    from rlx_core.distributed.mpi import load_mpi

    mpi = load_mpi()  # a singleton world: this rank sends itself the failure notice
    channel = _Channel(mpi)
    note = np.frombuffer(b"RuntimeError: out of memory", dtype=np.uint8).copy()
    sent = mpi.COMM_WORLD.Isend(note, dest=0, tag=NOTICE_TAG)
    try:
        for _ in range(1000):
            channel.check()
            time.sleep(0.001)
    finally:
        sent.Wait()


def p_n010():
    import signal

    from rlx_core.distributed.faults import stop_error

    raise stop_error(0, 2, signal.SIGTERM)


def p_r001():
    import rlx_core as rlx

    exe = rlx.compile(lambda x: x * 2.0, np.ones((2, 3), np.float32), target="numpy")
    exe(np.ones((3, 3), np.float32))


def p_r002():
    import rlx_core as rlx

    table = np.arange(8, dtype=np.float32).reshape(4, 2)
    exe = rlx.compile(lambda ids: rlx.take(rlx.asarray(table), ids, axis=0),
                      np.zeros(2, np.int32), target="numpy")
    exe(np.array([1, 7], np.int32))


def p_r003():
    from rlx_core.ir import dtypes as dt
    from rlx_core.ir.graph import TensorType
    from rlx_core.targets.numpy_ref.semantics import eval_op

    eval_op("frobnicate", {}, [np.ones(2, np.float32)], TensorType(dt.f32, (2,)))


def p_r004():
    from rlx_core.targets.webgpu.runtime_browser import BrowserProgram

    # a program is built from the browser's `js` module, which only Pyodide has; run() checks
    # first whether this Python can wait for the asynchronous readback, before touching it
    BrowserProgram.run(object.__new__(BrowserProgram), [])


def p_r010():
    from rlx_core.ir import dtypes as dt
    from rlx_core.runtime.scm_codegen import dtype_code

    dtype_code(dt.bf16, "argument 0 of f")  # bf16 has no host array layout to pass in place


def p_r011():
    from rlx_core.ir import dtypes as dt
    from rlx_core.ir.graph import Graph, Level, TensorType, Value, ValueKind
    from rlx_core.runtime.specialization_cache import host_params

    w = Value("w", TensorType(dt.f32, (2,)), ValueKind.PARAM)
    host_params(Graph("f", Level.LIR, (), (w,), (), ("w",)))  # a parameter without data


def _refuse_dlopen(monkeypatch, tmp_path):
    import ctypes

    real = ctypes.CDLL

    def refuse(path, *a, **k):  # only what was built into the cache (BLAS still loads)
        if str(path).startswith(str(tmp_path)):
            raise OSError(f"{path}: cannot open shared object file")
        return real(path, *a, **k)

    from rlx_core.targets.cpu import cache

    monkeypatch.setattr(cache, "_READY", set())
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ctypes, "CDLL", refuse)


def p_r012(monkeypatch, tmp_path):
    import rlx_core as rlx

    _refuse_dlopen(monkeypatch, tmp_path)  # rebuilt once, then the typed error
    rlx.jit(lambda x: x * 3.0 - 0.5, target="cpu")(np.ones((3,), np.float32))


def p_r013(monkeypatch, tmp_path):
    import rlx_core as rlx
    from rlx_core.targets.cpu import cache

    monkeypatch.setattr(cache, "_READY", set())
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "a-file"))
    rlx.compile(lambda x: x + 1.0, np.ones((2,), np.float32), target="cpu", record=False)


def p_r014(monkeypatch, tmp_path):
    import errno

    from rlx_core.targets import verified_files
    from rlx_core.targets.cpu import cache

    monkeypatch.setattr(cache, "_READY", set())
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    cache.cache_dir()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(verified_files.os, "replace", full)  # the disk fills after the check
    verified_files.write_atomic(tmp_path / "x.c", b"int x;")


def p_r015(monkeypatch, tmp_path):
    import rlx_core as rlx

    _refuse_dlopen(monkeypatch, tmp_path)
    rlx.compile(lambda x: x * 7.0 - 0.5, np.ones((3,), np.float32), target="cpu", record=False)


def p_r016(monkeypatch, tmp_path):
    import errno
    import os
    import warnings

    from rlx_core.targets.cpu import cache, cached_build

    ro = tmp_path / "ro"
    monkeypatch.setattr(cache, "_READY", set())
    monkeypatch.setattr(cache, "_READ_ONLY", {})
    monkeypatch.setattr(cache.tempfile, "tempdir", str(tmp_path))  # the private folder
    monkeypatch.setenv("RLX_CACHE_DIR", str(ro))
    cached_build.build_shared("int rlx_r016(void) { return 16; }\n")  # fill it
    cache._READY.clear()
    real = cache._probe_write

    def read_only(path):  # then the folder turns read-only (root ignores chmod: inject it)
        if path == ro:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real(path)

    monkeypatch.setattr(cache, "_probe_write", read_only)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        cache.cache_dir()
    return [w.message.code for w in got if hasattr(w.message, "code")]


def p_r024():
    import numpy as np

    import rlx_core as rlx

    f = rlx.jit(lambda x, c: rlx.where(x > 0, x, c), target="cpu", donate=(5,))
    f(np.ones(4, np.float32), np.zeros(4, np.float32))


def p_r017(monkeypatch, tmp_path):
    import warnings

    import rlx_core as rlx
    from rlx_core import api
    from rlx_core.targets.cpu import cache, toolchain

    monkeypatch.setattr(cache, "_READY", set())
    monkeypatch.setattr(toolchain, "_COMPILERS", {})
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "a-file"))
    api.default_jit_target.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            rlx.jit(lambda x: x + 1.0)(np.ones((2,), np.float32))
    finally:
        api.default_jit_target.cache_clear()
    return [w.message.code for w in got if hasattr(w.message, "code")]


# ---- targets --------------------------------------------------------------------------------

def p_x001(monkeypatch):
    import rlx_core as rlx
    from rlx_core.targets.registry import get_target

    monkeypatch.setattr(type(get_target("numpy")), "available", lambda self: (False, "test"))
    rlx.compile(lambda x: x * 2.0, np.ones((2,), np.float32), target="numpy")


def p_x002():
    from rlx_core.targets.registry import get_target

    get_target("tpu9")


def p_x003(monkeypatch, tmp_path):
    from rlx_core.errors import TargetUnavailableError
    from rlx_core.targets.cpu.cached_build import build_shared
    from rlx_core.targets.cpu.toolchain import find_compiler

    try:
        find_compiler()
    except TargetUnavailableError as err:
        pytest.skip(f"no C compiler here: {err}")
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    build_shared("int rlx_broken(void) { return undeclared_name; }\n")


def p_x005(monkeypatch, tmp_path):
    from rlx_core.targets.cpu import cached_build, toolchain

    script = tmp_path / "slowcc"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cached_build, "CC_TIMEOUT_S", 0.5)
    cached_build.build_shared("int f(void) { return 1; }\n",
                              compiler=toolchain.Compiler(str(script), "slowcc", (), False))


def p_x006(tmp_path):
    from rlx_core.targets.tool_process import run_tool

    script = tmp_path / "slowtool"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    run_tool([str(script)], timeout=0.5)


def p_j001(monkeypatch):
    from rlx_core.targets.cpu.isa import detect

    monkeypatch.setenv("RLX_CPU_ISA", "avx9000")
    detect()


def _cpu_lir():
    import rlx_core as rlx

    _, _, lir, _ = rlx.lower(lambda a, b: rlx.concat([a, b], axis=0), np.ones(2, np.float32),
                             np.ones(3, np.float32), target="cpu", record=False)
    return lir


def p_x004():
    from dataclasses import replace

    from rlx_core.targets.cpu.renderer import render_program

    # a capability table that claims an op before its renderer has a rule: the opaque concat
    # kernel, renamed to an op the C renderer does not know
    lir = _cpu_lir()
    k = next(k for k in lir.kernels if k.kind == "opaque")
    unknown = replace(k, nodes=(replace(k.nodes[0], op="frobnicate"),))
    render_program(replace(lir, kernels=tuple(unknown if x is k else x for x in lir.kernels)),
                   use_blas=False)


def p_k001():
    import rlx_core as rlx
    from rlx_core.targets.webgpu.renderer import render_graph

    # legal LIR for numpy (which has f64) handed to the WGSL renderer, whose emulated f64
    # (webgpu/df64.py) has no tanh
    _, _, lir, _ = rlx.lower(lambda x: np.tanh(x), np.ones(3, np.float64), target="numpy",
                             record=False)
    render_graph(lir)


def p_k002():
    from rlx_core.errors import TargetUnavailableError

    pytest.importorskip("wgpu")
    from rlx_core.targets.webgpu.runtime_native import NativeRuntime

    try:
        rt = NativeRuntime.open()
    except TargetUnavailableError as err:
        pytest.skip(f"no native WebGPU adapter: {err}")
    rt.pipeline("@compute @workgroup_size(1) fn main() { let x: f32 = undeclared; }\n")


def p_z001(tmp_path):
    from rlx_core.testing.cases import load

    (tmp_path / "case.rlx").write_text("hir @g {\n}\n")
    load(tmp_path / "case.rlx")  # no .json / .npz next to it


def p_z002():
    from rlx_core.testing.fuzz import main

    main(["--targets", "tpu9", "--minutes", "0.01"])


def _fuzz_state(path, seed: int, start: int, graphs: int) -> None:
    """A fuzz report's JSON state as a run on numpy of ``graphs`` cases from ``start`` leaves it."""
    from rlx_core.testing.report import TargetStats, write_report

    header = {"date": "-", "command": "-", "commit": "-", "cpu": "-", "isa": "-", "cores": 2,
              "minutes": 1, "seed": seed, "pack": 10, "count": graphs, "start": start,
              "max_ops": 6, "targets": ["numpy"], "elapsed_min": 0.5, "driver": "",
              "sessions": []}
    write_report(path, {"numpy": TargetStats(graphs=graphs, start=start, next=start + graphs)},
                 header)


def p_z005(tmp_path):
    from rlx_core.testing.fuzz import main

    _fuzz_state(tmp_path / "run.md", seed=1, start=0, graphs=10)
    main(["--targets", "numpy", "--seed", "2", "--count", "10", "--resume",
          "--report", str(tmp_path / "run.md")])  # the state is seed 1's


def p_z006(tmp_path):
    from rlx_core.testing.shards import merge

    _fuzz_state(tmp_path / "a.md", seed=1, start=0, graphs=20)
    _fuzz_state(tmp_path / "b.md", seed=1, start=10, graphs=20)  # cases 10-19 in both
    merge([tmp_path / "a.md", tmp_path / "b.md"])


def _numpy_case() -> Any:
    from rlx_core.testing.generator import generate
    from rlx_core.testing.profile import profile_for

    return generate(profile_for("numpy"), (1, 0))


def p_z003():
    from rlx_core.testing.watchdog import Worker
    from tests.fuzz.test_watchdog import slow_case

    worker = Worker()
    try:  # ~1 TFLOP of chained matmuls against 0.5 s: past its deadline on any machine (a
        # quick case could finish inside the first poll and raise nothing)
        worker.call("numpy", [slow_case()], 0.5)
    finally:
        worker.stop()


def p_z004():
    from rlx_core.testing.watchdog import Worker

    worker = Worker()
    worker.call("numpy", [_numpy_case()], 120)
    worker._proc.kill()
    worker._proc.join()
    worker.call("numpy", [_numpy_case()], 120)


def _fresh_bridge(monkeypatch) -> Any:
    from rlx_core.targets.webgpu_browser.bridge import BrowserBridge

    # the bridge remembers a failed connect for 30 s; start (and leave) it clean
    monkeypatch.setattr(BrowserBridge, "_shared", None)
    monkeypatch.setattr(BrowserBridge, "_failure", None)
    return BrowserBridge


def p_b001(monkeypatch):
    from rlx_core.targets.registry import get_target

    _fresh_bridge(monkeypatch)
    get_target("webgpu-browser").adapter()  # plain pytest: no Jupyter kernel, so no browser


def p_b002():
    from rlx_core.targets.webgpu_browser.protocol import check_reply

    check_reply({"rlx": 1, "id": "r1", "ok": False, "kind": "no-gpu",
                 "error": "navigator.gpu is undefined"}, "hello")


def p_b003():
    from rlx_core.targets.webgpu_browser.protocol import check_reply

    check_reply({"rlx": 1, "id": "r2", "ok": False, "kind": "shader",
                 "error": "unresolved identifier 'x'"}, "load")


def p_b004(monkeypatch):
    from types import SimpleNamespace

    from rlx_core.targets.webgpu_browser import bridge

    cls = _fresh_bridge(monkeypatch)
    # an ipykernel older than 7: a kernel object, but no shell channel thread (no subshells)
    monkeypatch.setattr(bridge, "_kernel", lambda: SimpleNamespace())
    cls.current()


def p_b005():
    from rlx_core.targets.webgpu_browser.protocol import check_reply

    check_reply({"rlx": 99, "ok": True}, "run")  # an extension of another protocol version


def _tpu_lir():
    import rlx_core as rlx

    _, _, lir, _ = rlx.lower(lambda a: rlx.exp(a) + a, np.ones((2, 3), np.float32),
                             target="tpu", record=False)
    return lir


def p_h001():
    from dataclasses import replace

    from rlx_core.targets.tpu.renderer import render_module

    # the renderer meets an op its table does not know (as a table claiming too much would)
    lir = _tpu_lir()
    odd = replace(lir.nodes[0], op="frobnicate")
    render_module(replace(lir, nodes=(odd, *lir.nodes[1:]), kernels=()))


def p_h003():
    from rlx_core.targets.hexagon.toolchain import compile_check, find_clang

    if find_clang()[0] is None:
        pytest.skip(f"no clang with the Hexagon backend: {find_clang()[1]}")
    compile_check("static void k(void) { undeclared_intrinsic(); }\n")


def p_h004(monkeypatch, tmp_path):
    import numpy as np

    import rlx_core as rlx
    from rlx_core.targets.hexagon import emulator
    from rlx_core.targets.registry import get_target

    ok, why = get_target("hexagon").available()
    if not ok:
        pytest.skip(f"hexagon unavailable: {why}")
    exe = rlx.compile(lambda a: a + a, np.ones(4, np.int32), target="hexagon")
    # an "emulator" that dies before writing anything, as a faulting program would
    monkeypatch.setattr(emulator, "find_qemu", lambda: ("false", ""))
    exe(np.ones(4, np.int32))


def p_h005():
    from rlx_core.targets.cuda.driver import check

    # the result check every driver call goes through, given a launch's fault code
    check(None, 700, "cuLaunchKernel", "k3")


def p_h002():
    from dataclasses import replace

    pytest.importorskip("jaxlib")
    from rlx_core.targets.tpu.renderer import render_module
    from rlx_core.targets.tpu.runtime import compile_module

    mod = render_module(_tpu_lir())
    compile_module(replace(mod, text=mod.text.replace("stablehlo.exponential",
                                                      "stablehlo.exponentia")))


# ---- explorer and the base class ------------------------------------------------------------

def p_e000():
    from rlx_explorer.mime import trace_output

    trace_output(42)  # a plain RlxError: no narrower class applies


def p_e101():
    from rlx_explorer.magics import parse_flags

    parse_flags("--target numpy --frobnicate")


def p_e103():
    import socket

    from rlx_core.cli import pick_port

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        pick_port(busy.getsockname()[1])


def p_e102():
    from rlx_explorer.magics import run_cell

    run_cell("", "def layer(x):\n    return x\ndef encode(x):\n    return x\n", {})


# ---- quantization -----------------------------------------------------------------------------

def p_q001():
    from rlx_core.quant.observers import MinMaxObserver

    MinMaxObserver().qparams()  # nothing observed


def p_q002():
    from rlx_core.quant.observers import MinMaxObserver

    MinMaxObserver(axis=2).observe(np.zeros((2, 3), np.float32))


def p_q003():
    from rlx_core.quant.int4 import quantize_int4

    quantize_int4(np.zeros((4, 48), np.float32), group=32)


def p_q004():
    from rlx_core.quant.observers import make_observer

    make_observer("kl")
def p_q005(monkeypatch):
    from rlx_core.targets.cpu import igemm

    monkeypatch.setenv("RLX_IGEMM_ISA", "sse9")
    igemm.isa_here()


def p_q010(monkeypatch):
    from rlx_core.targets.cpu import bf16gemm

    monkeypatch.setenv("RLX_BF16_GEMM", "tiles9000")
    bf16gemm.path()


def p_g001():
    from rlx_core.targets.gpu_common.kernels import GpuKernel
    from rlx_core.targets.registry import get_target

    ok, why = get_target("opencl").available()
    if not ok:
        pytest.skip(f"no OpenCL device: {why}")
    src = "__kernel void rlx_kernel(__global float* b0) {\n  b0[0] = undeclared;  // %x\n}\n"
    get_target("opencl").device().compile([GpuKernel("k0", "elementwise", src, (), ("x",),
                                                     (1, 1, 1), local=(1, 1, 1))])


def p_g002():
    import numpy as np

    import rlx_core as rlx
    from rlx_core.targets.registry import get_target

    ok, why = get_target("opencl").available()
    if not ok:
        pytest.skip(f"no OpenCL device: {why}")
    exe = rlx.compile(lambda a: a * 3 + 1, np.arange(4, dtype=np.int64), target="opencl",
                      input_ranges={"a": (0, 100)})
    exe(np.arange(4, dtype=np.int64) + 1000)


def _cortex_m():
    from rlx_core.targets.registry import get_target

    tgt = get_target("cortex-m")
    ok, why = tgt.available()
    if not ok:
        pytest.skip(f"cortex-m unavailable: {why}")
    return tgt


def _int8_relu_graph():
    import rlx_core as rlx
    from rlx_core.quant import ops as qops

    w = np.arange(12, dtype=np.int8).reshape(3, 4)
    return rlx.trace(lambda x: qops.requantize(qops.int_linear(x, w), 1 << 30, -3),
                     np.ones((1, 4), np.int8))


def p_u001():
    import rlx_core as rlx

    rlx.lower(lambda x: rlx.nn.softmax(x, axis=-1), np.ones((1, 4), np.float32),
              target="cortex-m", record=False)


def p_u002():
    import rlx_core as rlx

    rlx.lower(lambda x: x * x, np.ones((1, 4), np.int8), target="cortex-m", record=False)


def p_u003(monkeypatch):
    import rlx_core as rlx

    _cortex_m()
    monkeypatch.setenv("RLX_CORTEX_M_FLASH", "16")
    rlx.compile(_int8_relu_graph(), target="cortex-m", record=False)


def p_u004():
    from rlx_core.targets.cortex_m.boards import board

    board("stm32-nonexistent")


def p_u005():
    from rlx_core.targets.cortex_m.boards import board
    from rlx_core.targets.cortex_m.toolchain import build_elf

    _cortex_m()
    build_elf("void rlx_model(void) { undeclared(); }\n", "", board(None))


def p_u006(monkeypatch):
    import rlx_core as rlx
    from rlx_core.targets.cortex_m import runtime

    _cortex_m()
    exe = rlx.compile(_int8_relu_graph(), target="cortex-m", record=False)
    # an "emulator" that exits 1 before writing anything, as a faulting firmware does
    monkeypatch.setattr(runtime, "find_qemu", lambda: ("false", ""))
    exe(np.ones((1, 4), np.int8))


def p_u007():
    import rlx_core as rlx

    _cortex_m()
    w = np.ones((3, 4), np.int8)
    g = rlx.trace(lambda x: rlx.quant.ops.int_linear(x, rlx.param(w, "w")),
                  np.ones((1, 4), np.int8))
    exe = rlx.compile(g, target="cortex-m", record=False)
    exe.program.run([np.ones((1, 4), np.int8)], {"w": w + 1})


def p_u008():
    import rlx_core as rlx

    _cortex_m()
    exe = rlx.compile(_int8_relu_graph(), target="cortex-m", record=False)
    exe.program.run([np.ones((2, 4), np.int8)], {})


def _fpga_parts():
    import rlx_core as rlx
    from rlx_core.targets.registry import get_target

    _, _, lir, _ = rlx.lower(_int8_relu_graph(), target="fpga", record=False)
    return get_target("fpga").project(lir, 2)


def p_u010():
    import rlx_core as rlx
    from rlx_core.targets.registry import get_target

    w = np.ones((3, 4), np.int8)
    _, _, lir, _ = rlx.lower(lambda x, y: (rlx.quant.ops.int_linear(x, w),
                                          rlx.quant.ops.int_linear(y, w)),
                             np.ones((1, 4), np.int8), np.ones((1, 4), np.int8),
                             target="fpga", record=False)
    get_target("fpga").project(lir)


def p_u011():
    from dataclasses import replace

    from rlx_core.targets.fpga.toolchain import build_simulator, find_tool

    if find_tool("verilator", "RLX_VERILATOR")[0] is None:
        pytest.skip("verilator is not installed")
    proj, _, _ = _fpga_parts()
    build_simulator(replace(proj, files={**proj.files, "rlx_top.v": "module rlx_top(;\n"}))


def p_u012(tmp_path):
    from rlx_core.targets.fpga.runtime import Simulation

    _, dp, src = _fpga_parts()
    (tmp_path / "obj").mkdir()
    sim = tmp_path / "obj" / "Vrlx_top"  # a "simulator" that stops before any output
    sim.write_text("#!/bin/sh\nexit 3\n")
    sim.chmod(0o755)
    Simulation(src, dp, tmp_path, {}).run_calls([[np.ones((1, 4), np.int8)]])


def p_u013():
    from dataclasses import replace

    from rlx_core.targets.fpga.synth import synthesize
    from rlx_core.targets.fpga.toolchain import find_tool

    if find_tool("yosys")[0] is None:
        pytest.skip("yosys is not installed")
    proj, _, _ = _fpga_parts()
    synthesize(replace(proj, files={**proj.files, "rlx_top.v": "module rlx_top(;\n"}))


def p_u014():
    import rlx_core as rlx

    rlx.lower(lambda x: x.reshape(0, 7, 1), np.zeros((3, 1, 0), np.int16), target="cortex-m",
              record=False)


def p_u015():
    import rlx_core as rlx
    from rlx_core.ir.parser import parse

    _cortex_m()
    g = parse('hir @m {\n  input %x : i8[5]\n  %0 : i8[5] = neg(%x) {}\n'
              '  %1 : i32[] = argmax(%0) {axis=0, index_dtype=i32}\n  return %1\n}\n')
    rlx.compile(g, target="cortex-m", record=False)


Producer = Callable[..., Any]
def p_s020():
    m = GraphMaker()
    rec = m.input("rec", "f32", (4, 11))
    graph = m.graph(m.op("splat_rasterize", [rec], width=16, height=16))
    return _codes_of_failures(graph, "opencl")


def p_s021():
    import rlx_core as rlx
    from rlx_core.splat import scene
    from rlx_core.targets.registry import get_target

    ok, why = get_target("webgpu").available()
    if not ok:
        pytest.skip(f"webgpu: {why}")
    g = scene.random_gaussians(12, 1, seed=1, extent=0.6, scale=0.15)
    view, k = scene.orbit(20.0, 10.0, 3.0), scene.intrinsics(40, 32)

    def f(*a):
        return rlx.splat.render(*a, width=40, height=32, tile_entries=4)

    args = (g.means, g.quats, g.scales, g.opacities, g.sh, view, k)
    rlx.compile(f, *args, target="webgpu")(*args)


def p_s001():
    import rlx_core as rlx

    rlx.sparse.csr(np.array([0, 1, 2]), np.array([0, 7]), np.ones(2), (2, 4))


def p_s002():
    m = GraphMaker()
    a = m.input("a", "f32", (3, 3))
    return _codes_of_failures(m.graph(m.op("inv", [a])), "webgpu")


def p_s003():
    import rlx_core as rlx

    def f(ip, ix, v):
        a = rlx.sparse.csr(ip, ix, v, (2, 2))
        return rlx.sparse.spgemm(a, a).data

    rlx.trace(f, np.array([0, 1, 2], np.int32), np.array([0, 1], np.int32), np.ones(2))


PRODUCERS: dict[str, Producer] = {
    "RLX-L000": p_l000, "RLX-L001": p_l001, "RLX-L002": p_l002, "RLX-L003": p_l003,
    "RLX-L004": p_l004, "RLX-L005": p_l005, "RLX-L006": p_l006, "RLX-L007": p_l007,
    "RLX-L008": p_l008, "RLX-L009": p_l009, "RLX-L010": p_l010,
    "RLX-P001": p_p001, "RLX-V001": p_v001, "RLX-V002": p_v002, "RLX-W001": p_w001,
    "RLX-W002": p_w002,
    "RLX-T000": p_t000, "RLX-T001": p_t001, "RLX-T002": p_t002, "RLX-T003": p_t003,
    "RLX-T010": p_t010, "RLX-T011": p_t011,
    "RLX-A001": p_a001, "RLX-A002": p_a002, "RLX-A101": p_a101,
    "RLX-C001": p_c001, "RLX-C002": p_c002, "RLX-C003": p_c003,
    "RLX-D001": p_d001, "RLX-F001": p_f001, "RLX-F002": p_f002,
    "RLX-M001": p_m001, "RLX-J006": p_j006, "RLX-J007": p_j007, "RLX-J008": p_j008, "RLX-I101": p_i101, "RLX-I102": p_i102,
    "RLX-O001": p_o001, "RLX-O002": p_o002, "RLX-O003": p_o003,
    "RLX-O020": p_o020, "RLX-O021": p_o021, "RLX-O022": p_o022,
    "RLX-N001": p_n001, "RLX-N002": p_n002, "RLX-N003": p_n003, "RLX-N004": p_n004,
    "RLX-N005": p_n005, "RLX-N006": p_n006, "RLX-N007": p_n007, "RLX-N008": p_n008,
    "RLX-N009": p_n009, "RLX-N010": p_n010,
    "RLX-R001": p_r001, "RLX-R002": p_r002, "RLX-R003": p_r003, "RLX-R004": p_r004,
    "RLX-R010": p_r010, "RLX-R011": p_r011, "RLX-R012": p_r012,
    "RLX-R013": p_r013, "RLX-R014": p_r014, "RLX-R015": p_r015,
    "RLX-R016": p_r016, "RLX-R017": p_r017, "RLX-R024": p_r024,
    "RLX-V003": p_v003, "RLX-T004": p_t004, "RLX-R030": p_r030, "RLX-R031": p_r031,
    "RLX-X001": p_x001, "RLX-X002": p_x002, "RLX-X003": p_x003, "RLX-X004": p_x004, "RLX-X005": p_x005, "RLX-X006": p_x006,
    "RLX-J001": p_j001,
    "RLX-K001": p_k001, "RLX-K002": p_k002, "RLX-G001": p_g001, "RLX-G002": p_g002,
    "RLX-B001": p_b001, "RLX-B002": p_b002, "RLX-B003": p_b003, "RLX-B004": p_b004,
    "RLX-B005": p_b005, "RLX-H001": p_h001, "RLX-H002": p_h002,
    "RLX-H003": p_h003, "RLX-H004": p_h004, "RLX-H005": p_h005,
    "RLX-Z001": p_z001, "RLX-Z002": p_z002, "RLX-Z003": p_z003, "RLX-Z004": p_z004,
    "RLX-Z005": p_z005, "RLX-Z006": p_z006,
    "RLX-E000": p_e000, "RLX-E101": p_e101, "RLX-E102": p_e102, "RLX-E103": p_e103,
    "RLX-Q001": p_q001, "RLX-Q002": p_q002, "RLX-Q003": p_q003, "RLX-Q004": p_q004,
    "RLX-Q005": p_q005, "RLX-Q010": p_q010,
    "RLX-S001": p_s001, "RLX-S002": p_s002, "RLX-S003": p_s003, "RLX-S020": p_s020,
    "RLX-S021": p_s021,
    "RLX-U001": p_u001, "RLX-U002": p_u002, "RLX-U003": p_u003, "RLX-U004": p_u004,
    "RLX-U005": p_u005, "RLX-U006": p_u006, "RLX-U007": p_u007, "RLX-U008": p_u008,
    "RLX-U010": p_u010, "RLX-U011": p_u011, "RLX-U012": p_u012, "RLX-U013": p_u013,
    "RLX-U014": p_u014, "RLX-U015": p_u015,
}
# producers that import torch or open a WebGPU device: seconds, not milliseconds
SLOW = ("RLX-I101", "RLX-J006", "RLX-K002", "RLX-G001", "RLX-G002", "RLX-Z003", "RLX-Z004", "RLX-S021")


def test_every_documented_code_has_a_producer() -> None:
    assert sorted(documented_codes()) == sorted(PRODUCERS)


@pytest.mark.parametrize("code", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c
                                  for c in sorted(PRODUCERS)])
def test_code_is_produced(code, monkeypatch, tmp_path) -> None:
    fn = PRODUCERS[code]
    from rlx_core.dispatch.policy import set_policy

    fixtures = {"monkeypatch": monkeypatch, "tmp_path": tmp_path}
    previous = set_policy(None)
    try:
        args = [fixtures[n] for n in fn.__code__.co_varnames[:fn.__code__.co_argcount]]
        try:
            got = fn(*args)
        except RlxError as err:
            got = [err.code]
            assert err.hint, f"{code} is raised without a fix hint: {err}"
        assert got is not None and code in got, (code, got)
    finally:
        set_policy(previous)


# ---- static checks over the source tree -----------------------------------------------------

def _source_files() -> list[Path]:
    files: list[Path] = []
    for root in SOURCES:
        if root.is_dir():
            files += sorted(p for ext in ("*.py", "*.ts", "*.tsx", "*.js") for p in root.rglob(ext)
                            if "node_modules" not in p.parts)
    return files


def _error_classes() -> dict[str, list[str]]:
    """code -> the exception classes that set it as their ``code`` attribute ("file:Class")."""
    classes: list[tuple[str, ast.ClassDef]] = []
    for f in _source_files():
        if f.suffix == ".py":
            rel = f.relative_to(ROOT).as_posix()
            classes += [(rel, n) for n in ast.walk(ast.parse(f.read_text()))
                        if isinstance(n, ast.ClassDef)]

    def base_names(c: ast.ClassDef) -> set[str]:
        return {b.id if isinstance(b, ast.Name) else b.attr for b in c.bases
                if isinstance(b, ast.Name | ast.Attribute)}

    # exception classes: Exception and whatever derives from one, by name, to a fixpoint (a
    # dataclass with a `code` field, such as a dtype rule, is not one)
    errors = {"Exception", "RlxError"}
    grew = True
    while grew:
        grew = False
        for _, c in classes:
            if c.name not in errors and base_names(c) & errors:
                errors.add(c.name)
                grew = True
    defined: dict[str, list[str]] = {}
    for rel, c in classes:
        if c.name not in errors:
            continue
        for stmt in c.body:  # `code = "RLX-..."` or `code: str = "RLX-..."`
            if isinstance(stmt, ast.Assign):
                targets = stmt.targets
            elif isinstance(stmt, ast.AnnAssign):
                targets = [stmt.target]
            else:
                continue
            value = stmt.value
            if (any(isinstance(t, ast.Name) and t.id == "code" for t in targets)
                    and isinstance(value, ast.Constant) and isinstance(value.value, str)):
                defined.setdefault(value.value, []).append(f"{rel}:{c.name}")
    return defined


def test_every_code_in_the_source_tree_is_documented() -> None:
    documented = set(documented_codes())
    used: dict[str, str] = {}
    for f in _source_files():
        for m in CODE.finditer(f.read_text()):
            used.setdefault(m.group(0), f.relative_to(ROOT).as_posix())
    missing = {c: where for c, where in sorted(used.items()) if c not in documented}
    assert not missing, f"codes used but not in docs/errors.md: {missing}"
    # the scan sees the class attributes and the code= keywords it is meant to see
    assert {"RLX-E000", "RLX-X003", "RLX-R011", "RLX-R004"} <= set(used)


def test_no_code_is_defined_by_two_classes() -> None:
    defined = _error_classes()
    assert len(defined) > 30 and defined["RLX-E000"] == ["rlx_core/errors.py:RlxError"]
    shared = {c: owners for c, owners in defined.items() if len(owners) > 1}
    assert not shared, f"a code must mean one thing: {shared}"


def test_documented_codes_are_unique_and_indexed() -> None:
    codes = documented_codes()
    assert len(codes) == len(set(codes))
    # the index table at the top lists every section, in the order of the sections
    index = DOC.read_text().split("\n## ", 1)[0]
    assert re.findall(r"^\| (RLX-[A-Z]\d{3}) \|", index, flags=re.M) == codes
