"""Block traces: readers for public formats, generators, the binary format, workloads."""
