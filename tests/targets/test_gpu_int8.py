"""int8 on the GPU targets (gpu_common/int8.py): ``int_linear`` on packed bytes and
``requantize`` in 32-bit limbs, bit for bit against the numpy reference, on each executing
target's packed-dot path (WGSL ``dot4I8Packed``, SPIR-V ``OpSDot``) and on its i32 path."""

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
TARGETS = ("webgpu", "vulkan", "opengl", "opencl")


def _info_holder(target: str) -> Any:
    """The object whose ``info`` (AdapterInfo) picks the target's int8 dialect."""
    if target == "webgpu":
        return rlx.api.get_target("webgpu").runtime()
    return rlx.api.get_target(target).device()


# the AdapterInfo feature that selects the packed-dot dialect, per target (None: no such path)
PACKED = {"webgpu": "wgsl-packed-4x8-integer-dot-product", "vulkan": "shader-integer-dot-product",
          "opengl": None, "opencl": None}
# what the packed path's source calls
BUILTIN = {"webgpu": "dot4I8Packed(", "vulkan": "rlx_sdot4("}


def _paths(targets: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(t, p) for t in targets for p in (("packed-dot", "i32") if PACKED[t] else ("i32",))]


# opengl and opencl take the i32 path webgpu and vulkan are also tested on (one renderer), and
# PoCL builds a program in ~1-3 s on the shared CI cores: they run the MLP and requantize
# (which cover int_linear's u8 operand and zero points), not every int_linear case
@pytest.fixture(params=_paths(TARGETS), ids=lambda tp: f"{tp[0]}-{tp[1]}")
def gpu_all(request: Any) -> Iterator[str]:
    yield from _on_path(request)


@pytest.fixture(params=_paths(TARGETS[:2]), ids=lambda tp: f"{tp[0]}-{tp[1]}")
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


def test_static_ptq_mlp_bit_exact(gpu_all: str) -> None:
    """A static PTQ MLP (quantize -> int_linear -> requantize (relu folded) -> int_linear ->
    dequantize) on the GPU equals the numpy reference bit for bit."""
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
    got = rlx.compile(q.graph, target=gpu_all)(x)
    want = rlx.compile(q.graph, target="numpy")(x)
    assert np.array_equal(got, want)
    f32 = rlx.compile(g, target="numpy")(x)
    assert np.abs(got - f32).max() < 0.1 * np.abs(f32).max()  # and it is the MLP


def test_claims_are_where_the_kernels_run() -> None:
    """The GPU tables that claim the int8 ops are the ones tested above; the others keep the
    legalization failure (requantize's i64 products) with a hint."""
    for name in TARGETS:
        caps = rlx.api.get_target(name).caps
        assert caps.claim_for("int_linear") and caps.claim_for("requantize"), name
    for name in ("directx", "cuda", "rocm", "metal"):
        caps = rlx.api.get_target(name).caps
        assert caps.claim_for("requantize") is None, name
    ok, why = rlx.api.get_target("directx").available()
    if not ok:
        pytest.skip(f"directx unavailable: {why}")
    acc = np.zeros((4, 3), np.int32)
    with pytest.raises(RlxError) as err:
        rlx.compile(lambda a: Q.requantize(a, 1 << 30, -2), acc, target="directx")
    assert err.value.code == "RLX-L000" and "requantize" in str(err.value) and err.value.hint
