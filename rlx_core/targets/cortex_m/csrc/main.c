/* The firmware's main: read every call's inputs from rlx_in.bin (semihosting), run the model,
 * write its outputs to rlx_out.bin and the SysTick ticks it took to rlx_ticks.bin. Under
 * QEMU's -icount shift=0 one instruction is 1 ns of virtual time, so ticks of the processor
 * clock count instructions (instructions = ticks * 1e9 / clock). */
#include <stdint.h>
#include "semihost.h"
#include "model.h"

#define SYST_CSR (*(volatile uint32_t *)0xE000E010)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018)

int main(void) {
    int32_t fi = sh_open("rlx_in.bin", 1), fo = sh_open("rlx_out.bin", 5);
    int32_t ft = sh_open("rlx_ticks.bin", 5);
    if (fi < 0 || fo < 0 || ft < 0) {
        sh_puts("rlx firmware: cannot open rlx_in.bin / rlx_out.bin / rlx_ticks.bin\n");
        return 1;
    }
    uint32_t per_call = 0;
    for (int i = 0; i < RLX_N_IN; i++) per_call += rlx_in_size[i];
    int32_t len = sh_flen(fi);
    if (len < 0 || per_call == 0 || (uint32_t)len % per_call != 0) {
        sh_puts("rlx firmware: rlx_in.bin is not a whole number of calls\n");
        return 1;
    }
    uint32_t calls = (uint32_t)len / per_call;
    SYST_RVR = 0xFFFFFF;
    SYST_CVR = 0;
    SYST_CSR = 5; /* enabled, processor clock, no interrupt */
    for (uint32_t c = 0; c < calls; c++) {
        for (int i = 0; i < RLX_N_IN; i++)
            if (sh_read(fi, rlx_in_ptr[i], rlx_in_size[i]) != 0) {
                sh_puts("rlx firmware: short read\n");
                return 1;
            }
        uint32_t t0 = SYST_CVR;
        rlx_model();
        uint32_t t1 = SYST_CVR;
        uint32_t ticks = (t0 - t1) & 0xFFFFFF; /* counts down; one call < 2^24 ticks */
        for (int i = 0; i < RLX_N_OUT; i++) sh_write(fo, rlx_out_ptr[i], rlx_out_size[i]);
        sh_write(ft, &ticks, 4);
    }
    sh_close(fi);
    sh_close(fo);
    sh_close(ft);
    return 0;
}
