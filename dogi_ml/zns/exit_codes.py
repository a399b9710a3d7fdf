"""Exit statuses of the ZNS replay harness and of ``python -m dogi_ml replay``: the table in
``dogi_ml/zns/exit_codes.h`` (the C side), documented in docs/deployment.md under "Exit codes".
A test checks that the two files agree."""

from __future__ import annotations

#: the run did what was asked and every check passed
OK = 0
#: an internal error or a device I/O error
INTERNAL = 1
#: bad command-line arguments
USAGE = 2
#: a bad input file (a ``.dtr`` trace, a model bundle; in the Python commands also a text trace
#: that cannot be read as its format, or a model file that holds no model)
BAD_INPUT = 3
#: the verify pass found a block that does not read back
VERIFY = 4
#: recovery found acknowledged writes missing
LOST_WRITES = 5
#: the run's counts differ from the simulator's
PARITY = 6
