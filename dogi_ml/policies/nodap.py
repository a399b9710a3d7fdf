"""NoDaP: the DOGI paper's near-optimal oracle; it lives in ``oracles``."""

from dogi_ml.oracles.nodap import NoDaP as _NoDaP

from . import register


@register
class NoDaP(_NoDaP):
    default_groups = None

    def accepted_params(self):
        # the offline search's knobs (used by the simulate pipeline when bounds=search)
        return ("max_groups", "min_gain")
