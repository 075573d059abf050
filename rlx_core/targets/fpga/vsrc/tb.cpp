// Verilator testbench: stream every image of rlx_in.bin into rlx_top (valid/ready, one byte a
// beat), collect its output words, write them to rlx_out.bin and the cycles each inference
// took (first input beat to last output beat) to rlx_cycles.bin.
#include <cstdint>
#include <cstdio>
#include <vector>
#include "Vrlx_top.h"
#include "verilated.h"

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    const int in_bytes = RLX_IN_BYTES, out_words = RLX_OUT_WORDS;
    FILE *fi = fopen("rlx_in.bin", "rb");
    if (!fi) { fprintf(stderr, "cannot open rlx_in.bin\n"); return 1; }
    std::vector<uint8_t> in;
    int c;
    while ((c = fgetc(fi)) != EOF) in.push_back((uint8_t)c);
    fclose(fi);
    if (in.size() % in_bytes) { fprintf(stderr, "rlx_in.bin is not whole images\n"); return 1; }
    size_t images = in.size() / in_bytes;
    Vrlx_top *top = new Vrlx_top;
    auto tick = [&]() { top->clk = 0; top->eval(); top->clk = 1; top->eval(); };
    top->rst = 1; top->s_valid = 0; top->m_ready = 0;
    for (int i = 0; i < 4; i++) tick();
    top->rst = 0;
    std::vector<int32_t> out;
    std::vector<uint32_t> cycles;
    const uint64_t limit = 200000000ull;  // cycles per image before giving up
    for (size_t im = 0; im < images; im++) {
        uint64_t n = 0;
        int fed = 0, got = 0;
        while (got < out_words) {
            top->s_valid = fed < in_bytes;
            top->s_data = fed < in_bytes ? in[im * in_bytes + fed] : 0;
            top->m_ready = 1;
            top->clk = 0;
            top->eval();
            bool take_in = top->s_valid && top->s_ready;
            bool take_out = top->m_valid && top->m_ready;
            int32_t word = (int32_t)top->m_data;
            top->clk = 1;
            top->eval();
            if (take_in) fed++;
            if (take_out) { out.push_back(word); got++; }
            if (++n > limit) { fprintf(stderr, "image %zu: no output after %llu cycles\n", im,
                                       (unsigned long long)n); return 2; }
        }
        cycles.push_back((uint32_t)n);
    }
    FILE *fo = fopen("rlx_out.bin", "wb");
    fwrite(out.data(), 4, out.size(), fo);
    fclose(fo);
    FILE *fc = fopen("rlx_cycles.bin", "wb");
    fwrite(cycles.data(), 4, cycles.size(), fc);
    fclose(fc);
    top->final();
    delete top;
    return 0;
}
