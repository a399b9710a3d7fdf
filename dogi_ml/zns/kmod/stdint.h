/* <stdint.h> for the exported header inside the kernel (kbuild compiles with -nostdinc): the
 * fixed-width types come from <linux/types.h>, the limit and constant macros are defined here. */
#ifndef DOGI_KMOD_STDINT_H
#define DOGI_KMOD_STDINT_H
#include <linux/types.h>
#include <linux/limits.h>
#ifndef INT32_MAX
#define INT32_MAX S32_MAX
#endif
#ifndef INT32_MIN
#define INT32_MIN S32_MIN
#endif
#ifndef INT64_C
#define INT64_C(x) x##LL
#endif
#ifndef UINT64_C
#define UINT64_C(x) x##ULL
#endif
#endif
