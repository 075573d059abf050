"""benchmarks/profile_cnn.py: rlx's kernels and ONNX Runtime's nodes on one clock, by class."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
pytest.importorskip("torch", reason="torch is not installed")


def test_a_convolution_is_classed_by_its_shapes_and_implementation() -> None:
    from benchmarks.profile_cnn import layer_class

    assert layer_class((1, 3, 112, 112), (64, 3, 7, 7), (1, 64, 56, 56), 2) == "stem 7x7/2"
    assert layer_class((1, 64, 28, 28), (256, 64, 1, 1), (1, 256, 28, 28), 1) == "1x1 @28"
    assert layer_class((1, 64, 28, 28), (64, 64, 3, 3), (1, 64, 28, 28), 1,
                       "rlx-conv-winograd") == "3x3 winograd @28"
    assert layer_class((1, 128, 28, 28), (128, 128, 3, 3), (1, 128, 14, 14), 2,
                       "rlx-conv-blocked") == "3x3/2 direct @14"
    assert layer_class((1, 128, 14, 14), (512, 128, 1, 1), (1, 512, 14, 14), 1,
                       "rlx-conv-pair", 2) == "1x1 + 1x1/2 pair @14"
    assert layer_class((1, 144, 28, 28), (144, 1, 3, 3), (1, 144, 14, 14), 2) == "dw 3x3/2 @14"


def test_ort_nodes_match_kernels_through_padded_channels_and_pairs() -> None:
    """ONNX Runtime's NCHWc pads 24 channels to 32; a pair kernel takes both its nodes."""
    from benchmarks.profile_cnn import Layer, classes, match

    k1 = ((1, 96, 28, 28), (24, 96, 1, 1), (1, 24, 28, 28))
    pz = ((1, 128, 14, 14), (512, 128, 1, 1), (1, 512, 14, 14))
    px = ((1, 256, 28, 28), (512, 256, 1, 1), (1, 512, 14, 14))
    mine = [Layer("k0", "1x1 @28", 0.5, "", (k1,)), Layer("k1", "1x1 + 1x1/2 pair @14", 1.0,
                                                            "", (pz, px))]
    theirs = [Layer("n0", "1x1 @28", 0.4, "", (((1, 96, 28, 28), (32, 96, 1, 1),
                                                 (1, 32, 28, 28)),)),
              Layer("skip", "1x1/2 @14", 0.3, "", (px,)), Layer("body", "1x1 @14", 0.6, "", (pz,)),
              Layer("gap", "global avg pool", 0.1, "")]
    assert match(mine, theirs) == []
    assert [o.name for o in mine[1].peers] == ["body", "skip"]
    assert {o.cls for o in theirs[1:3]} == {"1x1 + 1x1/2 pair @14"}
    got = {c: (n, a, b) for c, n, a, b in classes(mine, theirs)}
    assert got["1x1 + 1x1/2 pair @14"] == (1, 1.0, pytest.approx(0.9))
    assert got["global avg pool"] == (0, 0.0, 0.1)


@pytest.mark.slow  # compiles and times a small ResNet: run first (tests/conftest.py)
def test_a_small_resnet_is_timed_side_by_side_and_every_conv_matches() -> None:
    """A quarter-width, short ResNet at 32x32: both sides time each of their layers, every
    convolution on one side finds its peer on the other, the classes add up to the sums."""
    import os

    import numpy as np
    import torch

    import rlx_core as rlx
    from benchmarks.cnn_nets import build, export
    from benchmarks.kernel_profile import ort_profiled_session, side_by_side_times
    from benchmarks.profile_cnn import classes, match, ort_layers, rlx_layers

    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    data = export(build("resnet50", width=0.25, classes=10, short=True), torch.from_numpy(x),
                  17)
    old = os.environ.get("RLX_CPU_PROFILE")
    os.environ["RLX_CPU_PROFILE"] = "1"
    try:
        exe = rlx.compile(rlx.from_onnx(data), x, target="cpu", record=False)
    finally:
        if old is None:
            del os.environ["RLX_CPU_PROFILE"]
        else:
            os.environ["RLX_CPU_PROFILE"] = old
    got = side_by_side_times(exe, (x,), ort_profiled_session(data, 1), {"x": x}, 2, warmup=1)
    assert len(got["calls"]["rlx"]) == len(got["calls"]["onnxruntime"]) == 2
    mine, theirs = rlx_layers(exe.lir, got["rlx"], got["impl"]), ort_layers(got["ort"])
    assert match(mine, theirs) == []
    assert all(len(r.peers) == len(r.keys) for r in mine)
    names = {c for c, *_ in classes(mine, theirs)}
    assert {"stem 7x7/2", "max pool @8", "global avg pool", "FC"} <= names
    table = classes(mine, theirs)
    assert sum(a for *_, a, _ in table) == pytest.approx(sum(r.ms for r in mine))
    assert sum(b for *_, b in table) == pytest.approx(sum(o.ms for o in theirs))
    assert all(r.ms > 0 for r in mine if r.keys) and all(o.ms > 0 for o in theirs)
