"""Datapath -> a Verilog project: ``rlx_top.v`` (stream in, layers, stream out), the layer
module (vsrc/rlx_fc_layer.v, one instance per layer) and the ROM init files per layer.

``rlx_top`` takes one input byte a beat (``s_valid``/``s_ready``/``s_data``) into a buffer,
starts layer 0, each layer's ``done`` starts the next (buffers between layers hold one
8-bit activation per address), and streams out either every i32 word of the last layer or,
with an argmax, the index of the first largest (``m_valid``/``m_ready``/``m_data``,
``m_last`` on the final word). One image at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx_core.targets.fpga.layers import Datapath, Layer

VSRC = Path(__file__).resolve().parent / "vsrc"


@dataclass
class Project:
    """A generated Verilog project: its files' texts, the stream widths, the lanes per layer
    and whether the MAC products are registered."""

    files: dict[str, str]  # name -> text (Verilog, hex init files, testbench)
    in_bytes: int
    out_words: int
    parallelism: tuple[int, ...]
    pipeline: bool = False  # the MAC lanes' products registered (PIPE = 1)

    @property
    def weight_bytes(self) -> int:
        return sum(len(t.split()) for n, t in self.files.items() if n.startswith("w"))


RQ_CYCLES = 36  # the serial requantize unit per output: load, 32 multiply steps, 3 stages


def layer_cycles(layer: Layer, p: int, pipeline: bool) -> int:
    """Cycles from the layer's start to its done, as vsrc/rlx_fc_layer.v runs: one element a
    cycle, a group's last element held until the requantize unit has emptied the previous
    group (RQ_CYCLES an output, or one for logits), then the last group's outputs."""
    lat = 3 + int(pipeline)  # issue -> read -> (product) -> sum -> hand-over
    last = free = 0  # when the previous group's last element issued; when the unit is free
    for g in range(-(-layer.n // p)):
        outs = min(p, layer.n - g * p) * (RQ_CYCLES if layer.requant else 1)
        last = max(last + layer.k, free)
        free = last + lat + outs
    return free + 3


def _bits(n: int) -> int:
    return max(1, (max(n, 2) - 1).bit_length())


def _hex_words(rows: list[list[int]], bits: int) -> str:
    """One word a line, lane 0 in the lowest bits (two's complement per lane)."""
    mask = (1 << bits) - 1
    lines = []
    for lanes in rows:
        word = 0
        for i, v in enumerate(lanes):
            word |= (int(v) & mask) << (bits * i)
        lines.append(f"{word:0{(bits * len(lanes) + 3) // 4}x}")
    return "\n".join(lines) + "\n"


def _layer_files(i: int, layer: Layer, p: int) -> dict[str, str]:
    g = -(-layer.n // p)

    def lane_rows(values: Any, per_k: bool) -> list[list[int]]:
        rows = []
        for grp in range(g):
            ids = [grp * p + lane for lane in range(p)]
            if per_k:
                for k in range(layer.k):
                    rows.append([int(values[n, k]) if n < layer.n else 0 for n in ids])
            else:
                rows.append([int(values[n]) if n < layer.n else 0 for n in ids])
        return rows

    files = {f"w{i}.hex": _hex_words(lane_rows(layer.weight, True), layer.weight_bits),
             f"b{i}.hex": _hex_words(lane_rows(layer.bias, False), 32)}
    if layer.requant:
        files[f"m{i}.hex"] = _hex_words(lane_rows(layer.multiplier, False), 32)
        files[f"s{i}.hex"] = _hex_words(lane_rows(layer.shift, False), 8)
    return files


def _instance(i: int, layer: Layer, p: int, last: bool, pipeline: bool) -> str:
    kw, nw = _bits(layer.k), _bits(layer.n)
    params = [f".K({layer.k})", f".N({layer.n})", f".P({p})", f".WB({layer.weight_bits})",
              f".PIPE({int(pipeline)})",
              f".XS({int(layer.x_signed)})",
              f".REQ({int(layer.requant)})", f".ZP({layer.zero_point})", f".LO({layer.lo})",
              f".HI({layer.hi})", f'.W_FILE("w{i}.hex")', f'.B_FILE("b{i}.hex")',
              f'.M_FILE("m{i}.hex")', f'.S_FILE("s{i}.hex")', f".KW({kw})", f".NW({nw})"]
    dst = "obuf" if last else f"buf{i + 1}"
    data = "y_data" if last else "y_data[7:0]"
    return f"""
    // layer {i}: {layer.k} -> {layer.n}, {p} MAC lanes, {layer.weight_bits}-bit weights{', requantized' if layer.requant else ''}
    wire [{kw - 1}:0] ra{i};
    reg  [7:0] rd{i};
    wire y_we{i};
    wire [{nw - 1}:0] y_addr{i};
    wire [31:0] y_data{i};
    always @(posedge clk) rd{i} <= buf{i}[ra{i}];
    always @(posedge clk) if (y_we{i}) {dst}[y_addr{i}] <= {data.replace('y_data', f'y_data{i}')};
    rlx_fc_layer #({', '.join(params)}) layer{i} (
        .clk(clk), .rst(rst), .start(start{i}), .done(done{i}), .x_addr(ra{i}), .x_data(rd{i}),
        .y_we(y_we{i}), .y_addr(y_addr{i}), .y_data(y_data{i}));
"""


def render(dp: Datapath, parallelism: int | tuple[int, ...], pipeline: bool = False) -> Project:
    """The project for ``dp`` with ``parallelism`` MAC lanes (one value, or one per layer),
    its MAC lanes pipelined (products registered) or not."""
    n = len(dp.layers)
    ps = tuple(parallelism) if isinstance(parallelism, tuple) else (parallelism,) * n
    ps = tuple(max(1, min(p, layer.n)) for p, layer in zip(ps, dp.layers, strict=True))
    files: dict[str, str] = {"rlx_fc_layer.v": (VSRC / "rlx_fc_layer.v").read_text(),
                             "tb.cpp": (VSRC / "tb.cpp").read_text()}
    for i, (layer, p) in enumerate(zip(dp.layers, ps, strict=True)):
        files.update(_layer_files(i, layer, p))
    k0, n_out = dp.layers[0].k, dp.layers[-1].n
    out_words = 1 if dp.argmax else n_out
    bufs = "\n".join(f"    reg [7:0] buf{i} [0:{layer.k - 1}];" for i, layer in
                     enumerate(dp.layers))
    starts = "\n".join(f"    wire done{i};\n    wire start{i} = "
                       + ("start_run;" if i == 0 else f"done{i - 1};")
                       for i in range(n))
    body = "".join(_instance(i, layer, p, i == n - 1, pipeline)
                   for i, (layer, p) in enumerate(zip(dp.layers, ps, strict=True)))
    ow, kw = _bits(n_out + 1), _bits(k0 + 1)
    top = f"""// generated by rlx (targets/fpga): {' -> '.join(str(x.k) for x in dp.layers)} -> {n_out}, MAC lanes {list(ps)}
`default_nettype none
module rlx_top (
    input  wire clk,
    input  wire rst,
    input  wire s_valid,
    output wire s_ready,
    input  wire [7:0] s_data,
    output wire m_valid,
    input  wire m_ready,
    output wire [31:0] m_data,
    output wire m_last
);
{bufs}
    reg [31:0] obuf [0:{n_out - 1}];
    localparam [1:0] LOAD = 0, RUN = 1, SCAN = 2, OUT = 3;
    reg [1:0] state;
    reg [{kw - 1}:0] icount;
    reg [{ow - 1}:0] ocount;
    reg start_run;
{starts}
    assign s_ready = state == LOAD;
    always @(posedge clk) if (s_valid && s_ready) buf0[icount] <= s_data;
{body}
    // argmax: the first index of the largest signed word (numpy's rule)
    reg [{ow - 1}:0] best;
    reg signed [31:0] best_v;
    localparam integer ARGMAX = {int(dp.argmax)};
    assign m_valid = state == OUT;
    assign m_data = ARGMAX ? {{{{{32 - ow}{{1'b0}}}}, best}} : obuf[ocount];
    assign m_last = ocount == {out_words - 1};
    always @(posedge clk) begin
        start_run <= 1'b0;
        if (rst) begin
            state <= LOAD;
            icount <= 0;
        end else case (state)
            LOAD: if (s_valid) begin
                if (icount == {k0 - 1}) begin
                    icount <= 0;
                    start_run <= 1'b1;
                    state <= RUN;
                end else icount <= icount + 1;
            end
            RUN: if (done{n - 1}) begin
                ocount <= 0;
                best <= 0;
                best_v <= obuf[0];
                state <= ARGMAX ? SCAN : OUT;
            end
            SCAN: begin
                if ($signed(obuf[ocount]) > best_v) begin
                    best <= ocount;
                    best_v <= obuf[ocount];
                end
                if (ocount == {n_out - 1}) begin
                    ocount <= 0;
                    state <= OUT;
                end else ocount <= ocount + 1;
            end
            OUT: if (m_ready) begin
                if (ocount == {out_words - 1}) state <= LOAD;
                else ocount <= ocount + 1;
            end
        endcase
    end
endmodule
`default_nettype wire
"""
    files["rlx_top.v"] = top
    return Project(files, k0, out_words, ps, pipeline)
