/* Semihosting calls: r0 = operation, r1 = pointer to the argument block, result in r0. */
#include "semihost.h"

static int32_t sh_call(int32_t op, void *args) {
    register int32_t r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = args;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static uint32_t sh_strlen(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return n;
}

int32_t sh_open(const char *path, int mode) {
    uint32_t a[3] = {(uint32_t)path, (uint32_t)mode, sh_strlen(path)};
    return sh_call(0x01, a);
}

int32_t sh_read(int32_t fd, void *buf, uint32_t n) {
    uint32_t a[3] = {(uint32_t)fd, (uint32_t)buf, n};
    return sh_call(0x06, a);
}

int32_t sh_write(int32_t fd, const void *buf, uint32_t n) {
    uint32_t a[3] = {(uint32_t)fd, (uint32_t)buf, n};
    return sh_call(0x05, a);
}

int32_t sh_flen(int32_t fd) {
    uint32_t a[1] = {(uint32_t)fd};
    return sh_call(0x0C, a);
}

void sh_close(int32_t fd) {
    uint32_t a[1] = {(uint32_t)fd};
    sh_call(0x02, a);
}

void sh_puts(const char *s) { sh_call(0x04, (void *)s); }

void sh_exit(int ok) {
    /* ADP_Stopped_ApplicationExit makes QEMU exit 0; anything else (RunTimeErrorUnknown)
     * makes it exit 1 */
    sh_call(0x18, (void *)(ok ? 0x20026 : 0x20023));
    for (;;) {}
}
