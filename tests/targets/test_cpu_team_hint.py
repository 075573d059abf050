"""The team's wait prefetch (cpu/team_waits.py): before each kernel the body names the next kernel's
prepacked weight (rlx_team_hint), which a thread waiting at a phase's end prefetches; the
results do not change with it, nor with the team's size."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import team, team_runtime, team_waits
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.own_sgemm import skip_unless_own_sgemm

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

A, B = (
    team_waits.Stream("arena + p_PACKED_DATA + 0", 4096),
    team_waits.Stream("arena + p_PACKED_DATA + 4096", 64),
)


def _body(streams: list[team_waits.Stream | None]) -> list[str]:
    # k0, k1 serial (one chunk), k2 a GEMM on A, k3 a claimed kernel reading no weight, k4 a
    # GEMM on B
    calls = [f"        k{i}();" for i in range(5)]
    is_team = [False, False, True, True, True]
    return team.team_calls(calls, is_team, None, is_team, "p", None, None, streams)


def test_each_kernel_is_preceded_by_the_next_streamed_weight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RLX_WAIT_PREFETCH", raising=False)
    lines = [t.strip() for t in _body([None, None, A, None, B])]
    hint_a = f"rlx_team_hint({A.pointer}, {A.nbytes});"
    hint_b = f"rlx_team_hint({B.pointer}, {B.nbytes});"
    # the serial run is hinted once, before it; k3's next weight is still B (no new hint);
    # after the last GEMM nothing is left to fetch
    assert [t for t in lines if t.startswith("rlx_team_hint")] == [
        hint_a,
        hint_b,
        "rlx_team_hint(0, 0);",
    ]
    assert lines.index(hint_a) < lines.index("k0();")
    assert lines.index("k1();") < lines.index(hint_b) < lines.index("k2();")
    assert lines.index("k3();") < lines.index("rlx_team_hint(0, 0);") < lines.index("k4();")


def test_no_hints_without_streamed_weights_or_when_switched_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RLX_WAIT_PREFETCH", raising=False)
    assert not any("rlx_team_hint" in t for t in _body([None] * 5))
    monkeypatch.setenv("RLX_WAIT_PREFETCH", "0")
    assert team_waits.wait_prefetch_lines() == 0
    assert not any("rlx_team_hint" in t for t in _body([None, None, A, None, B]))


@needs_cpu
def test_two_linear_layers_prefetch_the_second_weight_with_the_same_bits(threads) -> None:
    """16 rows (MiniLM b2 s8's GEMMs): the second layer's packed weight is hinted before the
    first layer runs; 1, 2 and 3 threads give the same bits, and numpy's result."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(22)
    x = rng.standard_normal((16, 384), np.float32)
    w1 = rng.standard_normal((1536, 384), np.float32) / 20
    w2 = rng.standard_normal((384, 1536), np.float32) / 40

    def f(a):
        h = rlx.nn.relu(rlx.nn.linear(a, rlx.param(w1, "w1")))
        return rlx.nn.linear(h, rlx.param(w2, "w2"))

    threads(2)
    exe = rlx.compile(f, x, target="cpu", record=False)
    packed = {p["param"]: p for p in exe.program.info["prepacked"]}
    src = exe.program.info["source"]
    if not src.count("rlx_team_hint(arena"):
        pytest.skip("the program did not run as a claimed team (no pool body)")
    assert f", {packed['w2']['bytes']});" in src  # the second weight, before the first GEMM
    want = np.maximum(x.astype(np.float64) @ w1.T, 0) @ w2.T
    outs = {}
    for n in (1, 2, 3):
        threads(n)
        outs[n] = np.asarray(exe(x))
        np.testing.assert_allclose(outs[n], want, rtol=1e-4, atol=1e-4)
    assert np.array_equal(outs[2], outs[1]) and np.array_equal(outs[3], outs[1])


@pytest.mark.parametrize("value", ["abc", "-4", "1e3"])
def test_a_bad_wait_prefetch_setting_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """RLX_WAIT_PREFETCH that is not a whole number >= 0 is an ArgumentError naming it (not
    silently the default 16); blank is unset."""
    from rlx_core.errors import ArgumentError

    monkeypatch.setenv("RLX_WAIT_PREFETCH", value)
    with pytest.raises(ArgumentError, match="RLX_WAIT_PREFETCH"):
        team_waits.wait_prefetch_lines()
    monkeypatch.setenv("RLX_WAIT_PREFETCH", "  ")
    assert team_waits.wait_prefetch_lines() == 16
    monkeypatch.setenv("RLX_WAIT_PREFETCH", "8")
    assert team_waits.wait_prefetch_lines() == 8


def test_a_wait_prefetch_above_a_whole_hint_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RLX_WAIT_PREFETCH becomes the C loop count RLX_TEAM_PF_LINES (an int): more lines than
    a whole hint's share (RLX_TEAM_PF_MAX bytes) is an ArgumentError naming the bound, not a
    loop counter that overflows; the bound itself is accepted."""
    from rlx_core.errors import ArgumentError

    pf_max = f"#define RLX_TEAM_PF_MAX {64 * team_waits.WAIT_PREFETCH_MAX}LL"
    assert pf_max in team_runtime.BARRIER_C
    for huge in (team_waits.WAIT_PREFETCH_MAX + 1, 10**12):
        monkeypatch.setenv("RLX_WAIT_PREFETCH", str(huge))
        with pytest.raises(ArgumentError, match=f"above its bound {team_waits.WAIT_PREFETCH_MAX}"):
            team_waits.wait_prefetch_lines()
    monkeypatch.setenv("RLX_WAIT_PREFETCH", str(team_waits.WAIT_PREFETCH_MAX))
    assert team_waits.wait_prefetch_lines() == team_waits.WAIT_PREFETCH_MAX


# rlx_team_hint and rlx_team_prefetch as team_runtime.BARRIER_C has them, with __builtin_prefetch
# recording each line's offset instead of fetching it
_PREFETCH_HARNESS = r"""
#include <stdint.h>
static const char *base;
static long long seen[4096];
static int nseen;
#define __builtin_prefetch(p, rw, locality) (seen[nseen++] = (const char*)(p) - base)
static __thread int rlx_team_me, rlx_team_size;
@TEAM_PF@
int spins(const char *buf, long long bytes, int me, int size, int count, long long *out) {
    base = buf;
    nseen = 0;
    rlx_team_me = me;
    rlx_team_size = size;
    rlx_team_hint(buf, bytes);
    for (int i = 0; i < count; ++i) rlx_team_prefetch();
    for (int i = 0; i < nseen; ++i) out[i] = seen[i];
    return nseen;
}
"""


@needs_cpu
@pytest.mark.parametrize("lines", [1, 5, 16])
def test_a_waiting_thread_prefetches_its_share_and_nothing_past_it(lines: int) -> None:
    """Each spin prefetches the next ``lines`` lines of the thread's share of the hinted
    weight; the last spin stops at the share's end (before, it fetched whole groups: up to 15
    lines past it, another share's or another buffer's); more spins fetch nothing."""
    import ctypes

    from rlx_core.targets.cpu.cached_build import build_shared
    from rlx_core.targets.cpu.runtime import load_library

    start = team_runtime.BARRIER_C.index("#ifndef RLX_TEAM_PF_LINES")
    end = team_runtime.BARRIER_C.index("/* the one wait")
    source = (f"#define RLX_TEAM_PF_LINES {lines}\n"
              + _PREFETCH_HARNESS.replace("@TEAM_PF@", team_runtime.BARRIER_C[start:end]))
    lib = load_library(str(build_shared(source).path))
    lib.spins.restype = ctypes.c_int
    lib.spins.argtypes = (ctypes.c_char_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.POINTER(ctypes.c_longlong))
    buf = ctypes.create_string_buffer(1 << 20)
    # (bytes, team size): shares of whole lines, of a line and a part, below one line, and a
    # share cut to RLX_TEAM_PF_MAX (256 KB) of a larger weight
    for bytes_, size in ((4096, 2), (3000, 2), (100, 3), (1 << 20, 2), (64 * 17 + 8, 1)):
        for me in range(size):
            out = (ctypes.c_longlong * 4096)()
            got = list(out[:lib.spins(buf, bytes_, me, size, 4096, out)])
            lo, hi = bytes_ * me // size, bytes_ * (me + 1) // size
            if size == 1:  # a team of one names no weight
                assert got == [], (bytes_, size, me)
                continue
            hi = min(hi, lo + (1 << 18))
            want = list(range(lo & ~63, hi, 64))  # every line of the share once, in order
            assert got == want, (bytes_, size, me, lines, got[-3:], want[-3:])
