// One fully connected int8 layer: a MAC array of P lanes (P output neurons at a time, one
// input element a cycle), weights in a ROM initialised by $readmemh (P weights a word, so a
// block RAM reads them in one cycle; WB = 4 stores weights in [-8, 7] as 4-bit fields), then TFLite's requantization (multiplier and shift,
// rounding exactly as the numpy reference) and relu folded into the clamp. Without REQ the
// i32 accumulators are written out (the graph's logits).
//
// PIPE = 1 pipelines the requantize unit in three stages (lane select | 32x32 multiply |
// round, shift, clamp), registered between, so the multiply no longer shares a cycle with the
// rounding; the outputs trail by two cycles, and the layer's done waits for them.
//
// Cycles: ceil(N / P) groups x (K + 2 MAC pipeline + P requantize) + 1 (+ 2 with PIPE).
`default_nettype none
module rlx_fc_layer #(
    parameter integer K = 4,          // inputs
    parameter integer N = 4,          // outputs
    parameter integer P = 1,          // MAC lanes (outputs computed at once)
    parameter integer WB = 8,         // weight bits in the ROM (8, or 4 for weights in [-8, 7])
    parameter integer PIPE = 0,       // 1: a three-stage requantize pipeline (higher fmax)
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

    localparam [2:0] IDLE = 0, LOADB = 1, MAC = 2, DRAIN = 3, REQS = 4, FLUSH = 5;
    reg [2:0] state;
    reg [31:0] g, k, lane;
    reg [31:0] waddr;
    reg [WB*P-1:0] wword;
    reg [32*P-1:0] bword, mword;
    reg [8*P-1:0] sword;
    reg mac_en;                        // x_data / wword hold element k-1 this cycle
    reg signed [31:0] acc [0:P-1];

    // synchronous ROM reads (block RAM)
    always @(posedge clk) begin
        wword <= wrom[waddr];
        bword <= brom[g];
        if (REQ) begin
            mword <= mrom[g];
            sword <= srom[g];
        end
    end

    wire signed [31:0] xval = XS ? {{24{x_data[7]}}, x_data} : {24'd0, x_data};

    // ---- TFLite MultiplyByQuantizedMultiplier on lane `lane` ----
    // PIPE = 0: one combinational path. PIPE = 1: stage 0 registers the lane's operands
    // (p0_*), stage 1 the 64-bit product (p1_*), stage 2 rounds, shifts and clamps into y.
    reg               p0_v, p1_v;
    reg [NW-1:0]      p0_a, p1_a;
    reg signed [31:0] p0_acc, p0_mult, p1_acc;
    reg signed [7:0]  p0_shift;
    reg signed [63:0] p1_ab;
    reg [6:0]         p1_right;
    reg [1:0]         flush;
    wire signed [31:0] racc   = PIPE ? p0_acc : acc[lane];
    wire signed [31:0] rmult  = PIPE ? p0_mult : mword[32*lane +: 32];
    wire signed [7:0]  rshift = PIPE ? p0_shift : sword[8*lane +: 8];
    wire [5:0] left  = rshift > 0 ? rshift[5:0] : 6'd0;
    wire [6:0] right = rshift > 0 ? 7'd0 : (-rshift);
    wire signed [31:0] xs  = racc <<< left;                          // wraps in 32 bits
    wire signed [63:0] ab1 = xs * rmult;
    wire signed [63:0] ab  = PIPE ? p1_ab : ab1;
    wire [6:0]        right2 = PIPE ? p1_right : right;
    wire signed [63:0] v   = ab + (ab >= 0 ? 64'sd1073741824 : -64'sd1073741823);
    wire signed [63:0] h   = v >= 0 ? (v >>> 31) : -((-v) >>> 31);  // truncate toward zero
    wire signed [63:0] mask = (64'sd1 <<< right2) - 64'sd1;
    wire signed [63:0] rem = h & mask;
    wire signed [63:0] thr = (mask >>> 1) + (h < 0 ? 64'sd1 : 64'sd0);
    wire signed [63:0] q   = (h >>> right2) + (rem > thr ? 64'sd1 : 64'sd0) + ZP;
    wire signed [31:0] clamped = q < LO ? LO : q > HI ? HI : q[31:0];

    integer i;
    always @(posedge clk) begin
        done <= 1'b0;
        y_we <= 1'b0;
        p0_v <= 1'b0;
        if (PIPE) begin                    // stages 1 and 2 advance every cycle
            p1_v <= p0_v;
            p1_a <= p0_a;
            p1_ab <= ab1;
            p1_right <= right;
            p1_acc <= p0_acc;
            y_we <= p1_v;
            y_addr <= p1_a;
            y_data <= REQ ? clamped : p1_acc;
        end
        if (rst) begin
            state <= IDLE;
            mac_en <= 1'b0;
            p1_v <= 1'b0;
            y_we <= 1'b0;
        end else begin
            case (state)
            IDLE: if (start) begin
                g <= 0;
                state <= LOADB;
            end
            LOADB: begin                   // bword/mword/sword of group g arrive next cycle
                k <= 0;
                waddr <= g * K;
                x_addr <= 0;
                mac_en <= 1'b0;
                state <= MAC;
            end
            MAC: begin
                if (!mac_en && k == 0)     // first cycle: the group's biases are readable
                    for (i = 0; i < P; i = i + 1) acc[i] <= bword[32*i +: 32];
                if (mac_en)
                    for (i = 0; i < P; i = i + 1)
                        acc[i] <= acc[i] + xval * $signed(wword[WB*i +: WB]);
                mac_en <= 1'b1;
                if (k + 1 < K) begin
                    k <= k + 1;
                    waddr <= waddr + 1;
                    x_addr <= k + 1;
                end else begin
                    state <= DRAIN;
                end
            end
            DRAIN: begin                   // the last element's product
                for (i = 0; i < P; i = i + 1)
                    acc[i] <= acc[i] + xval * $signed(wword[WB*i +: WB]);
                mac_en <= 1'b0;
                lane <= 0;
                state <= REQS;
            end
            REQS: begin
                if (PIPE) begin            // stage 0: this lane's operands
                    p0_v <= g * P + lane < N;
                    p0_a <= g * P + lane;
                    p0_acc <= acc[lane];
                    p0_mult <= mword[32*lane +: 32];
                    p0_shift <= sword[8*lane +: 8];
                end else if (g * P + lane < N) begin
                    y_we <= 1'b1;
                    y_addr <= g * P + lane;
                    y_data <= REQ ? clamped : acc[lane];
                end
                if (lane + 1 < P) begin
                    lane <= lane + 1;
                end else if (g + 1 < G) begin
                    g <= g + 1;
                    state <= LOADB;
                end else if (PIPE) begin
                    flush <= 0;
                    state <= FLUSH;
                end else begin
                    done <= 1'b1;
                    state <= IDLE;
                end
            end
            FLUSH: begin                   // the last lane leaves stage 2 with done
                if (flush == 1) begin
                    done <= 1'b1;
                    state <= IDLE;
                end else flush <= flush + 1;
            end
            default: state <= IDLE;
            endcase
        end
    end
endmodule
`default_nettype wire
