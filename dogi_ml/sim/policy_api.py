"""The seam between the engine and placement schemes.

A placement policy supplies three Numba functions with these fixed signatures::

    place_user(s, p, lba, now) -> group     # a user write of ``lba`` at logical time ``now``
    place_gc(s, p, lba, victim, now) -> group  # a valid block relocated out of ``victim``
    on_reclaim(s, p, victim, now) -> None   # called once per victim, before relocation
    on_chunk_due(s, p, group, due_us) -> None  # optional: a group's RAID chunk passed its deadline
    prefetch_lba(p, lba) -> None            # optional: hint the cache to fetch the policy's per-LBA
                                            # entries of ``lba``, which the loop writes some blocks later

``s`` is the engine's :class:`~dogi_ml.sim.state.SimArrays` (read it, don't write it, except
through :func:`dogi_ml.sim.kernels.retire_group`, which seals a group's open segment), ``p``
is the policy's own state, built by :meth:`PlacementPolicy.bind`: a namedtuple of numpy arrays
(fields may nest further namedtuples of arrays), read by name (``p.hot_counter[lba]``). Scalar
parameters and counters live in a one-element structured array (a ``scalars`` field, dtype from
:func:`scalar_fields`); a kernel reads and writes them as record fields, ``st = p.scalars[0];
st.hot_threshold += 1`` (a record view: writes go to the array), Python code through
:func:`record` (``record(p.scalars).hot_threshold``).
When ``place_user`` runs, ``s.lba_time[lba]`` still holds the time of the LBA's previous user
write (``-1`` if none) and ``s.l2p[lba]`` its old location (already invalidated).

With the RAID chunk layer on (``sim.raid_chunk_blocks``), every user write has a wall-clock
time in µs, ``s.ctr[C_NOW_US]`` (``dogi_ml.sim.state``; 0 when the run has no times), and
``on_chunk_due`` runs when a group's partial chunk has waited past ``sim.raid_chunk_timeout_us``,
and when a GC pass ends with the group's chunk partial (``s.group_gc_pass[group]`` set; clearing
it tells the engine not to pad that chunk), before the engine pads it: it may move the pending
blocks' persistence elsewhere with :func:`dogi_ml.sim.kernels.shadow_append` (ADAPT's
cross-group aggregation); the default does nothing. See ``notes/chunk_api.md`` in the working
notes for the chunk fields of ``s``.

Python hooks run between chunks (``between_chunks``): retrain a model, search a group
configuration, retire the groups it no longer uses (``sim.retire_group(g)``), checkpoint; and
before each call into the loop (``before_chunk``): batched inference for the writes about to be
applied. The engine never imports a policy; policies import this module.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numba as nb
import numpy as np


class NoState(NamedTuple):
    """The state of a policy that keeps none (Numba needs one array to type)."""

    unused: np.ndarray


@dataclass
class SimContext:
    """What a policy may know about the run when it binds its state."""

    capacity: int
    segment_blocks: int
    n_segments: int
    prefill_blocks: int
    stream: np.ndarray | None = None  # all user writes incl. prefill (for oracles), if known
    trace: Any = None  # the source Trace, if any (features, timestamps)
    extra: dict = field(default_factory=dict)
    chunk_blocks: int = 0  # the RAID chunk layer's blocks per chunk (0 = off)
    chunk_timeout_us: int = 0  # its padding deadline (µs)
    timed: bool = False  # user writes carry wall-clock times (s.ctr[C_NOW_US])
    gc_free_segments: int = 2  # the GC's free reserve (low watermark, in segments) of this run
    victim_rule: str = "greedy"  # the run's effective victim rule (a policy with its own selector may build on it)


def scalar_fields(**fields) -> np.dtype:
    """The dtype of a policy's scalars record: ``name=numpy type`` per field, in order."""
    return np.dtype([(name, np.dtype(t)) for name, t in fields.items()])


def new_scalars(dtype: np.dtype) -> np.ndarray:
    """A zeroed one-element array of the scalars record ``dtype`` (the ``scalars`` state field)."""
    return np.zeros(1, dtype)


def record(scalars: np.ndarray):
    """The record of a one-element ``scalars`` array with attribute access, for Python code;
    assignments write through to the array the kernels read."""
    return scalars.view(np.recarray)[0]


@nb.njit(cache=True)
def no_reclaim_hook(s, p, victim, now):
    """``on_reclaim`` for policies that need nothing from reclaimed segments."""
    return None


@nb.njit(cache=True)
def no_chunk_hook(s, p, group, due_us):
    """``on_chunk_due`` for policies that let the engine pad every due chunk."""
    return None


@nb.njit(cache=True, inline="always")
def no_prefetch_hook(p, lba):
    """``prefetch_lba`` for policies without per-LBA tables worth prefetching."""
    return None


def refuse_unknown_params(name: str, params, accepted) -> None:
    """A :class:`~dogi_ml.errors.ConfigError` naming the ``policy.params`` keys of ``params`` that
    scheme ``name`` does not read, and the ones it does (a misspelt parameter would otherwise be
    a setting the run never used)."""
    from dogi_ml.errors import ConfigError

    unknown = sorted(set(params) - set(accepted))
    if unknown:
        keys = ", ".join(f"policy.params.{k}" for k in unknown)
        known = ", ".join(sorted(accepted)) or "none"
        raise ConfigError(
            f"policy {name}: unknown parameter(s) {unknown} ({keys})",
            f"drop it or check the name; policy={name} reads: {known}",
        )


def refuse_unread_params(params, defaults, keys, why: str, setting: str) -> None:
    """A :class:`~dogi_ml.errors.ConfigError` for the first of ``keys`` whose value in ``params``
    differs from its ``defaults`` entry while the part that reads it is off: the run would drop
    it without a word. ``why`` follows ``policy.params.KEY=VALUE`` in the message (what turned the
    part off); the fix is to drop the key or give ``setting`` (the switch that turns it back on)."""
    from dogi_ml.errors import ConfigError

    for key in keys:
        value = params.get(key, defaults[key])
        if value != defaults[key]:
            raise ConfigError(f"policy.params.{key}={value} {why}", f"drop policy.params.{key} or set {setting}")


class PlacementPolicy:
    """Base class of placement schemes. Subclasses set the three Numba functions and ``bind``."""

    name: str = "base"
    #: the scheme's own victim rule (``policy.victim`` in its config, set by ``make_policy``);
    #: None = follow ``sim.victim``. The engine resolves the two without letting either silently
    #: win (:func:`dogi_ml.sim.victims.resolve_victim`).
    victim: str | None = None
    #: a selector of the scheme's own that the engine runs whatever the rule (e.g. NoDaP's
    #: expired-segment selector); it may build on the run's generic rule (``SimContext.victim_rule``)
    selector: str | None = None
    #: the generic rules the scheme can run with: None = any of ``ANY_SCHEME_VICTIMS``; ``()`` = none
    #: but its own ``selector`` (then ``victim`` names that selector)
    victim_rules: tuple[str, ...] | None = None
    #: for a scheme with its own selector: what it does, for error messages
    victim_note: str | None = None
    #: the resolved rule of the run this policy is bound to (set by the engine before ``bind``)
    victim_rule: str | None = None
    #: needs the whole write stream in advance (oracles)
    needs_future: bool = False

    def __init__(self, n_groups: int, **params):
        if int(n_groups) < 1:
            raise ValueError(f"policy {self.name}: n_groups must be >= 1, got {n_groups}")
        self.n_groups = int(n_groups)
        self.params = params
        refuse_unknown_params(self.name, params, self.accepted_params())

    # Numba functions (set by subclasses as plain attributes)
    place_user = None
    place_gc = None
    on_reclaim = no_reclaim_hook
    on_chunk_due = no_chunk_hook
    #: the engine calls it 16 user writes (8 GC relocations) ahead of ``place_user`` (``place_gc``)
    #: with the LBA to come: a policy whose hooks read or write per-LBA arrays issues
    #: ``dogi_ml.sim.kernels.prefetch(array, lba)`` for them, so those misses overlap (a hint:
    #: results never depend on it). Measured (issue 18): DOGI's loop -25% CPU beside other jobs, no
    #: change on a quiet machine.
    prefetch_lba = no_prefetch_hook

    def kernel_functions(self) -> tuple:
        """(place_user, place_gc, on_reclaim, on_chunk_due, prefetch_lba) as the Numba dispatchers
        themselves (attribute access through an instance would bind them like methods)."""
        names = ("place_user", "place_gc", "on_reclaim", "on_chunk_due", "prefetch_lba")
        return tuple(inspect.getattr_static(self, n) for n in names)

    def accepted_params(self) -> tuple[str, ...]:
        return ()

    def bind(self, ctx: SimContext) -> tuple:
        """Allocate the policy state for a run; return a non-empty namedtuple of numpy arrays."""
        return NoState(np.zeros(1, np.int64))

    #: upper bound on user writes per chunk (e.g. a retraining period); None = sim.chunk_blocks
    max_chunk_blocks: int | None = None

    def before_chunk(self, sim, start: int, n_writes: int) -> None:
        """Python hook run before the engine applies user writes ``start .. start + n_writes - 1``
        (logical times, prefill included): e.g. batched inference for exactly those writes."""

    def between_chunks(self, sim) -> None:
        """Python hook run between simulator chunks (default: nothing)."""

    def label(self) -> str:
        """The scheme's name in comparisons (a variant may add its switches)."""
        return self.name

    def summary(self, state) -> dict:
        """Extra, policy-specific outputs for the run's result."""
        return {}
