/* exit_codes.h: the exit statuses of the ZNS replay harness and of `python -m dogi_ml replay`
 * (the same table, as constants, in dogi_ml/zns/exit_codes.py; documented in docs/deployment.md,
 * "Exit codes"). */
#ifndef DOGI_EXIT_CODES_H
#define DOGI_EXIT_CODES_H

#define DOGI_EXIT_OK 0            /* the run did what was asked and every check passed */
#define DOGI_EXIT_INTERNAL 1      /* an internal error or a device I/O error */
#define DOGI_EXIT_USAGE 2         /* bad command-line arguments */
#define DOGI_EXIT_BAD_INPUT 3     /* a bad input file (a .dtr trace, a model bundle) */
#define DOGI_EXIT_VERIFY 4        /* the verify pass found a block that does not read back */
#define DOGI_EXIT_LOST_WRITES 5   /* recovery found acknowledged writes missing */
#define DOGI_EXIT_PARITY 6        /* the run's counts differ from the simulator's */

#endif /* DOGI_EXIT_CODES_H */
