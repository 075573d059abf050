"""The peaks store keeps ceilings measured on a quiet machine: a run on a busy one (which
measures less than the CPU can do) never becomes the ceiling over a quiet one, a quiet run
replaces a loaded one, and rows an older probe wrote are not trusted. No timing is asserted:
the probes are replaced by fixed numbers and the load by fixed readings."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rlx_core.targets.cpu import peaks as peaks_mod
from rlx_core.targets.cpu.peaks import (
    PROBE_VERSION,
    Peaks,
    is_quiet,
    machine_peaks,
    measure_peak_run,
    measure_peaks,
    merge,
)


def _p(gflops: float, gbps: float, quiet: bool, load: float = 0.0) -> Peaks:
    return Peaks(gflops, gbps, 2, "test", "then", load, 0.0 if quiet else 1.5, quiet)


def test_merge_keeps_the_highest_quiet_run_and_ignores_loaded_ones() -> None:
    quiet = _p(60.0, 20.0, True)
    assert merge(None, _p(5.0, 3.0, False)).gflops == 5.0  # better than nothing, labelled
    assert merge(quiet, _p(10.0, 30.0, False)) == quiet  # loaded: no change, even a higher gbps
    both = merge(quiet, _p(55.0, 22.0, True))  # a higher bandwidth once: not yet the ceiling
    assert (both.gflops, both.gbps, both.quiet) == (60.0, 20.0, True)
    again = merge(both, _p(50.0, 23.0, True))  # reached twice: 22 (kept_bandwidth)
    assert (again.gflops, again.gbps, again.gbps_top) == (60.0, 22.0, (23.0, 22.0))


def test_merge_lets_a_quiet_run_replace_a_loaded_one_even_a_higher_one() -> None:
    loaded = _p(70.0, 9.0, False, load=14.0)
    got = merge(loaded, _p(62.0, 18.0, True))
    assert (got.gflops, got.gbps, got.quiet, got.load) == (62.0, 18.0, True, 0.0)
    two = merge(loaded, _p(50.0, 12.0, False, load=20.0))  # loaded against loaded: the same
    assert (two.gflops, two.gbps, two.quiet) == (70.0, 9.0, False)


def test_the_kept_bandwidth_is_one_two_runs_reached() -> None:
    """The store's bandwidth rule on made-up readings (GB/s, every run quiet): a row's first
    run stands; a run below the ceiling lowers nothing (a slowed host, the Zen 4's low mode);
    one reading far above every other (a one-off) raises it only once a second run comes near,
    and then to that second run's rate; the FMA peak stays the highest run's."""
    def run(gbps: float, gflops: float = 200.0) -> Peaks:
        return _p(gflops, gbps, True)

    def kept(readings: list[float]) -> float:
        row = None
        for g in readings:
            row = merge(row, run(g))
        assert row is not None
        return row.gbps

    assert kept([35.0]) == 35.0
    assert kept([60.0, 35.0, 34.0, 36.0]) == 60.0  # low runs after a high one: no change
    assert kept([35.0, 63.0]) == 35.0  # the one-off: not the ceiling
    assert kept([35.0, 63.0, 34.0, 36.0]) == 36.0  # nor after more low runs
    assert kept([35.0, 63.0, 34.0, 58.0]) == 58.0  # a second run near it: the lower of the two
    assert kept([35.0, 400.0, 60.0, 61.0, 59.0]) == 61.0  # a wild one-off never the ceiling
    assert kept([35.0, 63.0, 35.0, 63.0]) == 63.0
    top = merge(merge(None, run(35.0)), run(63.0, gflops=236.0))
    assert (top.gflops, top.gbps, top.gbps_top) == (236.0, 35.0, (63.0, 35.0))
    # a row stored before the readings were kept: its gbps, the highest it had seen, stands
    legacy = _p(236.4, 63.0, True)
    assert legacy.gbps_top == () and merge(legacy, run(35.0)).gbps == 63.0
    assert merge(legacy, run(70.0)).gbps == 63.0 and merge(merge(legacy, run(70.0)),
                                                           run(66.0)).gbps == 66.0


def test_the_readings_survive_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two readings are saved with the row and read back (a one-off stays held against
    the next run in another process)."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    for gbps in (35.0, 63.0):
        _fake(monkeypatch, 200.0, gbps, 0.2)
        measure_peaks(2)
    kept = machine_peaks(2)
    assert kept is not None and (kept.gbps, kept.gbps_top) == (35.0, (63.0, 35.0))
    (row,) = json.loads((tmp_path / "peaks.json").read_text()).values()
    assert row["gbps_top"] == [63.0, 35.0]
    _fake(monkeypatch, 200.0, 60.0, 0.2)
    assert measure_peaks(2).gbps == 60.0


def test_the_bandwidth_buffer_is_far_past_the_l3_of_every_thread() -> None:
    """Each thread's share of the probe's buffer is BANDWIDTH_L3_SHARE times the L3 the OS
    reports (as if each thread had one of its own), at least BANDWIDTH_MIN_MB in all, at most
    an eighth of the memory and BANDWIDTH_MAX_MB."""
    from rlx_core.targets.cpu.peaks import (
        BANDWIDTH_L3_SHARE,
        BANDWIDTH_MAX_MB,
        BANDWIDTH_MIN_MB,
        bandwidth_mbytes,
    )

    mb, gb = 1 << 20, 1 << 30
    assert bandwidth_mbytes(1, 32 * mb, 24 * gb) == max(BANDWIDTH_MIN_MB, 32 * BANDWIDTH_L3_SHARE)
    assert bandwidth_mbytes(2, 32 * mb, 24 * gb) == 2 * 32 * BANDWIDTH_L3_SHARE  # the Zen 4: 512
    assert bandwidth_mbytes(2, 0, 0) == BANDWIDTH_MIN_MB  # no L3 reported, memory unknown
    assert bandwidth_mbytes(2, 4 * mb, 24 * gb) == BANDWIDTH_MIN_MB
    assert bandwidth_mbytes(8, 320 * mb, 64 * gb) == BANDWIDTH_MAX_MB  # sysconf's 320 MB L3
    assert bandwidth_mbytes(2, 32 * mb, 2 * gb) == 256  # an eighth of a 2 GB machine
    for threads in (1, 2, 3, 16):
        for l3 in (0, 8 * mb, 32 * mb, 96 * mb):
            got = bandwidth_mbytes(threads, l3, 1 << 40)
            assert got >= min(BANDWIDTH_MAX_MB, BANDWIDTH_L3_SHARE * threads * l3 / mb)


def test_quiet_means_other_processes_left_the_cpus_or_the_load_did() -> None:
    assert is_quiet(0.1, 25.0, 2, 2)  # measured share wins over the lagging load average
    assert not is_quiet(0.9, 0.0, 2, 2)
    assert is_quiet(-1.0, 1.0, 2, 2) and not is_quiet(-1.0, 3.0, 2, 2)
    assert not is_quiet(-1.0, -1.0, 2, 2)  # nothing known: not quiet


def test_merge_keeps_the_port_count_and_clock_of_the_row_whose_peak_won() -> None:
    """A quiet but slower run (a throttled host; two threads contending for the port probe)
    measured fma_ports=1 beside a kept 2: the kept row's peak must keep its own ports and clock."""
    fast = Peaks(249.0, 22.0, 2, "test", "quiet day", 0.2, 0.0, True, fma_ports=2, ghz=3.97)
    slow = Peaks(216.0, 19.4, 2, "test", "slow day", 1.0, 0.1, True, fma_ports=1, ghz=3.5)
    got = merge(fast, slow)
    assert (got.gflops, got.fma_ports, got.ghz, got.measured, got.load) == \
        (249.0, 2, 3.97, "quiet day", 0.2)
    assert got.gbps == 22.0
    won = merge(slow, fast)  # the faster run arriving later wins with its own fields
    assert (won.gflops, won.fma_ports, won.ghz, won.measured) == (249.0, 2, 3.97, "quiet day")
    unmeasured = Peaks(260.0, 20.0, 2, "test", "old", 0.1, 0.0, True)  # stored before ports
    assert (merge(unmeasured, slow).fma_ports, merge(unmeasured, slow).ghz) == (1, 3.5)


def _fake(monkeypatch: pytest.MonkeyPatch, gflops: float, gbps: float, load: float,
          ports: int = 2) -> None:
    monkeypatch.setattr(peaks_mod, "fma_peak", lambda n: gflops)
    monkeypatch.setattr(peaks_mod, "read_bandwidth", lambda n: gbps)
    # the port probe times one thread (g is None for n > 1): half the two threads' sum
    monkeypatch.setattr(peaks_mod, "fma_ports",
                        lambda g=None: peaks_mod.FmaPorts(ports, 3.0, 16, g or gflops / 2))
    monkeypatch.setattr(peaks_mod, "separate_cores", lambda n: True)
    monkeypatch.setattr(peaks_mod, "_cpu_seconds", lambda: None)
    monkeypatch.setattr(peaks_mod, "load_average", lambda: load)


def test_store_records_the_load_and_a_quiet_rerun_replaces_a_loaded_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    _fake(monkeypatch, 6.0, 3.0, 18.5)  # the busy session's run
    first = measure_peaks(2)
    assert not first.quiet and first.load == 18.5
    stored = json.loads((tmp_path / "peaks.json").read_text())
    (row,) = stored.values()
    assert row["load"] == 18.5 and row["quiet"] is False and row["probe"] == PROBE_VERSION
    _fake(monkeypatch, 58.0, 14.0, 0.3)
    assert measure_peaks(2).quiet
    _fake(monkeypatch, 20.0, 30.0, 25.0)  # loaded again: keeps the quiet row
    kept = machine_peaks(2)
    assert measure_peaks(2) == kept
    assert kept is not None and (kept.gflops, kept.gbps, kept.load) == (58.0, 14.0, 0.3)


def test_rows_an_older_probe_wrote_are_not_trusted(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    key = f"{peaks_mod.cpu_model()}|2"
    old = {"gflops": 6.3, "gbps": 5.6, "threads": 2, "cpu": "x", "measured": "then"}
    (tmp_path / "peaks.json").write_text(json.dumps({key: old}))
    assert machine_peaks(2) is None  # the explorer says uncalibrated instead of a bogus roof
    _fake(monkeypatch, 4.0, 2.0, 30.0)
    assert measure_peaks(2).gflops == 4.0  # replaced, not max()ed with the stale row


def test_a_floor_above_the_measured_time_says_uncalibrated() -> None:
    from benchmarks.peak import UNCALIBRATED, floor_fields, floor_text

    bogus = floor_fields(2.9, 6.3, 0.097, gbytes=0.043, bandwidth=5.6)  # MiniLM b1, bad peak
    assert bogus["floor_status"] == UNCALIBRATED and floor_text(bogus) == UNCALIBRATED
    fine = floor_fields(2.9, 60.0, 0.097, gbytes=0.043, bandwidth=14.0)
    assert fine["floor_status"] == "ok" and floor_text(fine) == f"{2.9 / 60.0 * 1e3:.2f}"


def test_fma_probe_vectors_fit_the_register_file_of_the_isa() -> None:
    """16-float vectors x 12 chains need 24 ymm registers on AVX2 (16 exist): the probe spilled
    and measured a fifth of the peak. The vector width follows the ISA compiled for."""
    src = peaks_mod.SOURCE
    assert "#elif defined(__AVX__)\n#define RLX_W 8" in src and "RLX_W * 4" in src
    assert "CHAINS 12" in src  # 12 accumulators + 2 operands <= 16 registers


def test_port_count_rounds_throughput_over_clock_and_width() -> None:
    from rlx_core.targets.cpu.peaks import count_ports

    assert count_ports(248.0, 3.97, 16) == 2  # Emerald Rapids: two 512-bit FMA ports
    assert count_ports(124.0, 3.97, 16) == 1
    # one AVX-512 port at a licence clock below the scalar one still counts one
    assert count_ports(2.8 * 32, 3.5, 16) == 1
    assert count_ports(63.5, 3.97, 8) == 1 and count_ports(127.0, 3.97, 8) == 2  # ymm
    assert count_ports(100.0, 0.0, 16) == 0  # no clock (off x86): not measured


def test_rows_stored_before_the_port_count_still_load(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    key = f"{peaks_mod.cpu_model()}|2"
    row = {"gflops": 480.0, "gbps": 9.0, "threads": 2, "cpu": "x", "measured": "then",
           "load": 0.5, "others": 0.1, "quiet": True, "probe": PROBE_VERSION}
    (tmp_path / "peaks.json").write_text(json.dumps({key: row}))
    got = machine_peaks(2)
    assert got is not None and got.gflops == 480.0 and got.fma_ports == 0
    _fake(monkeypatch, 470.0, 8.0, 0.2)
    kept = measure_peaks(2)  # quiet vs quiet: the higher peak, the new port count
    assert (kept.gflops, kept.fma_ports, kept.ghz) == (480.0, 2, 3.0)


def test_port_probe_runs_and_reports_the_vector_width_of_the_path() -> None:
    """The clock and width probes run for real (no timing asserted: the count is >= 1)."""
    from rlx_core.targets.cpu.isa import detect
    from rlx_core.targets.cpu.toolchain import compiler_status

    ok, why = compiler_status()
    if not ok:
        pytest.skip(f"no C compiler: {why}")
    got = peaks_mod.fma_ports(gflops=100.0, rounds=1, steps=2_000)
    want = {"avx512": 16, "avx2": 8, "sse": 4}.get(detect().family)
    if want is not None:
        assert got.lanes == want
        assert got.ghz > 0 and got.ports >= 1


def test_a_peak_run_reports_this_runs_measurement_beside_the_kept_ceiling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a slowed host the store keeps the quiet day's ceiling; the run's own figures and the
    ratio come back beside it (what the benchmarks print: "host at 0.44 of its stored peak")."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    _fake(monkeypatch, 498.0, 48.0, 0.2)
    first = measure_peak_run(2)
    assert first.now == first.kept and first.host_fraction == 1.0
    _fake(monkeypatch, 216.0, 19.4, 0.3, ports=1)  # quiet, but the host runs at 0.43
    run = measure_peak_run(2)
    assert (run.now.gflops, run.now.gbps, run.now.fma_ports) == (216.0, 19.4, 1)
    assert (run.kept.gflops, run.kept.gbps, run.kept.fma_ports) == (498.0, 48.0, 2)
    assert run.host_fraction == pytest.approx(216.0 / 498.0)
    assert run.bandwidth_fraction == pytest.approx(19.4 / 48.0)
    assert "host at 0.43 (FMA) and 0.40 (bandwidth) of its stored peak 498" in run.summary()
    assert run.describe().startswith(run.kept.describe())
    data = run.to_json()
    assert data["gflops"] == 498.0 and data["this_run"]["gflops"] == 216.0
    assert data["host_fraction"] == 0.434
    assert measure_peaks(2) == machine_peaks(2)  # the kept row, as before


def test_the_port_count_times_one_thread_whatever_the_thread_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads' peak over two reads low while another process shares a core: the port
    probe is given one thread's peak (its own, for n > 1), never the n-thread sum over n."""
    seen: list[float | None] = []
    monkeypatch.setattr(peaks_mod, "fma_peak", lambda n: 171.0)
    monkeypatch.setattr(peaks_mod, "read_bandwidth", lambda n: 5.0)
    monkeypatch.setattr(peaks_mod, "_cpu_seconds", lambda: None)
    monkeypatch.setattr(peaks_mod, "load_average", lambda: 0.5)

    def ports(g: float | None = None) -> peaks_mod.FmaPorts:
        seen.append(g)
        return peaks_mod.FmaPorts(2, 2.25, 16, 146.0 if g is None else g)

    monkeypatch.setattr(peaks_mod, "fma_ports", ports)
    assert peaks_mod.measure(2).fma_ports == 2 and seen == [None]
    peaks_mod.measure(1)
    assert seen == [None, 171.0]  # one thread: its own peak is the one-core figure


_AVX512_FLAGS = {"avx512f", "avx512bw", "avx512vl", "avx2", "fma"}


def _family(monkeypatch: pytest.MonkeyPatch, wanted: str) -> None:
    """This process's ISA path as on an AVX-512 CPU with RLX_CPU_ISA=``wanted``."""
    from rlx_core.targets.cpu import isa

    path = isa.make(_AVX512_FLAGS, wanted, machine="x86_64")
    monkeypatch.setattr(isa, "detect", lambda: path)


def test_a_forced_isa_family_measures_and_reads_a_row_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probes compile for the process's family, and a Zen 4 core issues one 16-float FMA a
    cycle but two 8-float ones: a run forced to AVX2 must neither read the AVX-512 row's port
    count nor merge its own into it (the AVX-512 row keeps the key rows always had)."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    _family(monkeypatch, "")
    _fake(monkeypatch, 118.0, 32.0, 0.2, ports=1)
    native = measure_peaks(1)
    assert (native.fma_ports, native.isa) == (1, "avx512")
    _family(monkeypatch, "avx2")
    assert machine_peaks(1) is None  # never measured on the AVX2 path
    _fake(monkeypatch, 119.0, 33.0, 0.2, ports=2)
    forced = measure_peaks(1)
    assert (forced.fma_ports, forced.isa, forced.gflops) == (2, "avx2", 119.0)
    stored = json.loads((tmp_path / "peaks.json").read_text())
    base = f"{peaks_mod.cpu_model()}|1"
    assert set(stored) == {base, f"{base}|avx2"}
    assert stored[base]["fma_ports"] == 1 and stored[f"{base}|avx2"]["fma_ports"] == 2
    _family(monkeypatch, "native")
    kept = machine_peaks(1)
    assert kept is not None and (kept.fma_ports, kept.isa, kept.gflops) == (1, "avx512", 118.0)
    assert "avx512 path" in kept.describe()


def test_a_row_of_unknown_family_gives_way_on_the_port_count() -> None:
    """A row stored before the family was recorded may hold a forced AVX2 run's port count (a
    Zen 4 row read 2 beside one thread's 1): a run of a known family replaces its count and
    clock even where the old row's higher peak is kept."""
    old = Peaks(236.4, 63.0, 2, "test", "then", 2.3, 0.0, True, fma_ports=2, ghz=3.69)
    new = Peaks(236.0, 60.0, 2, "test", "now", 0.3, 0.0, True, fma_ports=1, ghz=3.70,
                isa="avx512")
    got = merge(old, new)
    assert (got.gflops, got.gbps, got.measured) == (236.4, 63.0, "then")
    assert (got.fma_ports, got.ghz, got.isa) == (1, 3.70, "avx512")
    both = merge(replace(old, isa="avx512"), new)  # same family: the kept peak's own count
    assert (both.fma_ports, both.ghz) == (2, 3.69)


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts json.loads parses from now on (the store's parses, as peaks reads it)."""
    parsed: list[str] = []
    real = json.loads

    def loads(text: str, **kw: object) -> object:
        parsed.append(text)
        return real(text, **kw)

    monkeypatch.setattr(peaks_mod.json, "loads", loads)
    return parsed


def test_the_store_is_parsed_once_per_version_of_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every program render reads the port count (gemv.defines): the store is parsed again
    only when it changes, by this process's measurement or by another writer."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    parsed = _count_parses(monkeypatch)
    _fake(monkeypatch, 50.0, 10.0, 0.2)
    measure_peaks(2)
    parsed.clear()
    for _ in range(5):
        assert machine_peaks(2).gflops == 50.0
    assert len(parsed) == 1
    _fake(monkeypatch, 60.0, 12.0, 0.2)
    measure_peaks(2)  # rewritten (os.replace): the next read sees the new row
    assert machine_peaks(2).gflops == 60.0
    store = tmp_path / "peaks.json"
    rows = json.loads(store.read_text())
    rows[f"{peaks_mod.cpu_model()}|2"]["gflops"] = 70.5  # another process's longer row
    store.write_text(json.dumps(rows))
    assert machine_peaks(2).gflops == 70.5
    store.write_text("{not json")
    assert machine_peaks(2) is None


def test_a_rewrite_in_place_of_the_same_size_in_one_clock_tick_is_seen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer rewrites the store in place, the same number of bytes, within one tick
    of the file system's clock: inode, size and modification time stay as they were (here the
    time is put back by hand), yet the next read gives the new row."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    _fake(monkeypatch, 50.0, 10.0, 0.2)
    measure_peaks(2)
    assert machine_peaks(2).gflops == 50.0
    store = tmp_path / "peaks.json"
    before = store.stat()
    text = store.read_text(encoding="utf-8")
    rewritten = text.replace('"gflops": 50.0', '"gflops": 60.5')
    assert rewritten != text and len(rewritten) == len(text)
    with open(store, "r+", encoding="utf-8") as f:  # in place: the same inode
        f.write(rewritten)
    os.utime(store, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = store.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns)
    assert machine_peaks(2).gflops == 60.5


def test_a_young_store_is_compared_byte_for_byte_and_a_settled_one_by_its_stat(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the file is younger than a clock tick can tell apart (_RACY_NS), an unchanged stat
    does not prove unchanged bytes: they are read again (parsed only when they differ). Once
    read settled, the stat alone answers: no read, no parse."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    _fake(monkeypatch, 50.0, 10.0, 0.2)
    measure_peaks(2)
    store = tmp_path / "peaks.json"
    young = (1, 2, store.stat().st_size, time.time_ns(), time.time_ns())
    monkeypatch.setattr(peaks_mod, "_version", lambda path: young)
    parsed = _count_parses(monkeypatch)
    assert machine_peaks(2).gflops == 50.0
    assert machine_peaks(2).gflops == 50.0  # same bytes: read, not parsed again
    assert len(parsed) == 1
    store.write_text(store.read_text().replace('"gflops": 50.0', '"gflops": 70.5'))
    assert machine_peaks(2).gflops == 70.5  # the same stat, other bytes
    assert len(parsed) == 2
    settled = (1, 2, store.stat().st_size, 0, 0)  # written long before it is read
    monkeypatch.setattr(peaks_mod, "_version", lambda path: settled)
    assert machine_peaks(2).gflops == 70.5  # bytes read once more, the same: not parsed
    reads: list[Path] = []
    real_read = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        reads.append(self)
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    for _ in range(3):
        assert machine_peaks(2).gflops == 70.5
    assert (len(parsed), reads) == (2, [])


def test_threads_that_did_not_run_side_by_side_make_a_loaded_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads on two cores summing one core's peak (a vCPU held by the host, as a forced
    AVX2 run on the Zen 4 measured: 118 GFLOP/s beside one thread's 118) is a loaded run: it
    does not replace the quiet row. On two hyperthreads of one core the same sum is expected."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    _fake(monkeypatch, 236.0, 30.0, 0.2)
    assert measure_peaks(2).quiet
    monkeypatch.setattr(peaks_mod, "fma_ports",
                        lambda g=None: peaks_mod.FmaPorts(1, 3.7, 16, 118.0))
    monkeypatch.setattr(peaks_mod, "fma_peak", lambda n: 118.0)
    run = peaks_mod.measure(2)
    assert not run.quiet and run.load == 0.2  # the load alone would have called it quiet
    kept = measure_peaks(2)
    assert kept.gflops == 236.0 and kept.quiet
    monkeypatch.setattr(peaks_mod, "separate_cores", lambda n: False)  # hyperthread siblings
    assert peaks_mod.measure(2).quiet


def test_scaling_is_judged_only_for_threads_on_cores_of_their_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert peaks_mod.scaled(118.0, 118.0, 1)
    monkeypatch.setattr(peaks_mod, "separate_cores", lambda n: True)
    assert peaks_mod.scaled(230.0, 118.0, 2) and not peaks_mod.scaled(150.0, 118.0, 2)
    monkeypatch.setattr(peaks_mod, "separate_cores", lambda n: None)  # topology unreadable
    assert peaks_mod.scaled(118.0, 118.0, 2)


def test_separate_cores_reads_this_machines_topology() -> None:
    """On this machine: as many distinct (package, core) pairs as CPUs asked for, or None."""
    n = len(os.sched_getaffinity(0))
    got = peaks_mod.separate_cores(n)
    if got is None:
        pytest.skip("no sysfs CPU topology here")
    root = Path("/sys/devices/system/cpu")
    cores = {tuple((root / f"cpu{c}/topology/{f}").read_text().strip()
                   for f in ("physical_package_id", "core_id"))
             for c in sorted(os.sched_getaffinity(0))}
    assert got == (len(cores) == n)
    assert peaks_mod.separate_cores(n + 1) is False  # more threads than CPUs to run them


def _loop_of(asm: str, marker: str) -> list[str]:
    """The lines of the assembly loop (label to backward jump) that holds ``marker``."""
    lines = asm.splitlines()
    hit = next(i for i, line in enumerate(lines) if marker in line)
    start = max(i for i in range(hit + 1) if lines[i].endswith(":"))
    label = lines[start][:-1]
    end = next(i for i in range(hit, len(lines)) if lines[i].split()[-1:] == [label])
    return lines[start:end + 1]


@pytest.mark.parametrize("march,lanes", [("x86-64-v3", 8), ("x86-64", 4), ("x86-64-v4", 16)],
                         ids=["avx2", "sse", "avx512"])
def test_bandwidth_probe_keeps_its_sums_in_registers_on_every_isa(march: str, lanes: int,
                                                                  tmp_path: Path) -> None:
    """Version 2's 16-float sums lived on the stack under AVX2 and SSE (a store and a load per
    add): the probe read 19.6 GB/s on a Zen 4 core that streams 29-33. The streaming loop of
    each build must touch no stack slot."""
    import shutil
    import subprocess

    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to read the probe's assembly")
    src = tmp_path / "bw.c"
    src.write_text(peaks_mod.BANDWIDTH_SOURCE)
    asm = subprocess.run([cc, "-O3", "-fopenmp", "-S", "-o", "-", str(src), f"-march={march}"],
                         capture_output=True, text=True, check=True).stdout
    loop = _loop_of(asm, "addps")  # the loop that adds the buffer's vectors
    assert sum("addps" in line for line in loop) == 64 // lanes, loop  # 64 floats a step
    assert not any("%rsp" in line or "%rbp" in line for line in loop), loop


def test_rows_of_an_older_probe_stand_only_on_the_paths_it_still_measures() -> None:
    from rlx_core.targets.cpu.peaks import trusted_probe

    assert trusted_probe(PROBE_VERSION, "avx2") and trusted_probe(PROBE_VERSION, "avx512")
    assert trusted_probe(2, "avx512")  # its AVX-512 bandwidth loop is today's
    assert not trusted_probe(2, "avx2") and not trusted_probe(2, "sse")  # the spilled probe
    assert not trusted_probe(2, "") and not trusted_probe(1, "avx512")
    assert not trusted_probe(None, "avx512") and not trusted_probe("3", "avx2")
