"""The cpu target's settings from the environment (rlx_core/targets/cpu/env.py): a numeric knob
outside 0..its bound, a path switch that is not one of its values and an on/off switch that is
not 1 or 0 are ArgumentErrors (RLX-R001) naming the variable, never silently the default (an
A/B run with a typo would time the default twice); unset or blank is the default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlx_core.errors import ArgumentError
from rlx_core.targets.cpu import (
    amx,
    bias_store,
    blas,
    conv,
    conv_blocked,
    conv_pair,
    depthwise,
    gemv,
    inplace,
    layout,
    peaks,
    prepack,
    row_split,
    row_sums,
    sgemm,
    tile_epilogue,
    toolchain,
    update_store,
    winograd,
)
from rlx_core.targets.cpu.env import env_choice, env_count
from rlx_core.targets.cpu.target import CpuTarget


def test_a_count_is_a_whole_number_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLX_TEST_KNOB", raising=False)
    assert env_count("RLX_TEST_KNOB", "a count", 10) is None
    for ok, want in (("0", 0), (" 7 ", 7), ("10", 10)):
        monkeypatch.setenv("RLX_TEST_KNOB", ok)
        assert env_count("RLX_TEST_KNOB", "a count", 10) == want
    for bad, why in (("-1", "whole number"), ("2.5", "whole number"), ("11", "bound 10"),
                     (str(10**20), "bound 10")):
        monkeypatch.setenv("RLX_TEST_KNOB", bad)
        with pytest.raises(ArgumentError, match=f"RLX_TEST_KNOB=.*{why}") as err:
            env_count("RLX_TEST_KNOB", "a count", 10)
        assert err.value.code == "RLX-R001" and "at most 10" in str(err.value)


def test_a_switch_is_one_of_its_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_TEST_SWITCH", "  ")
    assert env_choice("RLX_TEST_SWITCH", ("0", "all")) == ""
    monkeypatch.setenv("RLX_TEST_SWITCH", "all")
    assert env_choice("RLX_TEST_SWITCH", ("0", "all")) == "all"
    monkeypatch.setenv("RLX_TEST_SWITCH", "al")
    with pytest.raises(ArgumentError, match="RLX_TEST_SWITCH='al' is not one of 0, all"):
        env_choice("RLX_TEST_SWITCH", ("0", "all"))


# the path switches as the renderer reads them: (variable, a value it takes, its reader)
_WINO_3X3 = (8, 64, 64, 1, 3, 3, 1, 1, 1, 1, 56, 56)  # n, c, o, groups, kh, kw, sh, sw, dh, dw, oh, ow
SWITCHES = [
    ("RLX_CONV_BLOCKED", "all", conv_blocked.mode),
    ("RLX_CONV_PAIR", "0", conv_pair.mode),
    ("RLX_WINOGRAD", "2", lambda: conv.winograd_tile(*_WINO_3X3)),
    ("RLX_WG_LAZY", "1", lambda: winograd.filter_on_the_fly(4, 8, 512, 512, 4, 4)),
    ("RLX_CB_FOLD", "3", lambda: conv_blocked.images_per_call(8, 4096, 1 << 30, True)),
]


@pytest.mark.parametrize(("name", "good", "read"), SWITCHES, ids=[s[0] for s in SWITCHES])
def test_a_path_switch_with_a_typo_is_a_typed_error(
        monkeypatch: pytest.MonkeyPatch, name: str, good: str, read) -> None:
    for other in ("RLX_CONV_BLOCKED", "RLX_CONV_PAIR", "RLX_WINOGRAD", "RLX_WG_LAZY",
                  "RLX_CB_FOLD"):
        monkeypatch.delenv(other, raising=False)
    default = read()
    monkeypatch.setenv(name, good)
    took = read()
    monkeypatch.setenv(name, "yes please")
    with pytest.raises(ArgumentError, match=name):
        read()
    monkeypatch.setenv(name, "")
    assert read() == default
    # what the accepted value does: the mode itself, the forced tile, lazy always, 3 images
    assert took == {"RLX_CONV_BLOCKED": "all", "RLX_CONV_PAIR": "0", "RLX_WINOGRAD": 2,
                    "RLX_WG_LAZY": True, "RLX_CB_FOLD": 3}[name]


def test_a_fold_of_zero_is_one_image_and_a_large_one_the_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CB_FOLD", "0")
    assert conv_blocked.images_per_call(8, 4096, 1 << 30, True) == 1
    monkeypatch.setenv("RLX_CB_FOLD", str(conv_blocked.FOLD_MAX))
    assert conv_blocked.images_per_call(8, 4096, 1 << 30, True) == 8
    monkeypatch.setenv("RLX_CB_FOLD", str(conv_blocked.FOLD_MAX + 1))
    with pytest.raises(ArgumentError, match="RLX_CB_FOLD"):
        conv_blocked.images_per_call(8, 4096, 1 << 30, True)


def _compiler():
    from rlx_core.targets.cpu.toolchain import find_compiler

    return find_compiler()


# the on/off switches as the code reads them: (variable, its default, whether the reader sees
# it on). An RLX_NO_* switch is on when the thing it names is off; RLX_SG_PPF's default is
# this machine's measurement (peaks store).
FLAGS = [
    ("RLX_NO_BLAS", False, lambda: blas.find_blas()[1] == "disabled by RLX_NO_BLAS"),
    ("RLX_NO_OWN_SGEMM", False,
     lambda: sgemm.available(_compiler())[1] == "disabled by RLX_NO_OWN_SGEMM"),
    ("RLX_SG_APF", True, lambda: "RLX_SG_APF" not in sgemm.defines()),
    ("RLX_SG_PPF", lambda: peaks.measured_fma_ports() != 1, sgemm.panel_prefetch),
    ("RLX_SG_ASM8", lambda: sgemm.ASM8_ON_TWO_PORTS and peaks.measured_fma_ports() == 2,
     sgemm.asm8),
    ("RLX_NO_PREPACK", False, lambda: not prepack.prepack_enabled()),
    ("RLX_NO_GEMV", False, lambda: not gemv.enabled()),
    ("RLX_NO_TILE_EPILOGUE", False, lambda: not tile_epilogue.enabled()),
    ("RLX_NO_BIAS_STORE", False, lambda: not bias_store.enabled()),
    ("RLX_NO_UPDATE_STORE", False, lambda: not update_store.enabled()),
    ("RLX_NO_NORM_EPILOGUE", False, lambda: CpuTarget().matmul_norms() == ()),
    ("RLX_NO_AMX", False, amx.disabled),
    ("RLX_CPU_SANITIZE", False, toolchain.sanitize),
    ("RLX_ARENA_INPLACE", True, inplace.enabled),
    ("RLX_CPU_LAYOUT", True, layout.enabled),
    ("RLX_ROW_SPLIT", True, row_split.enabled),
    ("RLX_ROW_SUMS", True, row_sums.enabled),
    ("RLX_CPU_BACKWARD", True, lambda: conv_blocked.backward(8, 1 << 30)),
    ("RLX_CONV_SHIFTED", True,
     lambda: conv.use_shifted(64, 64, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 28, 28)),
    ("RLX_DW_SMALL", True, lambda: depthwise.small_map(3, 3, 1, 1, 1, 1, 4, 4) is not None),
    ("RLX_CONV_DW_FLAT", True, lambda: depthwise.use_dw_flat(1, 1, 3, 3)),
]


@pytest.mark.parametrize(("name", "default", "is_on"), FLAGS, ids=[f[0] for f in FLAGS])
def test_an_on_off_switch_takes_1_or_0_and_nothing_else(
        monkeypatch: pytest.MonkeyPatch, name: str, default, is_on) -> None:
    """Unset or blank: the default; ``1`` on, ``0`` off; ``yes``, ``true``, ``off`` or a typo
    are RLX-R001 naming the variable (before, each meant on or off by the switch's own rule:
    RLX_NO_BLAS=false turned BLAS off, RLX_ROW_SPLIT=off left splitting on)."""
    monkeypatch.delenv(name, raising=False)
    default = default() if callable(default) else default
    assert is_on() is default
    for value, on in (("1", True), (" 1 ", True), ("0", False), ("", default)):
        monkeypatch.setenv(name, value)
        assert is_on() is on, (name, value)
    for typo in ("yes", "true", "off", "2", "O"):
        monkeypatch.setenv(name, typo)
        with pytest.raises(ArgumentError, match=f"{name}='{typo}' is not one of 0, 1") as err:
            is_on()
        assert err.value.code == "RLX-R001"
        assert f"or unset it for its default ({int(default)})" in str(err.value)


def test_the_profile_switch_takes_0_1_or_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    import rlx_core as rlx

    monkeypatch.setenv("RLX_CPU_PROFILE", "threads")
    with pytest.raises(ArgumentError, match="RLX_CPU_PROFILE='threads' is not one of 0, 1, "
                                            "thread"):
        rlx.compile(lambda x: x + 1.0, np.zeros(4, np.float32), target="cpu")


@pytest.mark.parametrize("value, clock", [("", None), ("0", None), ("1", "CLOCK_MONOTONIC"),
                                          ("thread", "CLOCK_THREAD_CPUTIME_ID")])
def test_the_profile_switch_picks_the_clock_and_the_profile_flag_keeps_it(
        monkeypatch: pytest.MonkeyPatch, value: str, clock: str | None) -> None:
    """RLX_CPU_PROFILE=1 times kernels on the wall clock, thread on the calling thread's CPU
    clock, 0 or unset not at all; the profile compile flag (the explorer's profiling,
    profile_mnist_mlp) turns profiling on whatever the switch says, on the clock it picks."""
    import types

    from rlx_core.targets.registry import get_target

    monkeypatch.setenv("RLX_CPU_PROFILE", value)
    cpu, lir = get_target("cpu"), _tiny_lir()
    alone = cpu.build(lir, types.SimpleNamespace(flags={})).info
    assert ("profile" in alone) is (clock is not None)
    if clock is not None:
        assert f"clock_gettime({clock}, &ts)" in alone["source"]
    flagged = cpu.build(lir, types.SimpleNamespace(flags={"profile": True})).info
    assert callable(flagged["profile"])
    assert f"clock_gettime({clock or 'CLOCK_MONOTONIC'}, &ts)" in flagged["source"]


def test_the_profile_flag_does_not_skip_the_switch_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the profile compile flag on, a bad RLX_CPU_PROFILE is still one RLX-R001 with its
    hint (before, the flag skipped the cpu target's check and the C renderer read the variable
    again on its own: 'threads' was timed on the wall clock without a word)."""
    import types

    from rlx_core.targets.registry import get_target

    lir = _tiny_lir()
    monkeypatch.setenv("RLX_CPU_PROFILE", "threads")
    with pytest.raises(ArgumentError, match="RLX_CPU_PROFILE='threads' is not one of") as err:
        get_target("cpu").build(lir, types.SimpleNamespace(flags={"profile": True}))
    assert err.value.code == "RLX-R001" and "or unset it for no profile" in str(err.value)


def _tiny_lir():
    import numpy as np

    import rlx_core as rlx

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("RLX_CPU_PROFILE", raising=False)
        return rlx.compile(lambda x: x * 3.0, np.zeros(8, np.float32), target="cpu").lir


def test_every_cpu_switch_is_read_through_env_py() -> None:
    """No module of the cpu target, nor of the C renderer it shares (c_common/), reads an RLX_*
    variable from os.environ itself but for the settings with typed errors of their own (a
    compiler path, a folder, an ISA name, ...): a new switch goes through env_flag /
    env_choice / env_count, or it would accept any value (c_common read RLX_CPU_PROFILE a
    second time, past the cpu target's check)."""
    own_rules = {"RLX_CC", "RLX_CACHE_DIR", "RLX_CPU_ISA", "RLX_SGEMM_BLOCKING",
                 "RLX_NUM_THREADS", "RLX_IGEMM_ISA", "RLX_BF16_GEMM"}
    cpu = Path(conv.__file__).parent
    paths = [p for p in (*cpu.glob("*.py"), *(cpu.parent / "c_common").glob("*.py"))
             if p.name != "env.py"]
    direct = {name for path in paths
              for name in re.findall(r'environ(?:\.get\(|\[)\s*"(RLX_[A-Z0-9_]+)"',
                                     path.read_text(encoding="utf-8"))}
    assert {"RLX_CC", "RLX_NUM_THREADS"} <= direct  # the scan finds what it should
    assert direct - own_rules == set()
