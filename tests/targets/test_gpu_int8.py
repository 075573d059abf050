"""int8 on the GPU targets (gpu_common/int8.py): ``int_linear`` on packed bytes and
``requantize`` in 32-bit limbs, bit for bit against the numpy reference, on each executing
target's packed-dot path (WGSL ``dot4I8Packed``, SPIR-V ``OpSDot``) and on its i32 path (and
HLSL's, run through SPIR-V); on the checked targets, the kernels pass their toolchains and the
packed dot reaches the machine code (PTX ``dp4a``, AMD ``v_dot4``), and on an NVIDIA GPU
(scripts/gpu_check.sh runs ``-k cuda``) the CUDA kernels run bit-exact too."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import quant as Q
from rlx_core.errors import RlxError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
TARGETS = ("webgpu", "vulkan", "opengl", "opencl", "directx")
# compile-checked here: the builtin the int_linear source calls, and what the compiled code
# must show for it (None: Metal has no packed int8 dot, the kernel unpacks)
CHECKED = {"cuda": "__dp4a(", "rocm": "__builtin_amdgcn_sdot4(", "metal": "rlx_dot4("}


def _info_holder(target: str) -> Any:
    """The object whose ``info`` (AdapterInfo) picks the target's int8 dialect."""
    if target == "webgpu":
        return rlx.api.get_target("webgpu").runtime()
    return rlx.api.get_target(target).device()


# the AdapterInfo feature that selects the packed-dot dialect, per target (None: no such path)
PACKED = {"webgpu": "wgsl-packed-4x8-integer-dot-product", "vulkan": "shader-integer-dot-product",
          "opengl": None, "opencl": None, "directx": None}
# what the packed path's source calls
BUILTIN = {"webgpu": "dot4I8Packed(", "vulkan": "rlx_sdot4("}


def _paths(targets: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(t, p) for t in targets for p in (("packed-dot", "i32") if PACKED[t] else ("i32",))]


# opengl and opencl take the i32 path webgpu and vulkan are also tested on (one renderer), and
# PoCL builds a program in ~1-3 s on the shared CI cores: they run the MLP and requantize
# (which cover int_linear's u8 operand and zero points), not every int_linear case; directx
# (HLSL: its own shifts and conversions) runs every case on its i32 path
@pytest.fixture(params=_paths(TARGETS), ids=lambda tp: f"{tp[0]}-{tp[1]}")
def gpu_all(request: Any) -> Iterator[str]:
    yield from _on_path(request)


@pytest.fixture(params=_paths(("webgpu", "vulkan", "directx")),
                ids=lambda tp: f"{tp[0]}-{tp[1]}")
def gpu(request: Any) -> Iterator[str]:
    yield from _on_path(request)


def _on_path(request: Any) -> Iterator[str]:
    """A target on one int8 path: the packed one where the device has it (skipped where it
    does not), the i32 one by hiding the feature from the dialect choice."""
    target, path = request.param
    ok, why = rlx.api.get_target(target).available()
    if not ok:
        pytest.skip(f"{target} unavailable: {why}")
    holder = _info_holder(target)
    feat = PACKED[target]
    if path == "packed-dot":
        if feat not in holder.info.features:
            pytest.skip(f"{target} has no packed int8 dot product here")
        yield target
        return
    saved = holder.info
    holder.info = dataclasses.replace(saved, features=tuple(f for f in saved.features
                                                             if f != feat))
    try:
        yield target
    finally:
        holder.info = saved


def _run(fn: Any, args: list[np.ndarray], target: str) -> tuple[Any, dict[str, str]]:
    exe = rlx.compile(fn, *args, target=target)
    return exe(*args), exe.program.sources


def _check_path(sources: dict[str, str], target: str, request: Any) -> None:
    """The int_linear kernel took the path the fixture asked for."""
    src = "\n".join(sources.values())
    packed = request.node.callspec.params["gpu"][1] == "packed-dot"
    assert (BUILTIN.get(target, "\0") in src) == packed
    assert ("rlx_dot4(" in src) == (not packed)


@pytest.mark.parametrize("xdt,xzp,wdt,wzp,lead,k,n", [
    ("i8", 0, "i8", 0, (1,), 37, 5), ("u8", 128, "i8", 0, (17,), 131, 18),
    ("i8", -5, "i8", 3, (2, 9), 64, 33), ("u8", 7, "u8", 200, (5,), 70, 16)])
def test_int_linear_bit_exact(gpu: str, xdt: str, xzp: int, wdt: str, wzp: int,
                              lead: tuple[int, ...], k: int, n: int, request: Any) -> None:
    """Both zero points, u8 operands (offset by 128), K not a multiple of 4 or of 64, rows
    and columns not multiples of the 16x16 tile, a rank-3 input, with and without bias."""
    rng = np.random.default_rng(11)
    info_x, info_w = (np.iinfo(np.dtype({"i8": "int8", "u8": "uint8"}[d])) for d in (xdt, wdt))
    x = rng.integers(info_x.min, info_x.max, (*lead, k), endpoint=True).astype(info_x.dtype)
    w = rng.integers(info_w.min, info_w.max, (n, k), endpoint=True).astype(info_w.dtype)
    b = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    bias = k != 64
    args = [x, w, b] if bias else [x, w]

    def f(*a: Any) -> Any:
        return Q.int_linear(a[0], a[1], a[2] if bias else None, xzp, wzp)

    got, sources = _run(f, args, gpu)
    want = rlx.compile(f, *args, target="numpy")(*args)
    ref = (x.astype(np.int64) - xzp) @ (w.astype(np.int64) - wzp).T + (b if bias else 0)
    assert want.tolist() == ref.tolist()
    assert got.dtype == np.int32 and got.tolist() == want.tolist()
    _check_path(sources, gpu, request)


@pytest.mark.parametrize("xdt,xzp,wdt,wzp,n,k", [
    ("u8", 7, "u8", 200, 40, 70), ("i8", -5, "i8", 3, 18, 64), ("u8", 128, "i8", 0, 3, 5)])
def test_prepacked_weights_bit_exact(gpu: str, xdt: str, xzp: int, wdt: str, wzp: int, n: int,
                                     k: int) -> None:
    """Weights the host has before a call (a parameter; a small array is a constant) are
    packed once into words with their zero-point term (int8.pack_weights) and the kernel
    stages those words; the unpacked parameter gets no device buffer; a new parameter array
    is packed again when it is uploaded."""
    rng = np.random.default_rng(3)
    info_x, info_w = (np.iinfo(np.dtype({"i8": "int8", "u8": "uint8"}[d])) for d in (xdt, wdt))
    x = rng.integers(info_x.min, info_x.max, (9, k), endpoint=True).astype(info_x.dtype)
    w = rng.integers(info_w.min, info_w.max, (n, k), endpoint=True).astype(info_w.dtype)
    b = rng.integers(-(2**20), 2**20, n).astype(np.int32)

    def f(a: Any) -> Any:
        return Q.int_linear(a, w, b, xzp, wzp)

    exe = rlx.compile(f, x, target=gpu)
    plan = exe.program.info["plan"]
    packed = [kn.name for kn in plan.kernels if kn.derived is not None]
    assert len(packed) == 1 and packed[0] in plan.buffer(packed[0]).name
    from_param = dict(plan.derived)
    assert (packed[0] in from_param) == bool(plan.params)  # else a constant packed at plan time
    if plan.params:  # the unpacked weights stay on the host: only the packed words are on the GPU
        assert plan.buffer(from_param[packed[0]].source).role == "host"
        assert from_param[packed[0]].source not in {bs.name for bs in plan.device_buffers}
    want = rlx.compile(f, x, target="numpy")(x)
    assert exe(x).tolist() == want.tolist()
    if plan.params:  # swap the weights: the packed words follow
        name = from_param[packed[0]].source
        w2 = np.ascontiguousarray(w[::-1])
        exe.params[name] = w2
        ref = (x.astype(np.int64) - xzp) @ (w2.astype(np.int64) - wzp).T + b
        assert exe(x).tolist() == ref.tolist()


def test_pack_weights_layout() -> None:
    """Rows of little-endian words of four signed bytes, zero past K, u8 offset by -128;
    then ``ca * sum(w') + K * ca * cb`` a row, wrapped to i32."""
    from rlx_core.targets.gpu_common.int8 import pack_weights

    w = np.array([[1, -2, 3, -128, 127], [0, 5, -1, 2, 9]], np.int32)
    got = np.frombuffer(pack_weights(w.astype("<i4").tobytes(), 2, 5, False, 3, -4), "<u4")
    assert got[:4].tolist() == [0x8003_FE01, 0x7F, 0x02FF_0500, 0x09]
    assert got[4:].view("<i4").tolist() == [3 * 1 + 5 * 3 * -4, 3 * 15 + 5 * 3 * -4]
    u = np.array([[0, 255, 128, 129]], np.int32)  # u8 storage: -128, 127, 0, 1
    got = np.frombuffer(pack_weights(u.astype("<i4").tobytes(), 1, 4, True, 0, 0), "<u4")
    assert got.tolist() == [0x01007F80]
    big = np.full((1, 4), -128, np.int32)  # 2^31 wraps
    got = np.frombuffer(pack_weights(big.astype("<i4").tobytes(), 1, 4, False, 2**22, 0), "<i4")
    assert got[1] == (-512 * 2**22 + 2**31) % 2**32 - 2**31


def _accs(rng: np.random.Generator, n: int) -> np.ndarray:
    edge = np.array([0, 1, -1, 2, -2, 3, -3, INT32_MIN, INT32_MAX, INT32_MIN + 1, 1 << 30,
                     -(1 << 30), 12345, -12345], np.int64)
    return np.concatenate([edge, rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True),
                           rng.integers(-70000, 70000, n)]).astype(np.int32)


def test_requantize_bit_exact(gpu_all: str) -> None:
    """Per tensor and per channel, to i8, u8 and i16, extreme accumulators, left shifts that
    wrap in i32 (up to 30), right shifts up to 31."""
    rng = np.random.default_rng(2)
    pairs = [Q.quantize_multiplier(r) for r in (0.0031, 1.7, 0.5, 7.3, 1e-9)]
    pairs += [(2**31 - 1, -31), (1518500250, -30), (1 << 30, 30)]  # the IR's extreme shifts
    acc = _accs(rng, 150)
    acc = np.stack([np.roll(acc, j) for j in range(len(pairs))], axis=1)  # a channel a pair
    ms, ss = zip(*pairs, strict=True)

    def f(a: Any) -> Any:  # every output in one program (a build per program)
        return tuple(Q.requantize(a, m, s, zp, dtype, axis=axis)
                     for dtype, zp in (("i8", -3), ("u8", 128), ("i16", 7))
                     for m, s, axis in ((ms, ss, 1), (ms[0], ss[0], -1), (ms[3], ss[3], -1),
                                        (ms[6], ss[6], -1), (ms[7], ss[7], -1)))

    got, _ = _run(f, [acc], gpu_all)
    want = rlx.compile(f, acc, target="numpy")(acc)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tolist() == w.tolist()


def _ptq_mlp() -> tuple[Any, Any, np.ndarray]:
    """A static PTQ MLP (quantize -> int_linear -> requantize (relu folded) -> int_linear ->
    dequantize), its f32 graph and an input."""
    from rlx_core.models.mlp import init_mlp, mlp_logits
    from rlx_core.quant import ptq

    rng = np.random.default_rng(5)
    params = init_mlp((70, 48, 48, 10), seed=4)
    x = rng.uniform(0, 1, (20, 70)).astype(np.float32)
    g = rlx.trace(lambda a: mlp_logits(params, a), x)
    q = ptq.quantize_static(g, data=[rng.uniform(0, 1, (20, 70)).astype(np.float32)
                                     for _ in range(3)], target="numpy")
    ops = [n.op for n in q.graph.nodes]
    assert "int_linear" in ops and "requantize" in ops
    return q.graph, g, x


def test_static_ptq_mlp_bit_exact(gpu_all: str) -> None:
    """The static PTQ MLP on the GPU equals the numpy reference bit for bit."""
    qg, g, x = _ptq_mlp()
    got = rlx.compile(qg, target=gpu_all)(x)
    want = rlx.compile(qg, target="numpy")(x)
    assert np.array_equal(got, want)
    f32 = rlx.compile(g, target="numpy")(x)
    assert np.abs(got - f32).max() < 0.1 * np.abs(f32).max()  # and it is the MLP


def _checked(target: str) -> Any:
    ok, why = rlx.api.get_target(target).available()
    if not ok:
        pytest.skip(f"{target} unavailable: {why}")
    return rlx.api.get_target(target)


@pytest.mark.parametrize("target", sorted(CHECKED))
def test_static_ptq_mlp_on_the_checked_targets(target: str) -> None:
    """cuda, rocm and metal claim the int8 ops: the PTQ MLP's kernels (per-channel requantize,
    zero points, u8 activations) pass nvcc + ptxas, hipcc, the MSL syntax pass; int_linear
    calls the language's packed dot (Metal: the i32 unpacking). Where a GPU runs the cuda
    target (scripts/gpu_check.sh), it also equals the numpy reference bit for bit."""
    tgt = _checked(target)
    qg, _, x = _ptq_mlp()
    exe = rlx.compile(qg, target=target)
    linears = [s for s in exe.program.sources.values() if "= int_linear" in s]
    assert len(linears) == 3 and all(CHECKED[target] in s for s in linears)
    if target == "cuda" and tgt.executes_here()[0]:
        assert np.array_equal(exe(x), rlx.compile(qg, target="numpy")(x))
    else:
        assert exe.program.info["checked"]


def _int_linear_unit(target: str) -> str:
    """One int_linear kernel (both zero points, u8 activations) in ``target``'s language."""
    from rlx_core.targets.gpu_common.checked_target import unit
    from rlx_core.targets.gpu_common.kernels import render_graph

    x, w = np.zeros((3, 40), np.uint8), np.zeros((5, 40), np.int8)
    lir = rlx.api.lower(lambda a, b: Q.int_linear(a, b, None, 3, -2), x, w, target=target)[2]
    tgt = rlx.api.get_target(target)
    return unit(tgt.dialect, render_graph(tgt.dialect, lir))


def test_the_packed_dot_is_in_the_cuda_ptx() -> None:
    """``__dp4a`` becomes PTX ``dp4a.s32.s32`` (one instruction per four multiply-adds)."""
    from rlx_core.targets.cuda.toolchain import find_tools, ptx

    if find_tools()[0] is None:
        pytest.skip(find_tools()[1])
    assert "dp4a.s32.s32" in ptx(_int_linear_unit("cuda"))


def test_the_packed_dot_is_in_the_amd_code_objects() -> None:
    """``__builtin_amdgcn_sdot4`` becomes ``v_dot4`` (``v_dot4c_i32_i8``) in the gfx90a and
    gfx940 code objects hipcc makes."""
    from rlx_core.targets.rocm.toolchain import disassemble, find_llvm_tools

    _checked("rocm")
    if find_llvm_tools()[0] is None:
        pytest.skip(find_llvm_tools()[1])
    for arch, asm in disassemble(_int_linear_unit("rocm")).items():
        assert "v_dot4" in asm and "_i32_i8" in asm, arch


def test_claims_are_where_the_kernels_run() -> None:
    """Every GPU table claims the int8 ops (tested above: executed or compile-checked); a
    target without them (tpu: requantize's i64 products) keeps the legalization failure."""
    for name in (*TARGETS, *CHECKED, "webgpu-browser"):
        caps = rlx.api.get_target(name).caps
        assert caps.claim_for("int_linear") and caps.claim_for("requantize"), name
    acc = np.zeros((4, 3), np.int32)
    with pytest.raises(RlxError) as err:
        rlx.compile(lambda a: Q.requantize(a, 1 << 30, -2), acc, target="tpu")
    assert err.value.code == "RLX-L000" and "requantize" in str(err.value) and err.value.hint
