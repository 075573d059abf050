// One fully connected int8 layer: a MAC array of P lanes (P output neurons at a time, one
// input element a cycle), weights in a ROM initialised by $readmemh (P weights a word, so a
// block RAM reads them in one cycle; WB = 4 stores weights in [-8, 7] as 4-bit fields), then
// TFLite's requantization (multiplier and shift, rounding exactly as the numpy reference) and
// relu folded into the clamp. Without REQ the i32 accumulators are written out (the logits).
//
// The requantize unit is serial, one per layer: a shift-add multiplier (32 cycles for the
// 32x32-bit product of magnitudes) and three stages of rounding, shift and clamp, about 36
// cycles an output. A finished group's accumulators move to a holding bank and the unit works
// through them while the MAC array sums the next group, so it costs cycles only where P x 36
// exceeds K (the MAC array waits before a group's last element until the unit is free). A
// combinational 32x32 multiply with 64-bit shifts per layer was 4-5 thousand iCE40 LUTs;
// this unit is a few hundred.
//
// PIPE = 1 registers the lane products before the accumulators (one more cycle a group), so
// the 8x8 multiply and the 32-bit add no longer share a cycle.
//
// The ROM read and the input buffer read take one cycle (block RAM): element k's address is
// issued, its weight word and input byte arrive the next cycle, and (PIPE) its products the
// one after; valid bits travel with them, so a stalled issue only leaves bubbles.
`default_nettype none
module rlx_fc_layer #(
    parameter integer K = 4,          // inputs
    parameter integer N = 4,          // outputs
    parameter integer P = 1,          // MAC lanes (outputs computed at once)
    parameter integer WB = 8,         // weight bits in the ROM (8, or 4 for weights in [-8, 7])
    parameter integer PIPE = 0,       // 1: products registered before the accumulators
    parameter integer XS = 0,         // input values are signed (i8) rather than u8
    parameter integer REQ = 1,        // requantize to 8 bits (else write the i32 accumulators)
    parameter integer ZP = 0,         // output zero point
    parameter integer LO = 0,         // clamp: the dtype's range, lower bound raised by relu
    parameter integer HI = 255,
    parameter W_FILE = "w.hex",       // (ceil(N/P) * K) words of P WB-bit weights, lane 0 lowest
    parameter B_FILE = "b.hex",       // ceil(N/P) words of P folded biases (32-bit)
    parameter M_FILE = "m.hex",       // ceil(N/P) words of P multipliers (32-bit)
    parameter S_FILE = "s.hex",       // ceil(N/P) words of P shifts (8-bit, signed)
    parameter integer KW = 10,        // address widths
    parameter integer NW = 10
) (
    input  wire clk,
    input  wire rst,
    input  wire start,
    output reg  done,
    output reg  [KW-1:0] x_addr,      // input buffer read port (1 cycle latency)
    input  wire [7:0]    x_data,
    output reg           y_we,
    output reg  [NW-1:0] y_addr,
    output reg  [31:0]   y_data
);
    localparam integer G = (N + P - 1) / P;
    localparam integer WDEPTH = G * K;
    localparam integer WAW = WDEPTH > 1 ? $clog2(WDEPTH) : 1;
    localparam integer GW = G > 1 ? $clog2(G) : 1;
    localparam integer LW = P > 1 ? $clog2(P) : 1;

    reg [WB*P-1:0] wrom [0:WDEPTH-1];
    reg [32*P-1:0] brom [0:G-1];
    reg [32*P-1:0] mrom [0:G-1];
    reg [8*P-1:0]  srom [0:G-1];
    initial begin
        $readmemh(W_FILE, wrom);
        $readmemh(B_FILE, brom);
        if (REQ) begin
            $readmemh(M_FILE, mrom);
            $readmemh(S_FILE, srom);
        end
    end

    // ---- issue: element addresses, one a cycle (the ROM holds the groups back to back) ----
    reg running, issue, ifirst, ilast, last_issued, inflight;
    reg [GW-1:0] g, ig;                // the group being issued, the issued element's group
    reg [KW-1:0] k;
    reg [WAW-1:0] waddr, wnext;
    reg rq_busy;                       // the requantize unit holds a group
    reg acc_done;                      // a group's sums are complete: the unit takes them
    // a group's last element waits until the unit is free and no other group is in flight,
    // so a group's sums always find the holding bank free
    wire can_last = !rq_busy && !inflight;

    always @(posedge clk) begin
        issue <= 1'b0;
        last_issued <= 1'b0;
        if (acc_done) inflight <= 1'b0;
        if (rst) begin
            running <= 1'b0;
            inflight <= 1'b0;
        end else if (start) begin
            running <= 1'b1;
            g <= 0;
            k <= 0;
            wnext <= 0;
        end else if (running && (k + 1 < K || can_last)) begin
            issue <= 1'b1;
            ifirst <= k == 0;
            ilast <= k + 1 == K;
            ig <= g;
            x_addr <= k;
            waddr <= wnext;
            wnext <= wnext + 1;
            if (k + 1 < K) k <= k + 1;
            else begin
                k <= 0;
                inflight <= 1'b1;
                if (g + 1 < G) g <= g + 1;
                else begin
                    running <= 1'b0;
                    last_issued <= 1'b1;
                end
            end
        end
    end

    // ---- MAC array: ROM word + input byte (d stage), products (p stage, PIPE), sums ----
    reg [WB*P-1:0] wword;
    reg [32*P-1:0] bword, bword_p;     // the group's biases in the d and p stages
    reg dv, dfirst, dlast, pv, pfirst, plast;
    reg [GW-1:0] dg, pg, acc_g;
    always @(posedge clk) begin
        wword <= wrom[waddr];
        bword <= brom[ig];
    end

    wire signed [8:0] xv = XS ? {x_data[7], x_data} : {1'b0, x_data};
    reg  signed [WB+8:0] prod [0:P-1];
    reg  signed [31:0] acc [0:P-1];
    reg  signed [31:0] hold [0:P-1];   // a finished group, read by the requantize unit

    wire a_en = PIPE ? pv : dv;
    wire a_first = PIPE ? pfirst : dfirst;
    wire a_last = PIPE ? plast : dlast;
    wire [GW-1:0] a_g = PIPE ? pg : dg;
    wire [32*P-1:0] a_bias = PIPE ? bword_p : bword;
    integer i;
    always @(posedge clk) begin
        dv <= issue && !rst;
        dfirst <= ifirst;
        dlast <= ilast;
        dg <= ig;
        pv <= dv && !rst;
        pfirst <= dfirst;
        plast <= dlast;
        pg <= dg;
        bword_p <= bword;
        for (i = 0; i < P; i = i + 1) begin
            prod[i] <= xv * $signed(wword[WB*i +: WB]);
            if (a_en)
                acc[i] <= (a_first ? $signed(a_bias[32*i +: 32]) : acc[i])
                          + (PIPE ? prod[i] : xv * $signed(wword[WB*i +: WB]));
        end
        acc_done <= a_en && a_last && !rst;
        acc_g <= a_g;
    end

    // ---- requantize unit: hold bank -> one output a step ----
    // TFLite MultiplyByQuantizedMultiplier on magnitudes: a = acc << left (wraps in 32 bits),
    // s = sign of a * m, hm = (|a| |m| + 2^30 - s) >> 31 is the doubling high multiply rounded
    // as TFLite rounds it (to nearest, ties away from zero, on the signed product), then the
    // rounding right shift, ties away from zero: r = (hm + 2^(right-1)) >> right; y = +-r + ZP.
    localparam [2:0] RQ_LOAD = 0, RQ_MUL = 1, RQ_HIGH = 2, RQ_SHIFT = 3, RQ_OUT = 4;
    reg [2:0] rq;
    reg [GW-1:0] rq_g;
    reg [LW-1:0] lane;
    reg [5:0] step;
    reg [32*P-1:0] mword;
    reg [8*P-1:0] sword;
    reg [31:0] ma, ph, pl;             // |a|, the product's high and low words (pl: |m| first)
    reg sgn;
    reg [6:0] right;
    reg [34:0] hm;
    reg [34:0] r;
    always @(posedge clk) begin
        if (REQ) begin
            mword <= mrom[acc_done ? acc_g : rq_g];  // ready when the unit loads lane 0
            sword <= srom[acc_done ? acc_g : rq_g];
        end
    end
    wire signed [31:0] h_acc = hold[lane];
    wire signed [31:0] h_mult = mword[32*lane +: 32];
    wire signed [7:0] h_shift = sword[8*lane +: 8];
    wire [4:0] left = h_shift > 0 ? h_shift[4:0] : 5'd0;
    wire signed [31:0] a_sh = h_acc <<< left;
    wire [32:0] mac_sum = {1'b0, ph} + (pl[0] ? {1'b0, ma} : 33'd0);
    wire [63:0] mag = {ph, pl} + 64'd1073741824 - {63'd0, sgn};
    wire [34:0] half = right == 0 ? 35'd0 : 35'd1 << (right - 7'd1);
    wire signed [35:0] q = (sgn ? -$signed({1'b0, r}) : $signed({1'b0, r})) + ZP;
    wire [NW-1:0] out_n = rq_g * P + lane;
    wire last_lane = lane + 1 == P || rq_g * P + lane + 1 >= N;
    integer j;

    always @(posedge clk) begin
        y_we <= 1'b0;
        if (acc_done) begin            // can_last kept the unit free for this group
            for (j = 0; j < P; j = j + 1) hold[j] <= acc[j];
            rq_g <= acc_g;
            lane <= 0;
            rq <= RQ_LOAD;
            rq_busy <= 1'b1;
        end
        if (rst) begin
            rq_busy <= 1'b0;
        end else begin
            if (rq_busy && !acc_done) begin
                case (REQ ? rq : RQ_LOAD)  // logits: the other states are unreachable
                RQ_LOAD: if (!REQ) begin   // logits: the accumulators as they are
                    y_we <= 1'b1;
                    y_addr <= out_n;
                    y_data <= h_acc;
                    if (last_lane) rq_busy <= 1'b0;
                    else lane <= lane + 1;
                end else begin
                    ma <= a_sh[31] ? -a_sh : a_sh;
                    pl <= h_mult[31] ? -h_mult : h_mult;
                    ph <= 32'd0;
                    sgn <= a_sh[31] ^ h_mult[31];
                    right <= h_shift > 0 ? 7'd0 : -{h_shift[7], h_shift[5:0]};
                    step <= 0;
                    rq <= RQ_MUL;
                end
                RQ_MUL: begin              // one bit of |m| a cycle, the product shifts right
                    ph <= mac_sum[32:1];
                    pl <= {mac_sum[0], pl[31:1]};
                    step <= step + 1;
                    if (step == 31) rq <= RQ_HIGH;
                end
                RQ_HIGH: begin
                    hm <= {3'd0, mag[63:31]};
                    rq <= RQ_SHIFT;
                end
                RQ_SHIFT: begin
                    r <= (hm + half) >> right;
                    rq <= RQ_OUT;
                end
                default: begin             // RQ_OUT
                    y_we <= 1'b1;
                    y_addr <= out_n;
                    y_data <= q < LO ? LO : q > HI ? HI : q[31:0];
                    rq <= RQ_LOAD;
                    if (last_lane) rq_busy <= 1'b0;
                    else lane <= lane + 1;
                end
                endcase
            end
        end
    end

    // done: every group issued, summed, handed over and written out (the last write one
    // cycle before, so the next layer reads a complete buffer)
    reg finishing;
    always @(posedge clk) begin
        done <= 1'b0;
        if (rst || start) finishing <= 1'b0;
        else if (last_issued) finishing <= 1'b1;
        else if (finishing && !inflight && !rq_busy && !acc_done && !y_we) begin
            done <= 1'b1;
            finishing <= 1'b0;
        end
    end
endmodule
`default_nettype wire
