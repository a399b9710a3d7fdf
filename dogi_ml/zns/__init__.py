"""The ZNS replay harness: C sources (package data) that replay a ``.dtr`` trace onto a zoned
device (a Linux zoned block device or a file-emulated one) with the simulator's placement and
GC, plus the Python side that builds and runs them (:mod:`dogi_ml.zns.harness`)."""
