"""The Numba log-structured storage simulator: state, engine, victim selection, policy seam."""

from .engine import SimConfig, SimulationError, Simulator
from .policy_api import PlacementPolicy, SimContext, no_reclaim_hook
from .state import InvariantError, SimArrays, check_invariants
from .victims import GENERAL_VICTIMS, VICTIMS, get_victim, register_victim

__all__ = [
    "SimConfig",
    "SimulationError",
    "Simulator",
    "PlacementPolicy",
    "SimContext",
    "no_reclaim_hook",
    "InvariantError",
    "SimArrays",
    "check_invariants",
    "GENERAL_VICTIMS",
    "VICTIMS",
    "get_victim",
    "register_victim",
]
