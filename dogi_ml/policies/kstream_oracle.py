"""The MINOS §3.3 oracles (Segment, Percentile, K-Means, OP-Minimized) as one K-stream policy;
the thresholds and the placement live in ``oracles.minos_oracles``."""

from dogi_ml.oracles.minos_oracles import KStreamOracle as _KStreamOracle

from . import register


@register
class KStreamOracle(_KStreamOracle):
    default_groups = None
