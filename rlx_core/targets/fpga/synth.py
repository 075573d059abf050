"""Synthesis report of a Verilog project: yosys ``synth_ice40`` + ``nextpnr-ice40`` place and
route (LUTs, flip-flops, block RAMs, DSPs, fmax), and yosys's generic ``synth`` cell count."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlx_core.targets.fpga.errors import SynthesisError
from rlx_core.targets.fpga.toolchain import find_tool
from rlx_core.targets.fpga.verilog import Project
from rlx_core.targets.tool_process import run_group

DEVICE = ("hx8k", "ct256")  # iCE40 HX8K: 7,680 LUT4 + FF, 32 x 4 kbit BRAM, no DSP


@dataclass
class SynthReport:
    """What yosys and nextpnr reported for a datapath: the resources used against the device's
    and the maximum clock."""

    device: str
    luts: int
    ffs: int
    brams: int
    dsps: int
    fmax_mhz: float
    lc_used: int
    lc_total: int
    bram_total: int
    generic_cells: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _run(cmd: list[str], cwd: Path, what: str, timeout: float) -> str:
    try:
        proc = run_group(cmd, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SynthesisError(f"{what} did not finish in {timeout:.0f} s",
                             hint="synthesize a smaller datapath (fewer MAC lanes or "
                                  "smaller layers)") from None
    if proc.returncode != 0:
        lines = (proc.stdout + proc.stderr).splitlines()
        tail = "\n".join([ln for ln in lines if "ERROR" in ln][:5] or lines[-15:])
        raise SynthesisError(f"{what} failed:\n{tail}",
                             hint="a design larger than the device fails to place: fewer MAC "
                                  "lanes or smaller layers (the weights must fit the BRAM)")
    return proc.stdout + proc.stderr


def _count(stat: str, pattern: str) -> int:
    return sum(int(n) for n in re.findall(rf"^\s+(\d+)\s+{pattern}\s*$", stat, flags=re.M)) or \
        sum(int(n) for n in re.findall(rf"^\s+{pattern}\s+(\d+)\s*$", stat, flags=re.M))


def synthesize(project: Project, timeout: float = 900) -> SynthReport:
    """Synthesize, place and route ``project`` for the iCE40 HX8K (and count generic cells)."""
    tools = {t: find_tool(t) for t in ("yosys", "nextpnr-ice40")}
    for path, why in tools.values():
        if path is None:
            raise SynthesisError(f"cannot synthesize: {why}",
                                 hint="apt-get install yosys nextpnr-ice40")
    yosys, nextpnr = tools["yosys"][0], tools["nextpnr-ice40"][0]
    work = Path(tempfile.mkdtemp(prefix="rlx-synth-"))
    try:
        for name, text in project.files.items():
            if not name.endswith(".cpp"):
                (work / name).write_text(text)
        srcs = "read_verilog -defer rlx_fc_layer.v rlx_top.v; hierarchy -top rlx_top"
        log = _run([yosys, "-p", f"{srcs}; synth_ice40 -top rlx_top -json top.json; stat"],
                   work, "yosys synth_ice40", timeout)
        stat = log[log.rfind("Printing statistics"):]
        luts = _count(stat, "SB_LUT4")
        ffs = _count(stat, r"SB_DFF\w*")
        dsps = _count(stat, "SB_MAC16")
        pnr = _run([nextpnr, f"--{DEVICE[0]}", "--package", DEVICE[1], "--json", "top.json",
                    "--asc", "top.asc", "--freq", "12", "--timing-allow-fail",
                    "--seed", "1"], work, "nextpnr-ice40", timeout)
        lc = re.search(r"ICESTORM_LC:\s+(\d+)/\s*(\d+)", pnr)
        ram = re.search(r"ICESTORM_RAM:\s+(\d+)/\s*(\d+)", pnr)
        fmax = re.findall(r"Max frequency for clock\s+'[^']*':\s+([\d.]+) MHz", pnr)
        glog = _run([yosys, "-p", f"{srcs}; synth -flatten -top rlx_top; stat"], work,
                    "yosys synth (generic)", timeout)
        gstat = glog[glog.rfind("Printing statistics"):]
        cells = re.search(r"Number of cells:\s+(\d+)", gstat)
        return SynthReport(f"iCE40 {DEVICE[0].upper()} ({DEVICE[1]})", luts, ffs,
                           int(ram.group(1)) if ram else 0, dsps,
                           float(fmax[-1]) if fmax else 0.0,
                           int(lc.group(1)) if lc else 0, int(lc.group(2)) if lc else 0,
                           int(ram.group(2)) if ram else 0, int(cells.group(1)) if cells else 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
