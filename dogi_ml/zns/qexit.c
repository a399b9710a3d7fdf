/* qexit V: end a QEMU guest with status V through the isa-debug-exit device at port 0xf4
 * (QEMU then exits with 2V+1); the guest kernel has no /dev/port, hence ioperm + outb. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/io.h>

int main(int argc, char **argv)
{
    int v = argc > 1 ? atoi(argv[1]) : 0;
    if (ioperm(0xf4, 4, 1)) {
        perror("ioperm");
        return 1;
    }
    outb((unsigned char)v, 0xf4);
    return 0;
}
