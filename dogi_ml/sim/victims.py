"""Victim selection: which sealed segment garbage collection reclaims next.

Each selector is a Numba function ``select(s, p, now) -> segment`` (``-1`` if no sealed segment
exists). Placement and victim selection are separate axes (as in SepBIT's simulator): any
policy runs with any selector, chosen by ``sim.victim``. Ties go to the lowest segment index so
runs are deterministic.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from numba.core import types
from numba.extending import overload

from .state import C_RNG, P_NSEG, P_SEG_BLOCKS, P_VICTIM_D, SEG_SEALED


@nb.njit(cache=True)
def greedy(s, p, now):
    """Fewest valid blocks (highest garbage proportion)."""
    best = -1
    best_valid = 1 << 62
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED and s.seg_valid[seg] < best_valid:
            best_valid = s.seg_valid[seg]
            best = seg
    return best


@nb.njit(cache=True)
def cost_benefit(s, p, now):
    """Rosenblum & Ousterhout: maximise (1-u)/(1+u) * age, age since the segment was sealed.

    With ``v`` valid of ``S`` blocks the score is ``(S-v)*age / (S+v)``; candidates are compared
    by cross-multiplying (no division in the scan, which is the selector's whole cost)."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    best = -1
    best_num = -1.0
    best_den = 1.0
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED:
            v = s.seg_valid[seg]
            num = float((seg_blocks - v) * (now - s.seg_seal_time[seg] + 1))
            den = float(seg_blocks + v)
            if num * best_den > best_num * den:
                best_num = num
                best_den = den
                best = seg
    return best


@nb.njit(cache=True)
def cost_benefit_sepbit(s, p, now):
    """SepBIT's variant: maximise GP * age / (1 - GP), GP = garbage proportion of the segment,
    i.e. ``(S-v)*age / v``. A segment with no valid block has an infinite score and is taken
    at once. Compared by cross-multiplying, as in :func:`cost_benefit`."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    best = -1
    best_num = -1.0
    best_den = 1.0
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED:
            v = s.seg_valid[seg]
            if v == 0:
                return seg
            num = float((seg_blocks - v) * (now - s.seg_seal_time[seg] + 1))
            den = float(v)
            if num * best_den > best_num * den:
                best_num = num
                best_den = den
                best = seg
    return best


@nb.njit(cache=True)
def cost_benefit_sqrt(s, p, now):
    """The SepBIT authors' simulator's Cost-Benefit (fallfish/sepbit, ``trace_replay/.../selection/
    CostBenefit.java``): maximise ``GP / (1 - GP) * sqrt(age)``, i.e. ``(S-v) / v * sqrt(age)``, age
    = ``now - seal time`` (theirs: time since the segment's last append). SepBIT's text (FAST'22
    §2.1) says ``GP * age / (1 - GP)`` without the root: that is :func:`cost_benefit_sepbit`. A
    segment with no valid block is taken at once (their score ``Double.MAX_VALUE``). The score is
    computed as a float (a square root cannot be cross-multiplied exactly); ties go to the lowest
    segment index (theirs: a stable sort over their segment map's order). Their GC also skips
    segments under the garbage-proportion threshold (``GCWorker.pickSegments``); this selector
    does not (see ``notes/baselines.md``)."""
    seg_blocks = s.prm[P_SEG_BLOCKS]
    best = -1
    best_score = -1.0
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED:
            v = s.seg_valid[seg]
            if v == 0:
                return seg
            score = float(seg_blocks - v) * math.sqrt(float(now - s.seg_seal_time[seg])) / float(v)
            if score > best_score:
                best_score = score
                best = seg
    return best


@nb.njit(cache=True)
def fifo(s, p, now):
    """The segment sealed longest ago (a circular log)."""
    best = -1
    best_time = 1 << 62
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED and s.seg_seal_time[seg] < best_time:
            best_time = s.seg_seal_time[seg]
            best = seg
    return best


@nb.njit(cache=True)
def _xorshift(s):
    x = s.ctr[C_RNG]
    x ^= (x << 13) & 0x7FFFFFFFFFFFFFFF
    x ^= x >> 7
    x ^= (x << 17) & 0x7FFFFFFFFFFFFFFF
    x &= 0x7FFFFFFFFFFFFFFF
    if x == 0:
        x = 1
    s.ctr[C_RNG] = x
    return x


@nb.njit(cache=True)
def d_choices(s, p, now):
    """d-choices greedy: the fewest valid blocks among d random sealed segments."""
    nseg = s.prm[P_NSEG]
    d = s.prm[P_VICTIM_D]
    best = -1
    best_valid = 1 << 62
    found = 0
    attempts = 0
    # Bounded retries: sealed segments are the large majority once GC runs.
    while found < d and attempts < 64 * d:
        attempts += 1
        seg = _xorshift(s) % nseg
        if s.seg_state[seg] == SEG_SEALED:
            found += 1
            if s.seg_valid[seg] < best_valid:
                best_valid = s.seg_valid[seg]
                best = seg
    if best < 0:
        return greedy(s, p, now)
    return best


def short_living_segments(p):
    """``(group, threshold)``: the group of the policy state ``p`` whose segments hold blocks
    predicted short-living and the lifetime threshold ``T`` of that prediction, read from
    ``p.scalars[0].short_group`` and ``.hot_threshold``; ``(-1, 0)`` for a policy without both
    fields (resolved when Numba compiles the loop, so a selector using it runs with any policy)."""
    return -1, 0


@overload(short_living_segments)
def _short_living_segments(p):
    has = False
    if isinstance(p, types.BaseNamedTuple) and "scalars" in p.fields:
        sc = p.types[p.fields.index("scalars")]
        if isinstance(sc, types.Array) and isinstance(sc.dtype, types.Record):
            has = "short_group" in sc.dtype.fields and "hot_threshold" in sc.dtype.fields
    if has:

        def impl(p):
            st = p.scalars[0]
            return np.int64(st.short_group), np.int64(st.hot_threshold)

    else:

        def impl(p):
            return np.int64(-1), np.int64(0)

    return impl


def eq1_segment(s, p, seg, now, short):
    """Adjusted Greedy's terms for segment ``seg``: ``(discounted, C)``, whether Eq. 1's discount
    applies to it and ``C``, the time since its seal. By default the segments of the short-living
    group ``short`` are discounted and ``C`` counts user writes. A policy state with the arrays
    ``seg_short`` and ``seal_clock`` and the scalars ``eq1_segments``, ``eq1_flash`` and
    ``flash_clock`` chooses its reading of Eq. 1 (Shiro's ``eq1_segments`` / ``eq1_clock``,
    :mod:`dogi_ml.policies.shiro`): ``eq1_segments`` 0 = the short group's segments, 1 = every
    segment holding a valid block predicted short-living (``seg_short[seg] > 0``), 2 = every
    segment; ``eq1_flash`` 1 = ``C`` counts every block written (user and GC:
    ``flash_clock - seal_clock[seg]``)."""
    return s.seg_group[seg] == short, now - s.seg_seal_time[seg]


def _has_fields(p, arrays, scalars) -> bool:
    """Whether the policy state type ``p`` has the array fields ``arrays`` and a ``scalars``
    record with the fields ``scalars`` (decided when Numba compiles the loop)."""
    if not isinstance(p, types.BaseNamedTuple) or "scalars" not in p.fields:
        return False
    if any(a not in p.fields for a in arrays):
        return False
    sc = p.types[p.fields.index("scalars")]
    return (
        isinstance(sc, types.Array)
        and isinstance(sc.dtype, types.Record)
        and all(f in sc.dtype.fields for f in scalars)
    )


@overload(eq1_segment)
def _eq1_segment(s, p, seg, now, short):
    if _has_fields(p, ("seg_short", "seal_clock"), ("eq1_segments", "eq1_flash", "flash_clock")):

        def impl(s, p, seg, now, short):
            st = p.scalars[0]
            mode = st.eq1_segments
            if mode == 0:
                discounted = s.seg_group[seg] == short
            elif mode == 1:
                discounted = p.seg_short[seg] > 0
            else:
                discounted = True
            if st.eq1_flash != 0:
                return discounted, st.flash_clock - p.seal_clock[seg]
            return discounted, now - s.seg_seal_time[seg]

    else:

        def impl(s, p, seg, now, short):
            return s.seg_group[seg] == short, now - s.seg_seal_time[seg]

    return impl


@nb.njit(cache=True)
def adjusted_greedy(s, p, now):
    """Shiro's Adjusted Greedy (shared/papers/shiro.txt §III-C, Eq. 1): maximise

    ``I / (1 + V T / C)`` for segments of the short-living user group, ``I`` for all others,

    ``I``/``V`` the segment's invalid/valid proportions (of its size: a retired segment's unwritten
    tail counts as space gained), ``T`` the classification threshold, ``C`` the blocks written
    since the segment was sealed (at least 1). The discount favours short-living segments that
    stayed valid long (likely mispredicted). The short group and ``T`` come from the policy's
    ``scalars`` record (``short_group``, ``hot_threshold``); without them this is greedy on the
    invalid proportion. Which segments are discounted and which writes ``C`` counts can be the
    policy's (:func:`eq1_segment`). Ties go to the lowest segment index."""
    short, thresh = short_living_segments(p)
    seg_blocks = s.prm[P_SEG_BLOCKS]
    inv_s = 1.0 / seg_blocks
    best = -1
    best_score = -1.0
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED:
            v = s.seg_valid[seg]
            score = (seg_blocks - v) * inv_s
            if short >= 0:
                discounted, c = eq1_segment(s, p, seg, now, short)
                if discounted:
                    if c < 1:
                        c = 1
                    score = score / (1.0 + v * inv_s * thresh / c)
            if score > best_score:
                best_score = score
                best = seg
    return best


VICTIMS = {
    "greedy": greedy,
    "cost_benefit": cost_benefit,
    "cost_benefit_sepbit": cost_benefit_sepbit,
    "cost_benefit_sqrt": cost_benefit_sqrt,
    "fifo": fifo,
    "d_choices": d_choices,
}


#: selectors any placement scheme can run with (the others belong to one scheme, e.g. NoDaP's)
GENERAL_VICTIMS = tuple(VICTIMS)
# Shiro's Adjusted Greedy runs with any scheme too, but is plain greedy where the scheme has no
# short-living group: it stays out of GENERAL_VICTIMS so the per-selector engine tests do not
# compile four more loops for a greedy duplicate (tests/test_shiro.py covers it).
VICTIMS["adjusted_greedy"] = adjusted_greedy
#: every selector that runs with any scheme (``sim.victim=NAME`` or a scheme's ``victim``)
ANY_SCHEME_VICTIMS = (*GENERAL_VICTIMS, "adjusted_greedy")


def register_victim(name: str, fn) -> None:
    """Make a policy-specific selector available by name (a policy names it in ``victim``)."""
    VICTIMS[name] = fn


#: ``sim.victim_for``: whom an explicit ``sim.victim`` is for
VICTIM_FOR = ("all", "followers")


def resolve_victim(sim_victim: str | None, victim_for: str, policy) -> tuple[str, str]:
    """The run's victim rule and the selector the engine runs: ``(rule, selector)``.

    Two settings name a rule: ``sim.victim`` (the run's) and ``policy.victim`` (the scheme's own,
    ``policy.victim`` in its config; ``None`` = follow ``sim.victim``). Neither silently wins:

    - only one set: that one; neither: ``greedy``;
    - both set and equal: that one;
    - both set and different: with ``sim.victim_for=followers`` (a comparison preset saying "the
      baselines use this rule, schemes with a rule of their own keep it") the scheme's own; with
      ``sim.victim_for=all`` (the default: the user asked for one rule everywhere) a
      :class:`~dogi_ml.errors.ConfigError` naming both keys and the fix.

    A scheme whose victim selection is its own (``policy.selector``, e.g. NoDaP's expired-segment
    rule) runs that selector; ``rule`` is the generic rule it builds on, checked against the rules
    it can honour (``policy.victim_rules``; ``()`` = none besides its own)."""
    from dogi_ml.errors import ConfigError

    if victim_for not in VICTIM_FOR:
        raise ConfigError(
            f"unknown sim.victim_for={victim_for!r}",
            "use all (sim.victim for every scheme, or an error) or followers (only for schemes with policy.victim=null)",
        )
    own = policy.victim
    name = policy.name
    if sim_victim is not None and own is not None and sim_victim != own:
        if victim_for == "all":
            note = f" ({policy.victim_note})" if policy.victim_note else ""
            first = (
                f"set policy.victim=null to run {name} with sim.victim={sim_victim}, "
                if policy.victim_rules != ()
                else f"{name} cannot follow it: set "
            )
            raise ConfigError(
                f"sim.victim={sim_victim} differs from policy={name}'s own rule policy.victim={own}{note}",
                f"{first}sim.victim_for=followers to keep each scheme's own rule, or drop sim.victim",
            )
        rule = own
    else:
        rule = sim_victim or own or "greedy"
    allowed = policy.victim_rules
    if allowed is None:
        allowed = ANY_SCHEME_VICTIMS
    if policy.selector is not None and allowed == ():
        allowed = (policy.selector,)
    if rule not in allowed:
        if rule not in VICTIMS:
            source = "sim.victim" if rule == sim_victim else "policy.victim"
            raise ConfigError(
                f"unknown victim selection {rule!r} ({source})", f"known: {', '.join(ANY_SCHEME_VICTIMS)}"
            )
        raise ConfigError(
            f"policy={name} cannot run with victim rule {rule!r}"
            + (f" (it chooses victims itself: {policy.victim_note})" if policy.victim_note else ""),
            f"use one of {', '.join(allowed)} (policy.victim / sim.victim)",
        )
    return rule, policy.selector or rule


def victim_label(rule: str, selector: str) -> str:
    """How results name the victim rule: ``cost_benefit``, or ``midas(cost_benefit)`` for a scheme's
    own selector built on a generic rule."""
    return rule if rule == selector else f"{selector}({rule})"


def get_victim(name: str):
    try:
        return VICTIMS[name]
    except KeyError:
        raise ValueError(
            f"unknown victim selection {name!r}; known: {', '.join(sorted(VICTIMS))} (set sim.victim=NAME)"
        ) from None
