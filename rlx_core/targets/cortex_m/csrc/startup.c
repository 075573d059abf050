/* Reset and fault handlers and the vector table: copy .data from flash, zero .bss, run main,
 * leave through semihosting. A fault prints its name and exits non-zero instead of hanging. */
#include <stdint.h>
#include "semihost.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
int main(void);

void Reset_Handler(void) {
    uint32_t *src = &_sidata, *dst = &_sdata;
    while (dst < &_edata) *dst++ = *src++;
    for (dst = &_sbss; dst < &_ebss; ) *dst++ = 0;
#if defined(__ARM_FP)
    /* the FPU is off at reset: grant CP10/CP11 full access (CPACR) before any float op */
    *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20;
    __asm__ volatile("dsb\n isb");
#endif
    sh_exit(main() == 0);
}

static void fault(const char *what) {
    sh_puts(what);
    sh_exit(0);
}

void NMI_Handler(void) { fault("rlx firmware: NMI\n"); }
void HardFault_Handler(void) { fault("rlx firmware: HardFault\n"); }
void MemManage_Handler(void) { fault("rlx firmware: MemManage fault\n"); }
void BusFault_Handler(void) { fault("rlx firmware: BusFault\n"); }
void UsageFault_Handler(void) { fault("rlx firmware: UsageFault\n"); }
void Default_Handler(void) { fault("rlx firmware: unexpected interrupt\n"); }

__attribute__((section(".isr_vector"), used))
static void (*const vectors[16])(void) = {
    (void (*)(void))&_estack, Reset_Handler, NMI_Handler, HardFault_Handler,
    MemManage_Handler, BusFault_Handler, UsageFault_Handler, 0, 0, 0, 0,
    Default_Handler, Default_Handler, 0, Default_Handler, Default_Handler,
};

/* gcc may emit calls to these even in freestanding code (struct copies, zeroing loops) */
void *memcpy(void *d, const void *s, unsigned n) {
    uint8_t *a = d;
    const uint8_t *b = s;
    while (n--) *a++ = *b++;
    return d;
}

void *memset(void *d, int c, unsigned n) {
    uint8_t *a = d;
    while (n--) *a++ = (uint8_t)c;
    return d;
}
