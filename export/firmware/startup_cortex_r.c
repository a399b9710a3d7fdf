/* Startup of the Cortex-R5 test image (ARM-state code built with -mcpu=cortex-r5), run on QEMU's
 * virt machine with a Cortex-A15 (QEMU has no R-profile machine for qemu-system-arm; the A15 is an
 * ARMv7 core with the R5's hardware divide in ARM state and the same PMU interface). QEMU enters
 * fw_entry in SVC mode with the MMU and caches off, the state an R5 leaves reset in (MPU off).
 * Instruction counting: the ARMv7 PMU's event counter 0 on INST_RETIRED (event 0x08), which QEMU
 * counts exactly with -icount. Semihosting by SVC 0x123456 (ARM state). No C library. */
#include "fw.h"

extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[];

const uint32_t fw_counter_mask = 0xFFFFFFFFu;

int32_t fw_semihost(int32_t op, void *arg)
{
    register int32_t r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("svc 0x123456" : "+r"(r0) : "r"(r1) : "memory", "lr");
    return r0;
}

void fw_exit(int32_t status)
{
    uint32_t block[2] = {0x20026u, (uint32_t)status}; /* ADP_Stopped_ApplicationExit, status */
    for (;;) fw_semihost(FW_SYS_EXIT_EXTENDED, block);
}

uint32_t fw_counter(void)
{
    uint32_t v;
    __asm__ volatile("mrc p15, 0, %0, c9, c13, 2" : "=r"(v)); /* PMXEVCNTR (PMSELR = 0) */
    return v;
}

void fw_known_loop(uint32_t n)
{
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
}

static void fw_counter_start(void)
{
    __asm__ volatile("mcr p15, 0, %0, c9, c12, 5" : : "r"(0u));          /* PMSELR: counter 0 */
    __asm__ volatile("mcr p15, 0, %0, c9, c13, 1" : : "r"(0x08u));       /* PMXEVTYPER: INST_RETIRED */
    __asm__ volatile("mcr p15, 0, %0, c9, c12, 0" : : "r"(0x7u));        /* PMCR: enable, reset counters */
    __asm__ volatile("mcr p15, 0, %0, c9, c12, 1" : : "r"(0x80000001u)); /* PMCNTENSET: counter 0, cycles */
    __asm__ volatile("isb");
}

void fw_reset(void) __attribute__((noreturn));
void fw_reset(void)
{
    uint32_t *src = _sidata, *dst;
    for (dst = _sdata; dst < _edata; ++dst) *dst = *src++;
    for (dst = _sbss; dst < _ebss; ++dst) *dst = 0;
    fw_counter_start();
    fw_exit(fw_main());
}

/* the image's entry (ELF entry point): a stack, then C */
__attribute__((naked, noreturn, section(".entry"))) void fw_entry(void)
{
    __asm__ volatile("ldr sp, =_stack_top\n\tb fw_reset");
}
