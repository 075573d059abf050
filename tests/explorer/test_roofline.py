"""The cost overlay (issue 30): per-kernel FLOPs and bytes against this CPU's measured peaks,
next to measured kernel times; ``uncalibrated`` whenever either side is unknown."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import peaks as peaks_mod
from rlx_core.targets.cpu.peaks import Peaks, machine_peaks, measure_peaks
from rlx_explorer.session import Session
from rlx_explorer.views.roofline import kernel_cost, roofline_view


def _mm(x, w):  # noqa: ANN001, ANN202 - traced
    return x @ w


def _lir() -> rlx.ir.graph.Graph:
    x, w = np.ones((32, 64), np.float32), np.ones((64, 16), np.float32)
    return rlx.lower(_mm, x, w, target="cpu", record=False)[2]


def test_kernel_cost_counts_a_matmul_and_the_bytes_crossing_memory() -> None:
    lir = _lir()
    k = next(k for k in lir.kernels if k.kind == "matmul")
    flops, nbytes = kernel_cost(lir, k)
    assert flops == 2 * 32 * 16 * 64
    assert nbytes == 4 * (32 * 64 + 64 * 16 + 32 * 16)  # both operands read, the result written


def test_predicted_time_bound_and_distance_from_the_roof() -> None:
    lir = _lir()
    k = next(k for k in lir.kernels if k.kind == "matmul")
    flops, nbytes = kernel_cost(lir, k)
    fast_mem = Peaks(gflops=10.0, gbps=1000.0, threads=1, cpu="test", measured="now")
    view = roofline_view(lir, None, "cpu", {k.name: 1e-3}, fast_mem)
    row = next(r for r in view["kernels"] if r["name"] == k.name)
    assert row["bound"] == "compute"
    assert row["predicted_s"] == pytest.approx(flops / 10e9)
    assert row["of_roofline"] == pytest.approx(flops / 10e9 / 1e-3)
    assert row["status"] == "calibrated" and view["status"] == "calibrated"
    slow_mem = Peaks(gflops=1000.0, gbps=0.5, threads=1, cpu="test", measured="now")
    row = roofline_view(lir, None, "cpu", {}, slow_mem)["kernels"][0]
    assert row["bound"] == "memory"
    assert row["predicted_s"] == pytest.approx(max(flops / 1e12, nbytes / 0.5e9))
    # no measured time: predicted only, flagged
    assert row["status"] == "uncalibrated" and "no per-kernel time" in row["why"]


def test_a_kernel_faster_than_the_stored_fma_peak_marks_the_peaks_uncalibrated() -> None:
    lir = _lir()
    k = next(k for k in lir.kernels if k.kind == "matmul")
    flops, _ = kernel_cost(lir, k)
    low = Peaks(gflops=1.0, gbps=1000.0, threads=1, cpu="test", measured="now")  # busy-run peak
    row = next(r for r in roofline_view(lir, None, "cpu", {k.name: flops / 5e9}, low)["kernels"]
               if r["name"] == k.name)  # the kernel ran at 5 GFLOP/s
    assert row["status"] == "uncalibrated" and "rlx peaks" in row["why"]


def test_uncalibrated_without_peaks_or_off_the_host_cpu() -> None:
    lir = _lir()
    view = roofline_view(lir, None, "cpu", {"k0": 1e-4}, None)
    assert view["status"] == "uncalibrated" and "rlx peaks" in view["why"]
    assert all(r["predicted_s"] is None for r in view["kernels"])
    p = Peaks(gflops=10.0, gbps=10.0, threads=1, cpu="test", measured="now")
    gpu = roofline_view(lir, None, "webgpu", {"k0": 1e-4}, p)
    assert gpu["status"] == "uncalibrated" and "host's CPU" in gpu["why"]


def test_peaks_are_remembered_and_a_loaded_run_never_lowers_a_quiet_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    assert machine_peaks(3) is None
    monkeypatch.setattr(peaks_mod, "fma_peak", lambda n: 100.0)
    monkeypatch.setattr(peaks_mod, "read_bandwidth", lambda n: 20.0)
    monkeypatch.setattr(peaks_mod, "_cpu_seconds", lambda: None)  # quiet by the load average
    monkeypatch.setattr(peaks_mod, "load_average", lambda: 0.5)
    measure_peaks(3)
    monkeypatch.setattr(peaks_mod, "fma_peak", lambda n: 40.0)  # a busy machine's run
    monkeypatch.setattr(peaks_mod, "read_bandwidth", lambda n: 25.0)
    monkeypatch.setattr(peaks_mod, "load_average", lambda: 12.0)
    got = measure_peaks(3)
    assert (got.gflops, got.gbps, got.quiet) == (100.0, 20.0, True)
    again = machine_peaks(3)
    assert again is not None and (again.gflops, again.gbps, again.threads) == (100.0, 20.0, 3)
    assert again.ridge == pytest.approx(5.0) and again.load == 0.5


def test_cpu_kernels_are_timed_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real profiling build of the same LIR times every kernel; with (stored) peaks every
    kernel of the overlay is calibrated."""
    x, w = np.ones((32, 64), np.float32), np.ones((64, 16), np.float32)
    b = Session(_mm, (x, w), ("cpu",), devices=False).bundle()
    prof = b["profile"]
    assert prof["method"].startswith("per kernel: a profiling build")
    names = {k["name"] for k in prof["kernels"]}
    assert names == {k["name"] for k in b["roofline"]["kernels"]}
    assert all(k["seconds"] > 0 for k in prof["kernels"])
    assert all(r["measured_s"] and r["measured_s"] > 0 for r in b["roofline"]["kernels"])
