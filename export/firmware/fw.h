/* The firmware test images' board interface: what a startup file gives the driver (driver.c).
 *
 * Two startups implement it: startup_cortex_m.c (Cortex-M4 on QEMU's mps2-an386: vector table,
 * SysTick) and startup_cortex_r.c (Cortex-R5 code, ARM state, run on QEMU's virt machine with a
 * Cortex-A15: ARMv7 PMU). No C library: semihosting is the only I/O. */
#ifndef FW_H
#define FW_H

#include <stdint.h>

/* one semihosting call (operation number, parameter block); the host's answer */
int32_t fw_semihost(int32_t op, void *arg);

/* an increasing instruction count (modulo FW_COUNTER_MASK + 1), started by the reset handler */
uint32_t fw_counter(void);
extern const uint32_t fw_counter_mask;

/* n turns of a two-instruction loop (subs; bne): the known workload the counter is checked on */
void fw_known_loop(uint32_t n);

/* the stack region (linker script): the driver paints it to find the high-water mark */
extern uint32_t _stack_bottom[], _stack_top[];

/* the driver's entry point; its return value is the image's exit status */
int fw_main(void);

/* semihosting operations (Arm's semihosting specification) */
enum {
    FW_SYS_OPEN = 0x01,
    FW_SYS_CLOSE = 0x02,
    FW_SYS_WRITE = 0x05,
    FW_SYS_READ = 0x06,
    FW_SYS_FLEN = 0x0C,
    FW_SYS_EXIT = 0x18,
    FW_SYS_EXIT_EXTENDED = 0x20
};

/* end the run with `status` as QEMU's exit status (SYS_EXIT_EXTENDED, ADP_Stopped_ApplicationExit) */
void fw_exit(int32_t status) __attribute__((noreturn));

#endif /* FW_H */
