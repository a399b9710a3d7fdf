/* The exported integer DOGI model inside an out-of-tree Linux kernel module: at load it
 * classifies the fixed feature vectors of dogi_vectors.h with the header's portable integer
 * path (no SIMD: kernel code may not touch the FPU/vector state) and prints, per vector, its
 * class and logits ("DOGI-KMOD i class l0 l1 ...") for the host to compare with the Python
 * integer reference. The module does nothing after init. */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>

#define DOGI_NO_SIMD 1
#include "dogi_model.h"
#include "dogi_vectors.h"

static int __init dogi_kmod_init(void)
{
    int32_t logits[DOGI_N_CLASSES];
    char line[16 * (DOGI_N_CLASSES + 2)];
    int i, k, n;

    for (i = 0; i < DOGI_KMOD_N; ++i) {
        int32_t c = dogi_predict_one(dogi_kmod_x[i], logits);

        n = scnprintf(line, sizeof(line), "%d %d", i, c);
        for (k = 0; k < DOGI_N_CLASSES; ++k)
            n += scnprintf(line + n, sizeof(line) - n, " %d", logits[k]);
        pr_info("DOGI-KMOD %s\n", line);
    }
    pr_info("DOGI-KMOD done %d\n", DOGI_KMOD_N);
    return 0;
}

static void __exit dogi_kmod_exit(void)
{
}

module_init(dogi_kmod_init);
module_exit(dogi_kmod_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("dogi_ml: the exported integer DOGI model classifying fixed feature vectors at init");
