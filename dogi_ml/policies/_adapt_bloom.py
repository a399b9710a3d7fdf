"""ADAPT's re-access (RA) identifier (§3.4): per GC group a cascade of Bloom filters, FIFO eviction.

When GC migrates a valid block of GC group ``K`` back into group ``K``, its LBA is inserted into
group ``K``'s cascade (:func:`cascade_insert`). A user write asks every cascade for a score
(:func:`cascade_score`, :func:`cascade_best`): "the score for a group is the number of bloom
filters with that LBA in that discriminator" (§3.4), i.e. roughly how many times the block was
migrated back into that group within the cascade's memory. Two insertions into the same filter
(before it fills) count once: the score counts filters, as the paper defines it.

Each cascade has ``n_filters`` filters of ``bits_per_filter`` bits (a power of two) and holds at
most ``items_per_filter`` insertions per filter. Insertions go into the newest filter; when it is
full the oldest filter is cleared and becomes the newest (a ring: ``head`` is the newest, the one
after it the oldest). Items of the live filters are never missed (no false negatives); an evicted
filter forgets its items.

Hash family (fixed, documented, deterministic): ``h1 = splitmix64(key ^ seed)``,
``h2 = splitmix64(h1) | 1``; the ``i``-th of the ``n_hashes`` bit positions is
``(h1 + i * h2) mod bits_per_filter`` (Kirsch-Mitzenmacher double hashing, 64-bit wrapping
arithmetic). All filters of all groups use the same positions for a key, so a lookup hashes once.
The false-positive rate of a filter holding ``n`` items is close to ``(1 - exp(-k n / m))^k``.

State is one NamedTuple of numpy arrays (Numba-friendly, as every policy state in dogi_ml), with
a leading group dimension so ADAPT's four GC groups share one structure and one hash per lookup.
Layout: bit-sliced. Since every filter of a cascade uses the same positions for a key, bit ``b``
of all filters of group ``g`` sits in one byte ``slices[g // per_byte, b]`` (bit ``f + shift`` =
filter ``f``; ``per_byte = 8 // n_filters`` groups share a byte, ``shift = (g % per_byte) *
n_filters``, so 4-filter cascades of two groups fill each byte instead of leaving half of it idle), so a
lookup reads ``n_hashes`` bytes per group and ANDs them; the score is the popcount of the result
(over filters holding anything). Each filter is still a classical Bloom filter (same false-positive
rate); up to 8 filters per cascade; ``bits_per_filter`` bytes per group. Measured: a lookup over
the whole cascade used to cost ~360 ns with one bit array per filter (4 groups x 4 filters, k = 5,
every probe a cache miss), far more than the paper's "nanoseconds".
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import new_scalars, record, scalar_fields

SCALARS = scalar_fields(
    n_filters=np.int64,
    bits_mask=np.int64,  # bits_per_filter - 1 (a power of two)
    n_hashes=np.int64,
    items_per_filter=np.int64,
    seed=np.uint64,
    inserted=np.int64,  # insertions so far (all groups)
    evictions=np.int64,  # filters cleared by FIFO eviction (all groups)
)


class BloomCascade(NamedTuple):
    scalars: np.ndarray  # one SCALARS record
    slices: np.ndarray  # uint8[ceil(n_groups / per_byte), bits_per_filter]: see the module docstring
    count: np.ndarray  # int64[n_groups, n_filters]: insertions into each filter since it was cleared
    head: np.ndarray  # int64[n_groups]: index of each group's newest filter
    live: np.ndarray  # uint8[n_groups]: bit f set iff filter f holds something (count > 0)


def new_cascade(
    n_filters: int,
    bits_per_filter: int,
    n_hashes: int,
    items_per_filter: int,
    seed: int = 0,
    n_groups: int = 1,
) -> BloomCascade:
    """Empty cascades for ``n_groups`` groups (ADAPT: one per GC group)."""
    if not 1 <= int(n_filters) <= 8:
        raise ValueError(f"bloom cascade: n_filters must be in 1..8 (one byte per bit position), got {n_filters}")
    m = int(bits_per_filter)
    if m < 64 or m & (m - 1):
        raise ValueError(f"bloom cascade: bits_per_filter must be a power of two >= 64, got {bits_per_filter}")
    if not 1 <= int(n_hashes) <= 32:
        raise ValueError(f"bloom cascade: n_hashes must be in 1..32, got {n_hashes}")
    if int(items_per_filter) < 1:
        raise ValueError(f"bloom cascade: items_per_filter must be >= 1, got {items_per_filter}")
    if int(n_groups) < 1:
        raise ValueError(f"bloom cascade: n_groups must be >= 1, got {n_groups}")
    scalars = new_scalars(SCALARS)
    st = record(scalars)
    st.n_filters = int(n_filters)
    st.bits_mask = m - 1
    st.n_hashes = int(n_hashes)
    st.items_per_filter = int(items_per_filter)
    st.seed = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)
    return BloomCascade(
        scalars=scalars,
        slices=np.zeros((-(-int(n_groups) // (8 // int(n_filters))), m), np.uint8),
        count=np.zeros((int(n_groups), int(n_filters)), np.int64),
        head=np.zeros(int(n_groups), np.int64),
        live=np.zeros(int(n_groups), np.uint8),
    )


def optimal_hashes(bits_per_filter: int, items_per_filter: int) -> int:
    """The ``k`` minimising the false-positive rate at full load: ``round(m / n * ln 2)``, >= 1."""
    return max(1, min(32, round(bits_per_filter / items_per_filter * math.log(2))))


def theoretical_fp(bits_per_filter: int, n_hashes: int, items: int) -> float:
    """Closed-form false-positive rate of one filter holding ``items`` items: (1 - e^{-kn/m})^k."""
    return (1.0 - math.exp(-n_hashes * items / bits_per_filter)) ** n_hashes


@nb.njit(cache=True, inline="always")
def splitmix64(x):
    """SplitMix64's finaliser (Steele et al.): a bijective 64-bit mix (uint64 in, uint64 out)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True, inline="always")
def _hashes(st, key):
    h1 = splitmix64(np.uint64(key) ^ st.seed)
    h2 = splitmix64(h1) | np.uint64(1)
    return h1, h2


@nb.njit(cache=True, inline="always")
def _place(st, g):
    """``(row, shift)`` of group ``g``'s filters in ``slices`` (see the module docstring)."""
    per_byte = 8 // st.n_filters
    return g // per_byte, (g % per_byte) * st.n_filters


@nb.njit(cache=True)
def cascade_insert(c, g, key):
    """Insert ``key`` (an LBA) into group ``g``'s newest filter; when that filter already holds
    ``items_per_filter`` insertions, the oldest filter is cleared first and becomes the newest."""
    st = c.scalars[0]
    h = c.head[g]
    row, shift = _place(st, g)
    if c.count[g, h] >= st.items_per_filter:
        h += 1
        if h == st.n_filters:
            h = 0
        keep = np.uint8(0xFF ^ (1 << h))
        keep_row = np.uint8(0xFF ^ (1 << (h + shift)))
        for b in range(c.slices.shape[1]):  # by hand: no array view (the loops run without NRT)
            c.slices[row, b] &= keep_row
        c.count[g, h] = 0
        c.live[g] &= keep
        c.head[g] = h
        st.evictions += 1
    h1, h2 = _hashes(st, key)
    mask = np.uint64(st.bits_mask)
    bit = np.uint8(1 << h)
    rbit = np.uint8(1 << (h + shift))
    pos = h1
    for _ in range(st.n_hashes):
        c.slices[row, pos & mask] |= rbit
        pos += h2
    c.count[g, h] += 1
    c.live[g] |= bit
    st.inserted += 1


@nb.njit(cache=True, inline="always")
def _popcount8(x):
    x = (x & 0x55) + ((x >> 1) & 0x55)
    x = (x & 0x33) + ((x >> 2) & 0x33)
    return (x & 0x0F) + (x >> 4)


@nb.njit(cache=True, inline="always")
def _filters_holding(c, st, g, h1, h2):
    mask = np.uint64(st.bits_mask)
    hits = np.int64(c.live[g])  # filters holding nothing (never used, or just cleared) miss
    row, shift = _place(st, g)
    pos = h1
    for _ in range(st.n_hashes):  # no early exit: independent loads overlap, no mispredictions
        hits &= np.int64(c.slices[row, pos & mask]) >> shift
        pos += h2
    return _popcount8(hits)


@nb.njit(cache=True)
def cascade_score(c, g, key):
    """Group ``g``'s score of ``key``: how many of its filters (may) hold it (0..n_filters)."""
    st = c.scalars[0]
    h1, h2 = _hashes(st, key)
    return _filters_holding(c, st, g, h1, h2)


@nb.njit(cache=True, inline="always")
def cascade_best(c, key):
    """``(group, score)`` of the group scoring ``key`` highest (the lowest such group on a tie;
    ``(-1, 0)`` when no filter holds it): ADAPT's candidate GC group for a user write. Inlined
    into the caller (it runs per user write; a call would copy the state tuple)."""
    st = c.scalars[0]
    h1, h2 = _hashes(st, key)
    best = -1
    best_score = 0
    for g in range(c.head.shape[0]):
        sc = _filters_holding(c, st, g, h1, h2)
        if sc > best_score:
            best_score = sc
            best = g
    return best, best_score


@nb.njit(cache=True)
def cascade_fill(c, g):
    """Fraction of set bits in each of group ``g``'s filters (float64[n_filters]); for tests and
    sizing: a filter's false-positive rate is about ``fill ** n_hashes``."""
    st = c.scalars[0]
    out = np.zeros(st.n_filters)
    m = st.bits_mask + 1
    row, shift = _place(st, g)
    for b in range(m):
        x = c.slices[row, b] >> shift
        for f in range(st.n_filters):
            if (x >> f) & 1:
                out[f] += 1
    return out / m


def cascade_bytes(c: BloomCascade) -> int:
    """Bytes the cascades occupy (all groups): filter bits plus counters and scalars."""
    return int(sum(a.nbytes for a in c))
