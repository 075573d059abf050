/* Semihosting calls (ARM's "bkpt 0xab" protocol): file I/O and exit through the emulator or a
 * debug probe, so the firmware needs no libc. */
#ifndef RLX_SEMIHOST_H
#define RLX_SEMIHOST_H
#include <stdint.h>

int32_t sh_open(const char *path, int mode);     /* mode 1 = "rb", 5 = "wb"; -1 on error */
int32_t sh_read(int32_t fd, void *buf, uint32_t n);   /* bytes NOT read (0 = all) */
int32_t sh_write(int32_t fd, const void *buf, uint32_t n);
int32_t sh_flen(int32_t fd);
void sh_close(int32_t fd);
void sh_puts(const char *s);
void sh_exit(int ok) __attribute__((noreturn));
#endif
