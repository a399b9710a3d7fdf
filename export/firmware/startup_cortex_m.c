/* Startup of the Cortex-M4 test image (QEMU mps2-an386): vector table, .data/.bss set-up,
 * SysTick as the instruction counter, semihosting by BKPT 0xAB. No C library.
 *
 * Instruction counting: QEMU runs with -icount shift=0 (one instruction = 1 ns of virtual time)
 * and the board clocks SysTick at 25 MHz, so one SysTick tick is a fixed number of instructions;
 * firmware.py measures that number on fw_known_loop rather than assuming it. */
#include "fw.h"

extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[];

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)

const uint32_t fw_counter_mask = 0x00FFFFFFu; /* SysTick is a 24-bit down counter */

int32_t fw_semihost(int32_t op, void *arg)
{
    register int32_t r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void fw_exit(int32_t status)
{
    uint32_t block[2] = {0x20026u, (uint32_t)status}; /* ADP_Stopped_ApplicationExit, status */
    for (;;) fw_semihost(FW_SYS_EXIT_EXTENDED, block);
}

uint32_t fw_counter(void) { return fw_counter_mask - SYST_CVR; }

void fw_known_loop(uint32_t n)
{
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
}

static void fw_fault(void) { fw_exit(70); } /* any fault or unexpected interrupt: exit 70 */

void fw_reset(void) __attribute__((noreturn));
void fw_reset(void)
{
    uint32_t *src = _sidata, *dst;
    for (dst = _sdata; dst < _edata; ++dst) *dst = *src++;
    for (dst = _sbss; dst < _ebss; ++dst) *dst = 0;
    SYST_RVR = fw_counter_mask;
    SYST_CVR = 0;
    SYST_CSR = 5u; /* enabled, processor clock, no interrupt */
    fw_exit(fw_main());
}

/* initial SP, reset, then NMI, HardFault, MemManage, BusFault, UsageFault, 4 reserved, SVCall,
 * DebugMonitor, reserved, PendSV, SysTick */
__attribute__((section(".vectors"), used)) const uintptr_t fw_vectors[16] = {
    (uintptr_t)_stack_top, (uintptr_t)fw_reset, (uintptr_t)fw_fault, (uintptr_t)fw_fault,
    (uintptr_t)fw_fault,   (uintptr_t)fw_fault, (uintptr_t)fw_fault, 0,
    0,                     0,                   0,                   (uintptr_t)fw_fault,
    (uintptr_t)fw_fault,   0,                   (uintptr_t)fw_fault, (uintptr_t)fw_fault,
};
