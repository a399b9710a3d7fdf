"""FK: future-knowledge placement (SepBIT's ideal placement); the oracle lives in ``oracles``."""
from dogi_ml.oracles.fk import FutureKnowledge

from . import register


@register
class FK(FutureKnowledge):
    default_groups = 6
