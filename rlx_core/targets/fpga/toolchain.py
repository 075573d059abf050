"""Verilog project -> a Verilator simulator binary (cached), and the tools' discovery.

One build per (project files, Verilator version), cached on disk under their sha256 and
written through a temporary folder + ``os.replace``, the records of the simulator and its ROM
images inside it, checked on a hit (a damaged or record-less entry is quarantined and built
again: ``verified_files``' folder entries). ``RLX_VERILATOR`` overrides the tool.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from functools import cache
from pathlib import Path

from rlx_core.targets import verified_files
from rlx_core.targets.build_cache import target_cache_dir
from rlx_core.targets.fpga.errors import SimulationBuildError
from rlx_core.targets.fpga.verilog import Project
from rlx_core.targets.tool_process import run_tool


@cache
def find_tool(name: str, env: str = "") -> tuple[str | None, str]:
    path = (os.environ.get(env) if env else None) or shutil.which(name)
    if path is None:
        pkg = {"nextpnr-ice40": "nextpnr-ice40", "icepack": "fpga-icestorm"}.get(name, name)
        return None, f"{name} is not installed (Debian: {pkg})"
    return path, ""


@cache
def tool_version(path: str) -> str:
    return run_tool([path, "--version"], timeout=60).stdout.strip()


def cache_root() -> Path:
    """Where built simulators are kept (build_cache: ``<RLX_CACHE_DIR>/fpga``, else
    ``~/.cache/rlx/fpga``)."""
    return target_cache_dir("fpga")


def build_simulator(project: Project) -> tuple[Path, bool]:
    """(project folder holding ``obj/Vrlx_top``, cache hit); SimulationBuildError on failure."""
    verilator, why = find_tool("verilator", "RLX_VERILATOR")
    if verilator is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'fpga' is not available: {why}",
                                     hint="apt-get install verilator")
    key = hashlib.sha256("\0".join([tool_version(verilator), str(project.in_bytes),
                                    str(project.out_words)] +
                                   [f"{n}\0{t}" for n, t in sorted(project.files.items())])
                         .encode()).hexdigest()
    final = cache_root() / key[:32]
    # what a run uses: the simulator, and the ROM images it reads ($readmemh) from the folder
    artefacts = ("obj/Vrlx_top", *sorted(n for n in project.files if n.endswith(".hex")))
    if verified_files.lookup_folder(final, artefacts):
        return final, True
    tmp = verified_files.build_dir(cache_root())
    for name, text in project.files.items():
        (tmp / name).write_text(text)
    defs = f"-DRLX_IN_BYTES={project.in_bytes} -DRLX_OUT_WORDS={project.out_words}"
    cmd = [verilator, "--cc", "--exe", "--build", "-O3", "--x-assign", "fast",
           "--x-initial", "fast", "-Wall", "-Wno-fatal", "--top-module", "rlx_top",
           "-CFLAGS", f"-O2 {defs}", "-Mdir", "obj", "rlx_top.v", "rlx_fc_layer.v", "tb.cpp"]
    proc = run_tool(cmd, cwd=tmp, timeout=900, what="verilator")
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "Error" in ln]
        raise SimulationBuildError("verilator failed on the generated datapath:\n"
                                   + "\n".join(errors[:20] or proc.stderr.splitlines()[-30:]),
                                   hint="this is a bug in the generated Verilog: please report "
                                        "it with the model")
    (tmp / "verilator.log").write_text(proc.stdout + proc.stderr)
    verified_files.publish_folder(tmp, final, artefacts)
    return final, False
