"""The benchmarks' arithmetic and naming: FLOP counts, the FMA-peak probe, result files.

Nothing here times anything against a threshold (benchmarks are not tests); these check that
the floors the benchmarks print are computed from the right FLOP counts and that the probe
runs and measures something."""

from __future__ import annotations

import os
import sys

import pytest

from benchmarks.bench_decode import N_CTX, SIZES, per_token_work
from benchmarks.bench_minilm import SMALL, encoder_flops, small_shapes
from benchmarks.bench_mnist_mlp import Batches, step_flops
from benchmarks.common import SETTLE_S, Stats, in_fixed_batches, result_stem
from rlx_core.models.minilm import BertConfig


def _gemm(m: int, n: int, k: int) -> int:
    return 2 * m * n * k


def test_mlp_step_flops_count_each_gemm_of_the_training_step() -> None:
    b = 128
    want = (_gemm(b, 128, 784) + _gemm(b, 10, 128)        # forward
            + _gemm(128, 784, b) + _gemm(10, 128, b)      # weight gradients
            + _gemm(b, 128, 10))                          # input gradient of layer 2 only
    assert step_flops((784, 128, 10), b) == want == 52_363_264
    deep = step_flops((784, 512, 512, 10), 1024)
    assert deep == 1024 * 2 * (784 * 512 * 2 + 512 * 512 * 3 + 512 * 10 * 3)


def test_mlp_batches_from_the_small_fallback_sample_are_drawn_with_replacement() -> None:
    import numpy as np

    x = np.arange(4000 * 3, dtype=np.float32).reshape(4000, 3)  # the fallback's 4,000 images
    y = np.arange(4000) % 10
    b = Batches(x, y, 1024)  # 8 x 1024 = 8,192 images: more than there are
    assert len(b.x) == 8 and all(xb.shape == (1024, 3) for xb in b.x)
    assert "with replacement" in b.note and "4,000" in b.note
    np.testing.assert_array_equal(b.y[0], b.x[0][:, 0].astype(np.int64) // 3 % 10)
    assert Batches(x, y, 128).note == ""  # enough images: distinct, no note


def test_minilm_flops_count_projections_ffn_and_attention() -> None:
    cfg = BertConfig()  # all-MiniLM-L6-v2: 6 layers, hidden 384, FFN 1536
    s, h, i = 128, cfg.hidden_size, cfg.intermediate_size
    layer = 4 * _gemm(s, h, h) + 2 * _gemm(s, i, h) + 2 * _gemm(s, s, h)
    assert encoder_flops(cfg, 1, s) == cfg.num_hidden_layers * layer
    assert encoder_flops(cfg, 32, s) == 32 * encoder_flops(cfg, 1, s)


def test_minilm_small_shapes_default_to_one_sentence_beside_the_goals_two() -> None:
    from benchmarks.cpu_goals import MINILM_SMALL

    assert small_shapes(SMALL) == [(1, 8), MINILM_SMALL]  # b1 s8 printed beside b2 s8
    assert small_shapes("4x16") == [(4, 16)]
    assert small_shapes("") == []


def test_decode_work_per_token_counts_the_weights_the_head_and_the_caches() -> None:
    # GPT-2 small: 12 x (qkv 3 + proj 1 + mlp 4 + 4) x 768^2 + the tied head 50257 x 768
    # = 123.5 M weights; attention reads all N_CTX slots of both caches in every layer
    gflop, gbytes = per_token_work(SIZES["gpt2"])
    params = 12 * 12 * 768 * 768 + 50257 * 768
    assert gflop == pytest.approx((2 * params + 12 * 4 * N_CTX * 768) * 1e-9)
    assert gbytes == pytest.approx((params + 4 * 12 * N_CTX * 768) * 4e-9)
    assert 0.49 < gbytes < 0.52  # ~0.5 GB streamed per token: why GPT-2 is memory-bound


def test_result_stem_keeps_non_default_runs_beside_the_default() -> None:
    assert result_stem("minilm", None, SETTLE_S) == "minilm"
    assert result_stem("minilm", 1, SETTLE_S) == "minilm-1thread"
    assert result_stem("mnist_mlp", None, 0.0) == "mnist_mlp-settle0s"


def test_machine_stem_puts_the_cpu_slug_in_every_results_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import common
    from rlx_core.targets.cpu import identity

    monkeypatch.setattr(identity, "cpu_model", lambda: "AMD EPYC (Zen 1)")
    assert common.machine_stem("minilm", None, SETTLE_S) == "minilm-amd-epyc-zen-1"
    assert common.machine_stem("gemm") == "gemm-amd-epyc-zen-1"
    assert common.machine_stem("mnist_mlp", 1, 0.0) == "mnist_mlp-amd-epyc-zen-1-1thread-settle0s"


def test_a_forced_lower_path_is_recorded_and_named_beside_the_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import common
    from rlx_core.targets.cpu import identity, isa

    monkeypatch.setattr(identity, "cpu_model", lambda: "AMD EPYC (Zen 1)")
    forced = isa.make({"avx2", "fma"} | set(isa._AVX512_CORE), "avx2", "x86_64")
    own = isa.make({"avx2", "fma"} | set(isa._AVX512_CORE), "", "x86_64")
    assert (forced.family, forced.forced, own.family, own.forced) == (
        "avx2", True, "avx512", False)
    monkeypatch.setattr(isa, "detect", lambda: forced)
    assert common.machine()["rlx_path"] == "avx2" and common.machine()["rlx_path_forced"]
    assert common.machine_stem("minilm", None, SETTLE_S) == "minilm-amd-epyc-zen-1-isa-avx2"
    assert common.machine_stem("gemm", 2) == "gemm-amd-epyc-zen-1-isa-avx2-2thread"
    monkeypatch.setattr(isa, "detect", lambda: own)
    assert not common.machine()["rlx_path_forced"]
    assert common.machine_stem("gemm") == "gemm-amd-epyc-zen-1"


def test_cpu_slug_drops_trademarks_and_filler_words() -> None:
    from benchmarks.common import cpu_slug

    assert cpu_slug("Intel(R) Xeon(R) Processor (Emerald Rapids)") == "intel-xeon-emerald-rapids"
    assert cpu_slug("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz") \
        == "intel-xeon-platinum-8481c-2-70ghz"
    assert cpu_slug("AMD EPYC 7B13") == "amd-epyc-7b13" and cpu_slug("") == "cpu"


def test_save_run_names_thread_clock_runs_apart_and_finish_run_stamps_the_end(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from benchmarks import common
    from rlx_core.targets.cpu import identity

    monkeypatch.setattr(identity, "cpu_model", lambda: "AMD EPYC (Zen 1)")
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    js, md = common.save_run("decode", "thread", {"x": 1}, "# t\n")
    assert js.name == "decode-amd-epyc-zen-1-threadcpu.json" and md.read_text() == "# t\n"
    assert common.save_run("gemm", "wall", {}, "")[0].name == "gemm-amd-epyc-zen-1.json"
    assert common.save_run("decode", "wall", {}, "", threads=2)[0].name \
        == "decode-amd-epyc-zen-1-2thread.json"
    run = common.Run({"threads": "1"}, None, {"load_average_1m": 1.0})
    assert "load_average_end" in common.finish_run(run)


def test_a_machine_stamp_records_the_placement_at_the_start_and_end_of_the_run() -> None:
    """Every results file's machine info: the CPUs' placement (the round-trip probe) as the
    run started, and again at its end (end_of_run, finish_run), in the JSON and the stamp."""
    from benchmarks import common
    from rlx_core.targets.cpu.placement import SHARED, SPLIT, UNKNOWN

    info = common.machine()
    start = info["placement"]
    assert start["kind"] in (SHARED, SPLIT, UNKNOWN) and start["reason"]
    assert start == common.start_placement().to_json()  # one start per run, not per stamp
    assert "placement_end" not in info
    assert common.end_of_run(info) is info
    end = info["placement_end"]
    assert end["kind"] in (SHARED, SPLIT, UNKNOWN) and "load_average_end" in info
    if len(os.sched_getaffinity(0)) >= 2:
        assert start["round_trip_ns"] > 0 and end["round_trip_ns"] > 0
    line = common.stamp(info)
    assert f"CPUs on a {common.describe_placement(start)} at the start, " \
        f"{common.describe_placement(end)} at the end" in line
    assert "placement_end" in common.finish_run(common.Run({}, None, dict(info)))
    # a stamp written before placements were kept reads as before
    old = {k: v for k, v in info.items() if not k.startswith("placement")}
    assert "CPUs on" not in common.stamp(old) and common.placement_text(old) == ""
    # the line bench_decode prints after start_run's placement line: the rest, no placement
    assert common.stamp(info, placement=False) == common.stamp(old)
    assert common.placement_line() == \
        f"placement at the start: {common.start_placement().describe()}"


def test_start_run_without_torch_or_a_thread_limit_only_stamps_the_machine(
        capsys: pytest.CaptureFixture[str]) -> None:
    """bench_fpga's set-up: no pools touched, no PyTorch, the CPU and ISA stamped, and the
    placement printed as the run starts (as bench_minilm prints it)."""
    from benchmarks import common

    run = common.start_run(None, with_torch=False)
    assert run.torch is None and run.limits == {"threads": "default"}
    assert run.machine["cpu"] and run.machine["isa"] == common.isa()
    assert capsys.readouterr().out.splitlines() == [common.placement_line()]


def test_in_fixed_batches_pads_the_last_chunk_and_drops_the_padding() -> None:
    np = pytest.importorskip("numpy")
    x = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    seen: list[int] = []

    def fn(b):  # two outputs, like a model returning logits and predictions
        seen.append(len(b))
        return b * 2, b.sum(-1)

    doubled, sums = in_fixed_batches(fn, x, 3)
    assert seen == [3, 3, 3]  # every call gets exactly the compiled batch
    np.testing.assert_array_equal(doubled, x * 2)
    np.testing.assert_array_equal(sums, x.sum(-1))
    np.testing.assert_array_equal(in_fixed_batches(lambda b: b + 1, x, 4), x + 1)


def test_floor_is_the_flops_at_the_peak_and_the_fraction_is_floor_over_time() -> None:
    from benchmarks.peak import caption, floor_fields

    got = floor_fields(0.0524, 234.0, 0.000280)  # GFLOP, GFLOP/s, seconds
    assert got["floor_s"] == pytest.approx(0.0524 / 234.0)
    assert got["rlx_fraction_of_peak"] == 0.8
    text = caption(234.0, 2, "the step's GEMM FLOPs")
    assert "234 GFLOP/s" in text and "*floor*: the step's GEMM FLOPs at that peak" in text


def test_floor_with_bytes_is_the_larger_of_flops_and_bytes_at_the_bandwidth() -> None:
    from benchmarks.peak import floor_fields

    got = floor_fields(0.01, 100.0, 0.009, gbytes=0.042, bandwidth=14.0)  # 0.1 ms vs 3 ms
    assert got["floor_s"] == got["bandwidth_floor_s"] == pytest.approx(0.003)
    assert got["rlx_over_floor"] == 3.0
    assert floor_fields(1.0, 100.0, 0.02, gbytes=0.001, bandwidth=10.0)["floor_s"] == 0.01


def test_floor_against_this_runs_peaks_beside_the_stored_ones() -> None:
    """A slowed host: the stored ceiling's floor reads rlx at 38%, this run's own at 84%."""
    from benchmarks.peak import floor_fields, fraction_text

    got = floor_fields(0.0524, 498.0, 0.000277, run_peak=225.0)
    assert got["rlx_fraction_of_peak"] == 0.38 and got["rlx_fraction_of_run_peak"] == 0.841
    assert got["run_floor_s"] == pytest.approx(0.0524 / 225.0)
    assert "rlx_over_run_floor" not in got  # no bytes given: a FLOP floor only
    assert fraction_text(got) == "38% (84%)"
    assert fraction_text(floor_fields(0.0524, 498.0, 0.000277)) == "38%"
    small = floor_fields(0.01, 100.0, 0.009, 0.042, 14.0, run_peak=45.0, run_bandwidth=7.0)
    assert small["run_floor_s"] == pytest.approx(0.006)  # the bytes at this run's bandwidth
    assert (small["rlx_over_floor"], small["rlx_over_run_floor"]) == (3.0, 1.5)


def test_caption_names_this_runs_peaks_given_a_peak_run() -> None:
    from benchmarks.peak import caption
    from rlx_core.targets.cpu.peaks import PeakRun, Peaks

    kept = Peaks(498.0, 48.0, 2, "test", "then", 0.2, 0.0, True)
    now = Peaks(216.0, 19.4, 2, "test", "now", 1.0, 0.1, True)
    text = caption(498.0, 2, "the step's GEMM FLOPs", PeakRun(now, kept))
    assert "498 GFLOP/s" in text and "this run 216 GFLOP/s" in text
    assert "host at 0.43 (FMA)" in text and "in brackets of this run's own" in text


def test_bandwidth_probe_measures_something() -> None:
    from rlx_core.targets.cpu.target import CpuTarget

    ok, why = CpuTarget().available()
    if not ok:
        pytest.skip(f"no C toolchain: {why}")
    from benchmarks.peak import read_bandwidth

    bw = read_bandwidth(1, mbytes=32, rounds=1)
    assert 0.1 < bw < 10_000  # GB/s: a number a machine can have, not a timer glitch


def test_fma_peak_probe_runs_on_one_and_two_threads() -> None:
    from rlx_core.targets.cpu.toolchain import compiler_status

    ok, why = compiler_status()
    if not ok:
        pytest.skip(f"no C compiler: {why}")
    from benchmarks.peak import fma_peak

    before = _thread_masks()
    one = fma_peak(1, rounds=1, steps=200_000, seconds=0.0)
    assert one > 0.1  # GFLOP/s: any machine that runs the suite does far more
    two = fma_peak(2, rounds=1, steps=200_000, seconds=0.0)
    assert two > 0.1
    # the probe pins each thread while it measures; the pool's threads get their masks back
    after = _thread_masks()
    assert all(after[t] == before.get(t, set(os.sched_getaffinity(0))) for t in after), after


def _thread_masks() -> dict[int, set[int]]:
    """CPU affinity of every thread of this process (threads that end meanwhile left out)."""
    masks = {}
    for t in os.listdir("/proc/self/task"):
        try:
            masks[int(t)] = set(os.sched_getaffinity(int(t)))
        except OSError:
            pass
    return masks


def test_interleaved_can_also_report_each_peer_s_thread_cpu_time() -> None:
    from benchmarks.common import interleaved

    cpu: dict = {}
    wall = interleaved({"a": lambda: sum(range(200)), "b": lambda: None}, runs=6, warmup=1,
                       block=2, thread_cpu=cpu)
    assert set(cpu) == set(wall) == {"a", "b"}
    assert all(cpu[n].runs == wall[n].runs == 6 and cpu[n].p50 >= 0.0 for n in cpu)


def test_p10_p90_stay_within_the_observed_calls() -> None:
    """Three calls gave a negative p10 with statistics' default (exclusive) quantiles."""
    s = Stats.of([19.6, 95.1, 172.8])
    assert 19.6 <= s.p10 <= s.p50 <= s.p90 <= 172.8


def test_bench_cnn_keeps_the_hand_written_notes_of_its_results_file(tmp_path) -> None:
    from benchmarks.bench_cnn import NOTES, kept_notes

    md = tmp_path / "cnn.md"
    assert kept_notes(md).startswith(NOTES + "\n")  # no file yet: a fresh heading
    md.write_text(f"# table\n\n| a |\n|---|\n| 1 |\n\n{NOTES}\n\n- a note\n- another\n")
    assert kept_notes(md) == f"{NOTES}\n\n- a note\n- another\n"


def test_interleaved_varies_who_comes_before_each_peer_and_reports_each_turn() -> None:
    """vary_order: odd turns rotate the reversed order, so a peer does not always follow the
    same one (a rotation alone keeps the cyclic order); on_turn sees each turn's previous peer,
    once before its timed calls (None) and once after (their times)."""
    from benchmarks.common import interleaved

    seen: list[tuple[str, str, int | None]] = []
    stats = interleaved({n: (lambda: None) for n in "abc"}, runs=4, warmup=0, block=2,
                        gap_s=0.001, vary_order=True,
                        on_turn=lambda n, prev, ts: seen.append((n, prev, None if ts is None
                                                                 else len(ts))))
    assert all(s.runs == 4 for s in stats.values())
    assert seen[0::2] == [(n, p, None) for n, p, _ in seen[1::2]]  # before, then after
    after = [(n, p) for n, p, k in seen if k is not None]
    assert all(k == 2 for *_, k in seen[1::2])
    assert after == [("a", ""), ("b", "a"), ("c", "b"), ("b", "c"), ("a", "b"), ("c", "a")]
    assert {p for n, p in after if n == "a"} == {"", "b"} and {p for n, p in after
                                                               if n == "b"} == {"a", "c"}


def test_isa_names_the_dot_product_and_amx_extensions() -> None:
    """A results file's ISA names AMX, AVX512-BF16/FP16 and AVX-VNNI where the CPU has them
    (an Emerald Rapids' flags), and nothing it lacks (a Zen 1's)."""
    from benchmarks import common
    from rlx_core.targets.cpu.isa import VECTOR_FLAGS, cpu_flags, vector_isa

    emerald = ("fpu sse4_2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx_vnni "
               "avx512_bf16 avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8").split()
    got = vector_isa(emerald).split()
    for flag in ("amx_tile", "amx_int8", "amx_bf16", "avx512_bf16", "avx512_fp16", "avx_vnni",
                 "avx512_vnni", "avx512f", "avx2", "fma"):
        assert flag in got, flag
    assert "avx512cd" not in got and "fpu" not in got  # only the vector-ISA flags
    assert vector_isa("fpu sse4_2 avx avx2 fma".split()) == "avx2 fma sse4_2"  # a Zen 1
    assert vector_isa(["fpu"]) == "none of avx2/avx512"
    have = cpu_flags()
    if have:  # this CPU's, as the results files and the test reports stamp it
        assert set(common.isa().split()) == have & set(VECTOR_FLAGS)
        from rlx_core.testing.report import isa as report_isa

        assert report_isa() == common.isa()


def test_mlp_profile_lists_every_kernel_of_the_step_and_the_rest(capsys) -> None:
    from rlx_core.targets.cpu.toolchain import compiler_status

    ok, why = compiler_status()
    if not ok:
        pytest.skip(f"no C compiler: {why}")
    from benchmarks.profile_mnist_mlp import main

    assert main(["--sizes", "784,32,10", "--batch", "32", "--runs", "40", "--no-write"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| k")]
    # 784-32-10: the forward and weight-gradient GEMMs and the loss's small kernels, each once
    assert len(rows) >= 10 and len({r.split("|")[1] for r in rows}) == len(rows)
    assert "rlx-sgemm" in out and "the step outside these" in out
    assert "img/s" in out and "of the " in out and "GFLOP/s FMA peak" in out


def test_a_results_file_records_the_command_as_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """common.command_text: every argument as given (bench_decode's file said `python
    benchmarks/bench_decode.py` for a --sizes small run; bench_gemm's listed only the flags its
    writer added, each beside a copy of its default), quoted for a shell; None reads sys.argv
    and an empty list is no arguments (bench_contention's ``argv or sys.argv[1:]`` took the
    test runner's)."""
    from benchmarks.common import command_text

    assert command_text("benchmarks/bench_gemm.py", ["--threads", "2", "--runs", "80"]) == \
        "python benchmarks/bench_gemm.py --threads 2 --runs 80"
    assert command_text("benchmarks/bench_decode.py", ["--sizes", "small", "--tag", "a b"]) == \
        "python benchmarks/bench_decode.py --sizes small --tag 'a b'"
    monkeypatch.setattr(sys, "argv", ["bench_contention.py", "--runs", "40"])
    assert command_text("benchmarks/bench_contention.py", None) == \
        "python benchmarks/bench_contention.py --runs 40"
    assert command_text("benchmarks/bench_contention.py", []) == \
        "python benchmarks/bench_contention.py"
