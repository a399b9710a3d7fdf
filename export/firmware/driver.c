/* The test image's driver: reads the parity vectors from the host (semihosting, in chunks), runs
 * the model on each one, writes each prediction with the instructions it took, and records the
 * stack high-water mark of the model calls. Built by firmware.py with
 *   FW_KIND      1 flat classifier (MLP, trees), 2 GRU step, 3 Q-table
 *   FW_IN_WORDS  int64 words per input row, FW_OUT_WORDS int32 words per output row
 *   FW_N_CLASSES, FW_N_FEATURES, FW_HIDDEN  the model's sizes
 * and linked with model.o, whose fw_model_* functions wrap the exported header's entry points.
 *
 * Files (relative to QEMU's working directory): fw_in.bin (rows of FW_IN_WORDS int64), fw_out.bin
 * (rows of FW_OUT_WORDS int32, the last word the counter's ticks for that row), fw_meta.bin
 * (FW_META_WORDS uint32: magic "FWM1", rows, FW_OUT_WORDS, stack high-water bytes, the known
 * loop's turns and ticks, the ticks of 16 empty windows summed, the stack region's bytes, the
 * counter's mask, 0). Exit status: 0, or 2-6 for a failed file operation (firmware.py says which
 * run failed; 70 is a fault, from the startup). */
#include "fw.h"

#ifndef FW_CHUNK
#define FW_CHUNK 256
#endif
#define FW_PAINT 0xA5C3E1F7u
#define FW_META_WORDS 10
#define FW_KNOWN_LOOP_TURNS 100000u

#if FW_KIND == 1
int32_t fw_model_predict_one(const int64_t *features, int32_t *logits);
#elif FW_KIND == 2
int32_t fw_model_gru_step(const int64_t *features, int16_t *h, int32_t *logits);
#elif FW_KIND == 3
int32_t fw_model_encode_state(int64_t lifetime, int64_t valid, int64_t segment_blocks, int32_t segment_type,
                              int32_t prediction, int32_t previous);
int32_t fw_model_relocate(int64_t lifetime, int64_t valid, int64_t segment_blocks, int32_t segment_type,
                          int32_t prediction, int32_t previous);
#else
#error "FW_KIND must be 1, 2 or 3"
#endif

static int64_t in_rows[FW_CHUNK][FW_IN_WORDS];
static int32_t out_rows[FW_CHUNK][FW_OUT_WORDS];

static int32_t sh_open(const char *name, int32_t mode)
{
    uint32_t n = 0, block[3];
    while (name[n]) ++n;
    block[0] = (uint32_t)(uintptr_t)name;
    block[1] = (uint32_t)mode;
    block[2] = n;
    return fw_semihost(FW_SYS_OPEN, block);
}

/* bytes not transferred (0: all of them) */
static int32_t sh_transfer(int32_t op, int32_t handle, void *buf, uint32_t len)
{
    uint32_t block[3];
    block[0] = (uint32_t)handle;
    block[1] = (uint32_t)(uintptr_t)buf;
    block[2] = len;
    return fw_semihost(op, block);
}

static uint32_t ticks(uint32_t t0, uint32_t t1) { return (t1 - t0) & fw_counter_mask; }

/* one row: the model call between two counter reads */
static void run_row(const int64_t *in, int32_t *out)
{
    uint32_t t0, t1;
#if FW_KIND == 1
    t0 = fw_counter();
    out[0] = fw_model_predict_one(in, out + 1);
    t1 = fw_counter();
#elif FW_KIND == 2
    int16_t h[FW_HIDDEN];
    int32_t i;
    for (i = 0; i < FW_HIDDEN; ++i) h[i] = (int16_t)in[FW_N_FEATURES + i];
    t0 = fw_counter();
    out[0] = fw_model_gru_step(in, h, out + 1);
    t1 = fw_counter();
    for (i = 0; i < FW_HIDDEN; ++i) out[1 + FW_N_CLASSES + i] = h[i];
#else
    out[0] = fw_model_encode_state(in[0], in[1], in[2], (int32_t)in[3], (int32_t)in[4], (int32_t)in[5]);
    t0 = fw_counter();
    out[1] = fw_model_relocate(in[0], in[1], in[2], (int32_t)in[3], (int32_t)in[4], (int32_t)in[5]);
    t1 = fw_counter();
#endif
    out[FW_OUT_WORDS - 1] = (int32_t)ticks(t0, t1);
}

/* n rows with the free stack (below this frame's stack pointer) painted first; returns the bytes
 * of stack the rows used below this frame */
static __attribute__((noinline)) uint32_t run_chunk(int32_t n)
{
    uintptr_t sp;
    uint32_t *p;
    int32_t r;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (p = _stack_bottom; (uintptr_t)p < sp; ++p) *p = FW_PAINT; /* nothing lives below sp */
    for (r = 0; r < n; ++r) run_row(in_rows[r], out_rows[r]);
    for (p = _stack_bottom; (uintptr_t)p < sp && *p == FW_PAINT; ++p) {
    }
    return (uint32_t)(sp - (uintptr_t)p);
}

static __attribute__((noinline)) uint32_t empty_window(void)
{
    const uint32_t t0 = fw_counter();
    const uint32_t t1 = fw_counter();
    return ticks(t0, t1);
}

static __attribute__((noinline)) uint32_t known_window(void)
{
    const uint32_t t0 = fw_counter();
    uint32_t t1;
    fw_known_loop(FW_KNOWN_LOOP_TURNS);
    t1 = fw_counter();
    return ticks(t0, t1);
}

int fw_main(void)
{
    const uint32_t row_bytes = FW_IN_WORDS * 8u, out_bytes = FW_OUT_WORDS * 4u;
    int32_t fin, fout, fmeta, len;
    uint32_t rows, done = 0, stack_max = 0, meta[FW_META_WORDS], empty_sum = 0, i;
    fin = sh_open("fw_in.bin", 1);   /* "rb" */
    fout = sh_open("fw_out.bin", 5); /* "wb" */
    if (fin < 0 || fout < 0) return 2;
    len = fw_semihost(FW_SYS_FLEN, &fin);
    if (len < 0 || (uint32_t)len % row_bytes) return 3;
    rows = (uint32_t)len / row_bytes;
    for (i = 0; i < 16; ++i) empty_sum += empty_window(); /* the window's own cost, 16 times */
    meta[5] = known_window();
    while (done < rows) {
        const uint32_t n = (rows - done < FW_CHUNK) ? rows - done : FW_CHUNK;
        uint32_t used;
        if (sh_transfer(FW_SYS_READ, fin, in_rows, n * row_bytes) != 0) return 4;
        used = run_chunk((int32_t)n);
        stack_max = (used > stack_max) ? used : stack_max;
        if (sh_transfer(FW_SYS_WRITE, fout, out_rows, n * out_bytes) != 0) return 5;
        done += n;
    }
    fw_semihost(FW_SYS_CLOSE, &fin);
    fw_semihost(FW_SYS_CLOSE, &fout);
    meta[0] = 0x46574D31u; /* "FWM1" */
    meta[1] = rows;
    meta[2] = FW_OUT_WORDS;
    meta[3] = stack_max;
    meta[4] = FW_KNOWN_LOOP_TURNS;
    meta[6] = empty_sum;
    meta[7] = (uint32_t)((uintptr_t)_stack_top - (uintptr_t)_stack_bottom);
    meta[8] = fw_counter_mask;
    meta[9] = 0;
    fmeta = sh_open("fw_meta.bin", 5);
    if (fmeta < 0 || sh_transfer(FW_SYS_WRITE, fmeta, meta, sizeof meta) != 0) return 6;
    fw_semihost(FW_SYS_CLOSE, &fmeta);
    return 0;
}
