"""cortex-m's and fpga's build caches keep folder entries (rlx_core/targets/verified_files.py):
the files a hit runs are recorded inside the folder before it is renamed into place and checked
on every hit; a damaged or record-less folder is quarantined whole and built again, and the
``build-*`` folders a killed build left are deleted once nothing in them changed for
``STALE_TMP_SECONDS``. The toolchains are faked (a shell script that writes the artefact and
counts its runs), so these run without arm-none-eabi-gcc or verilator."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlx_core.targets import build_cache, verified_files
from rlx_core.targets.cortex_m import toolchain as cortex_m
from rlx_core.targets.cortex_m.boards import BOARDS
from rlx_core.targets.fpga import toolchain as fpga
from rlx_core.targets.fpga.verilog import Project

STALE = 2 * verified_files.STALE_TMP_SECONDS


pytestmark = pytest.mark.usefixtures("fresh_verified")


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _fake_gcc(tools: Path, runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An arm-none-eabi-gcc that writes the ELF named after ``-o`` and a size tool beside it."""
    gcc = _script(tools / "arm-none-eabi-gcc", f"""
[ "$1" = --version ] && {{ echo "fake-gcc 1.0 {tools}"; exit 0; }}
echo run >> {runs}
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
printf 'ELF-IMAGE-%0100d' 7 > "$out"
""")
    _script(tools / "arm-none-eabi-size", """
echo "   text    data     bss     dec     hex filename"
echo "    100       8      64     172      ac $1"
""")
    monkeypatch.setattr(cortex_m, "find_gcc", lambda: (gcc, ""))


def _fake_verilator(tools: Path, runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verilator that writes ``obj/Vrlx_top`` (the -Mdir) in the folder it runs in."""
    tool = _script(tools / "verilator", f"""
[ "$1" = --version ] && {{ echo "Verilator fake {tools}"; exit 0; }}
echo run >> {runs}
mkdir -p obj && printf 'SIMULATOR-%0100d' 7 > obj/Vrlx_top && chmod 755 obj/Vrlx_top
""")
    monkeypatch.setattr(fpga, "find_tool", lambda name, env="": (tool, ""))


def _build_cortex_m() -> tuple[Path, bool]:
    elf = cortex_m.build_elf("int model;\n", "#define M 1\n", BOARDS["mps2-an386"])
    assert (elf.text, elf.data, elf.bss) == (100, 8, 64)
    return elf.path, elf.cache_hit


def _build_fpga() -> tuple[Path, bool]:
    project = Project({"rlx_top.v": "module rlx_top; endmodule\n", "rlx_fc_layer.v": "\n",
                       "tb.cpp": "int main() {}\n", "w0.hex": "01\n02\n", "b0.hex": "0a\n"},
                      in_bytes=4, out_words=1, parallelism=(1,))
    folder, hit = fpga.build_simulator(project)
    return folder / "obj" / "Vrlx_top", hit


TARGETS: dict[str, tuple[Callable, Callable[[], tuple[Path, bool]]]] = {
    "cortex-m": (_fake_gcc, _build_cortex_m), "fpga": (_fake_verilator, _build_fpga)}


@pytest.fixture(params=sorted(TARGETS))
def target(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """(build, runs file, cache folder) for one target with its toolchain faked."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    fake, build = TARGETS[request.param]
    (tmp_path / "tools").mkdir()
    runs = tmp_path / "runs"
    fake(tmp_path / "tools", runs, monkeypatch)
    return build, runs, tmp_path / "cache" / request.param


def _runs(runs: Path) -> int:
    return len(runs.read_text().split()) if runs.exists() else 0


def test_a_build_is_published_with_its_records_and_hits_in_a_new_process(target) -> None:
    build, runs, root = target
    artefact, hit = build()
    assert not hit and _runs(runs) == 1
    assert artefact.read_bytes().endswith(b"7")
    assert artefact.with_name(artefact.name + verified_files.RECORD).is_file()
    assert not list(root.glob("build-*"))  # renamed into place
    verified_files.forget()  # as another process: hashed again, found whole
    assert build() == (artefact, True) and _runs(runs) == 1


@pytest.mark.parametrize("damage", ["truncated", "same-size", "missing"])
def test_a_damaged_entry_is_quarantined_and_built_again(damage: str, target) -> None:
    build, runs, root = target
    artefact, _ = build()
    good = artefact.read_bytes()
    if damage == "truncated":
        artefact.write_bytes(good[:10])
    elif damage == "same-size":
        artefact.write_bytes(b"X" * len(good))
    else:
        artefact.unlink()
    verified_files.forget()
    assert build() == (artefact, False) and _runs(runs) == 2
    assert artefact.read_bytes() == good
    (why,) = (root / "quarantine").glob("*.why")
    name = "firmware.elf" if artefact.name == "firmware.elf" else "obj/Vrlx_top"
    assert why.read_text().startswith(f"{name}: ")
    assert (root / "quarantine" / why.name.removesuffix(".why")).is_dir()  # kept whole
    verified_files.forget()
    assert build() == (artefact, True) and _runs(runs) == 2


def test_a_record_less_entry_is_rebuilt_once_then_hits(target) -> None:
    """An entry built before records existed (its folder holds no .sha256) is rebuilt once."""
    build, runs, root = target
    artefact, _ = build()
    folder = artefact.parent if artefact.name == "firmware.elf" else artefact.parents[1]
    for record in folder.rglob("*" + verified_files.RECORD):
        record.unlink()
    verified_files.forget()
    assert build() == (artefact, False) and _runs(runs) == 2
    assert "no valid record" in next((root / "quarantine").glob("*.why")).read_text()
    for _ in range(2):
        verified_files.forget()
        assert build() == (artefact, True) and _runs(runs) == 2


def test_a_damaged_rom_image_of_the_fpga_simulator_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulator reads its weights ($readmemh) from the folder's .hex files at run time:
    they are recorded and checked as the executable is."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tools").mkdir()
    _fake_verilator(tmp_path / "tools", tmp_path / "runs", monkeypatch)
    sim, _ = _build_fpga()
    (sim.parents[1] / "w0.hex").write_text("ff\n02\n")
    verified_files.forget()
    assert _build_fpga() == (sim, False) and _runs(tmp_path / "runs") == 2
    assert (sim.parents[1] / "w0.hex").read_text() == "01\n02\n"


@pytest.mark.parametrize("name", ["cortex-m", "fpga"])
def test_a_stale_build_folder_goes_and_a_fresh_one_stays(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the folder's first use in a process: a build folder nothing was written to for
    STALE_TMP_SECONDS is a killed build's; one with a recent file (a build running in another
    process, its folder made long ago) stays, as does an old published entry."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    root = tmp_path / name
    old = time.time() - STALE
    stale, running, fresh, entry = (root / "build-dead", root / "build-slow", root / "build-new",
                                    root / "0123abcd")
    for folder in (stale, running, fresh, entry):
        (folder / "obj").mkdir(parents=True)
        (folder / "obj" / "a.o").write_bytes(b"o")
        (folder / "main.c").write_text("int x;\n")
    for folder in (stale, running, entry):
        for p in (folder / "obj" / "a.o", folder / "obj", folder / "main.c", folder):
            os.utime(p, (old, old))
    (running / "obj" / "b.o").write_bytes(b"o")  # written now: the build is alive
    os.utime(running / "obj", (old, old))
    assert build_cache.target_cache_dir(name) == root
    assert not stale.exists()
    assert running.is_dir() and fresh.is_dir() and entry.is_dir()
