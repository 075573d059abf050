"""The AMX permission request (rlx_core/targets/cpu/amx.py), from Python and from C: on a CPU
with AMX the tiles become usable and a tile instruction runs; elsewhere the request says why
not (a skip with that reason, never a silent pass)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from rlx_core.errors import ArgumentError
from rlx_core.targets.cpu import amx, isa
from tests.targets.own_sgemm import build_harness


def _need_amx() -> None:
    ext = isa.detect().extensions
    if "amx_tile" not in ext or "amx_bf16" not in ext:
        pytest.skip(f"no AMX-BF16 on this ISA path ({isa.detect().describe()})")


def test_request_grants_tiles_where_the_cpu_has_them() -> None:
    _need_amx()
    status = amx.request("amx_bf16")
    assert status.usable, status.why


def test_no_amx_env_reports_unusable(monkeypatch) -> None:
    monkeypatch.setenv("RLX_NO_AMX", "1")
    status = amx.request("amx_bf16")
    assert not status.usable and "RLX_NO_AMX" in status.why


def test_forced_lower_path_drops_amx(monkeypatch) -> None:
    if "avx2" not in isa.forced_paths():
        pytest.skip("this CPU cannot run the avx2 path below its own")
    monkeypatch.setenv("RLX_CPU_ISA", "avx2")
    status = amx.request("amx_bf16")
    assert not status.usable and "amx_bf16" in status.why


# a tile holding ones (bf16 1.0 = 0x3f80) times itself: every f32 element is 32 (one tile row
# of 32 bf16 values dotted with a column of 32); run only after rlx_amx_ready() granted tiles
HARNESS = "#include <string.h>\n#include <immintrin.h>\n" + amx.SOURCE + r"""
int amx_ones(float *out) {
    if (!rlx_amx_ready()) return 0;
#if RLX_AMX_COMPILED
    rlx_amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 3; ++t) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
    static uint16_t ones[16 * 32];
    for (int i = 0; i < 16 * 32; ++i) ones[i] = 0x3f80;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_loadd(1, ones, 64);
    _tile_loadd(2, ones, 64);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, out, 64);
    _tile_release();
    return 1;
#else
    return 0;
#endif
}
"""


def test_c_request_runs_a_tile_instruction(tmp_path) -> None:
    _need_amx()
    lib = build_harness(tmp_path, "native", HARNESS)
    out = (ctypes.c_float * 256)()
    assert lib.amx_ones(out) == 1, "rlx_amx_ready() refused tiles where Python was granted them"
    assert list(out) == [32.0] * 256


@pytest.mark.parametrize("value, tiles", [("1", 0), ("yes", 0), ("0", 1), ("", 1)])
def test_c_gate_reads_rlx_no_amx_as_python_does(tmp_path, monkeypatch, value, tiles) -> None:
    """rlx_amx_ready() (every AMX kernel's gate, bf16's and int8's) reads RLX_NO_AMX when the
    program runs, as amx.disabled() does: "1" no tile runs, "0" or unset tiles. The C cannot
    raise, so any other value is off there; amx.disabled() raises RLX-R001 on it."""
    _need_amx()
    build_harness(tmp_path, "native", HARNESS)
    code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
            "print(lib.amx_ones((ctypes.c_float * 256)()))")
    env = {**os.environ, "RLX_NO_AMX": value}
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "h-native.so")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    assert int(res.stdout.strip()) == tiles
    monkeypatch.setenv("RLX_NO_AMX", value)
    if value == "yes":
        with pytest.raises(ArgumentError, match="RLX_NO_AMX='yes'"):
            amx.disabled()
    else:
        assert amx.disabled() == (tiles == 0)
