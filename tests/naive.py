"""Plain-Python twins of the simulator, its victim selectors and the heuristic placement schemes.

Slow and simple on purpose: lists and dicts, one block at a time, each rule written as the
scheme's paper or docstring states it. ``tests/test_naive_parity.py`` checks that the Numba engine
(``dogi_ml.sim``) and these twins give the same counts on small traces. Nothing here imports
``dogi_ml``: the twin must not share a bug with the code it checks.

The model (what the engine does, stated once):

- ``segments = floor(capacity * (1 + op_ratio) / segment_blocks)``, all free at the start. Free
  segments form a stack: segment 0 is handed out first, and a reclaimed segment is the next one
  handed out.
- Each group has one open segment. A group's full segment stays open until the group's next
  append, which seals it (recording the seal time) and opens the top free segment (recording the
  open time). Only sealed segments are GC victims.
- Logical time ``now`` counts user writes, prefill included. A user write at time ``t``
  invalidates the LBA's old copy, asks the policy for a group (the LBA's previous write time is
  still visible), appends, records ``t`` as the LBA's write time, and the clock moves to ``t + 1``.
  Then, at time ``t + 1``, if fewer than ``gc_free_segments`` segments are free, GC collects
  victims until ``gc_high_free_segments`` (default: the same number) are free; with the
  garbage-proportion trigger it also collects while the invalid blocks of sealed segments exceed
  that share of the blocks written into open and sealed segments (SepBIT's simulator's Log.Stat).
- GC of one victim: the policy's reclaim hook runs first; then every valid block, in slot order,
  is relocated to the group the policy's GC rule picks (its write time is unchanged). If that
  group needs a fresh segment and none is free, the block goes to the open segment with the most
  room (lowest group on a tie) and counts as a spill. The victim then becomes the top free segment.
- Prefill writes LBAs ``0 .. capacity-1`` once through the same path, then every counter is zeroed
  (the clock and the policies' state carry on).
"""

from __future__ import annotations

import collections
import math
import struct
from fractions import Fraction


class NaiveError(RuntimeError):
    """The twin cannot continue (out of segments, GC without gain)."""


MASK63 = (1 << 63) - 1


class NaiveStore:
    """A log-structured store: segments of slots, each slot an LBA or None (empty or invalid)."""

    def __init__(
        self,
        policy,
        victim,
        capacity,
        segment_blocks,
        op_ratio=0.10,
        gc_free_segments=2,
        gc_trigger="free_segments",
        gc_garbage_ratio=0.15,
        victim_d=8,
        seed=1,
        series_window=None,
        gc_high_free_segments=0,
    ):
        self.policy = policy
        self.victim = victim
        self.capacity = capacity
        self.seg_blocks = segment_blocks
        self.n_segments = math.floor(capacity * (1.0 + op_ratio) / segment_blocks)
        self.gc_free = gc_free_segments
        self.gc_high = max(gc_high_free_segments, gc_free_segments)
        # the engine holds the ratio in parts per million
        self.garbage_ppm = round(gc_garbage_ratio * 1e6) if gc_trigger == "garbage_proportion" else 0
        self.victim_d = victim_d
        self.rng = (seed * 0x9E3779B97F4A7C15 + 1) & MASK63 or 1
        self.window = series_window or max(1, capacity // 4)
        n_groups = policy.n_groups
        self.slots = [[] for _ in range(self.n_segments)]  # LBA or None per written slot
        self.n_valid = [0] * self.n_segments  # LBAs (not None) in the slots
        self.status = ["free"] * self.n_segments  # free / open / sealed
        self.group = [None] * self.n_segments
        self.opened_at = [0] * self.n_segments
        self.sealed_at = [0] * self.n_segments
        self.free = list(range(self.n_segments - 1, -1, -1))  # a stack: the end is the top
        self.open = [None] * n_groups
        self.where = {}  # LBA -> (segment, slot)
        self.written_at = {}  # LBA -> time of its last user write
        self.now = 0
        self.reset_counters()
        policy.bind(self)

    # -- what policies and selectors may read ------------------------------------------------
    def valid(self, seg):
        return self.n_valid[seg]

    def last_write(self, lba):
        """Time of the LBA's previous user write, None if never written."""
        return self.written_at.get(lba)

    def sealed(self):
        return [seg for seg in range(self.n_segments) if self.status[seg] == "sealed"]

    # -- counters ------------------------------------------------------------------------------
    def reset_counters(self):
        n = self.policy.n_groups
        self.user = 0
        self.gc = 0
        self.reclaimed = 0
        self.spills = 0
        self.bursts = 0  # times GC was triggered
        self.group_user = [0] * n
        self.group_gc = [0] * n
        self.group_reclaimed = [0] * n
        self.group_reclaimed_valid = [0] * n
        self.series = []  # (time, user writes, GC writes) per window
        self.series_mark = (0, 0)

    def invalid_blocks(self):
        return sum(len(self.slots[seg]) - self.n_valid[seg] for seg in range(self.n_segments))

    # -- appending -----------------------------------------------------------------------------
    def _take_free_segment(self, group):
        """Seal the group's open segment (if any) and open the top free one; False if none."""
        old = self.open[group]
        if old is not None:
            self.status[old] = "sealed"
            self.sealed_at[old] = self.now
        if not self.free:
            self.open[group] = None
            return False
        seg = self.free.pop()
        self.status[seg] = "open"
        self.group[seg] = group
        self.opened_at[seg] = self.now
        self.open[group] = seg
        return True

    def _append(self, group, lba):
        seg = self.open[group]
        if seg is None or len(self.slots[seg]) == self.seg_blocks:
            if not self._take_free_segment(group):
                return False
            seg = self.open[group]
        self.where[lba] = (seg, len(self.slots[seg]))
        self.slots[seg].append(lba)
        self.n_valid[seg] += 1
        return True

    def _invalidate(self, lba):
        if lba in self.where:
            seg, slot = self.where.pop(lba)
            self.slots[seg][slot] = None
            self.n_valid[seg] -= 1

    # -- user writes ---------------------------------------------------------------------------
    def write(self, lba):
        if not 0 <= lba < self.capacity:
            raise NaiveError(f"LBA {lba} beyond capacity {self.capacity}")
        self._invalidate(lba)
        g = self.policy.place_user(self, lba, self.now)
        if not self._append(g, lba):
            raise NaiveError("out of segments on a user write")
        self.written_at[lba] = self.now
        self.group_user[g] += 1
        self.user += 1
        self.now += 1
        self._collect_while_needed()
        if self.user % self.window == 0:
            u0, g0 = self.series_mark
            self.series.append((self.now, self.user - u0, self.gc - g0))
            self.series_mark = (self.user, self.gc)

    def _too_much_garbage(self):
        if not self.garbage_ppm:
            return False
        written = sum(len(self.slots[seg]) for seg in range(self.n_segments) if self.status[seg] != "free")
        garbage = sum(len(self.slots[seg]) - self.n_valid[seg] for seg in self.sealed())
        return garbage * 1_000_000 > self.garbage_ppm * written

    def _collect_while_needed(self):
        """Below the low watermark, collect up to the high one (the same unless set); with the
        garbage-proportion trigger, also collect while there is too much garbage."""
        if len(self.free) >= self.gc_free and not self._too_much_garbage():
            return
        target = self.gc_high if len(self.free) < self.gc_free else self.gc_free
        self.bursts += 1
        rounds = 0
        while len(self.free) < target or self._too_much_garbage():
            rounds += 1
            if rounds > self.n_segments:
                if len(self.free) >= self.gc_free and not self._too_much_garbage():
                    break  # only the high watermark unmet
                raise NaiveError("GC made no progress")
            victim = self.victim(self, self.now)
            if victim is None:
                raise NaiveError("GC needed but no sealed segment")
            if all(self.valid(seg) == self.seg_blocks for seg in [victim] + self.sealed()):
                # reclaiming frees nothing: every sealed segment is full of valid blocks
                if len(self.free) >= self.gc_free:
                    break  # only the garbage trigger or the high watermark unmet: not an error
                raise NaiveError("GC victim entirely valid and no garbage anywhere")
            self._collect(victim)

    def _collect(self, victim):
        self.policy.on_reclaim(self, victim, self.now)
        vgroup = self.group[victim]
        n_valid = self.valid(victim)
        self.group_reclaimed[vgroup] += 1
        self.group_reclaimed_valid[vgroup] += n_valid
        for lba in list(self.slots[victim]):
            if lba is None:
                continue
            g = self.policy.place_gc(self, lba, victim, self.now)
            del self.where[lba]
            if not self._append(g, lba):
                g = self._roomiest_group()
                if g is None or not self._append(g, lba):
                    raise NaiveError("out of segments during GC")
                self.spills += 1
            self.group_gc[g] += 1
        self.gc += n_valid
        self.reclaimed += 1
        self.slots[victim] = []
        self.n_valid[victim] = 0
        self.status[victim] = "free"
        self.group[victim] = None
        self.free.append(victim)

    def retire(self, group):
        """Seal the group's open segment now, full or not (the engine's ``retire_group``); an
        empty one goes back to the free stack."""
        seg = self.open[group]
        if seg is None:
            return
        self.open[group] = None
        if not self.slots[seg]:
            self.status[seg] = "free"
            self.group[seg] = None
            self.free.append(seg)
            return
        self.status[seg] = "sealed"
        self.sealed_at[seg] = self.now

    def _roomiest_group(self):
        best, best_room = None, 0
        for g, seg in enumerate(self.open):
            if seg is not None and self.seg_blocks - len(self.slots[seg]) > best_room:
                best, best_room = g, self.seg_blocks - len(self.slots[seg])
        return best

    # -- a run ---------------------------------------------------------------------------------
    def run(self, writes, prefill=True):
        if prefill:
            for lba in range(self.capacity):
                self.write(lba)
            self.reset_counters()
        for lba in writes:
            self.write(int(lba))
        return self.result()

    def result(self):
        groups = [
            {
                "group": g,
                "user_writes": self.group_user[g],
                "gc_writes": self.group_gc[g],
                "reclaimed_segments": self.group_reclaimed[g],
                "reclaimed_valid_blocks": self.group_reclaimed_valid[g],
            }
            for g in range(self.policy.n_groups)
        ]
        return {
            "user_writes": self.user,
            "gc_writes": self.gc,
            "reclaimed_segments": self.reclaimed,
            "gc_spills": self.spills,
            "gc_bursts": self.bursts,
            "free_segments": len(self.free),
            "invalid_blocks": self.invalid_blocks(),
            "groups": groups,
            "series": self.series,
            "placement": {lba: seg * self.seg_blocks + slot for lba, (seg, slot) in self.where.items()},
        }


# -- victim selectors ----------------------------------------------------------------------------
# Each takes the store and the GC time and returns a sealed segment (None if there is none).
# Ties go to the lowest segment number, as in the engine.


def greedy(store, now):
    """The fewest valid blocks."""
    return min(store.sealed(), key=lambda seg: (store.valid(seg), seg), default=None)


def cost_benefit(store, now):
    """Rosenblum and Ousterhout: the largest (1 - u) / (1 + u) * age, with u the segment's valid
    fraction and age = now - seal time + 1; i.e. (S - v) * age / (S + v). Scores compared as exact
    fractions (the engine cross-multiplies in floats, exact at these sizes)."""

    def score(seg):
        v, S = store.valid(seg), store.seg_blocks
        return Fraction((S - v) * (now - store.sealed_at[seg] + 1), S + v)

    return _best_score(store.sealed(), score)


def cost_benefit_sepbit(store, now):
    """SepBIT's variant: the largest GP * age / (1 - GP), GP = garbage proportion, i.e.
    (S - v) * age / v; a segment with no valid block scores infinity (the lowest such wins)."""
    for seg in store.sealed():
        if store.valid(seg) == 0:
            return seg

    def score(seg):
        v, S = store.valid(seg), store.seg_blocks
        return Fraction((S - v) * (now - store.sealed_at[seg] + 1), v)

    return _best_score(store.sealed(), score)


def cost_benefit_sqrt(store, now):
    """The SepBIT authors' CostBenefit.java: the largest GP / (1 - GP) * sqrt(age), age = now - seal
    time, i.e. (S - v) / v * sqrt(age); a segment with no valid block wins at once (the lowest
    such). A float score (as the engine computes it: the same IEEE operations in the same order)."""
    for seg in store.sealed():
        if store.valid(seg) == 0:
            return seg

    def score(seg):
        v, S = store.valid(seg), store.seg_blocks
        return float(S - v) * math.sqrt(float(now - store.sealed_at[seg])) / float(v)

    return _best_score(store.sealed(), score)


def fifo(store, now):
    """The segment sealed longest ago."""
    return min(store.sealed(), key=lambda seg: (store.sealed_at[seg], seg), default=None)


def d_choices(store, now):
    """The fewest valid blocks among ``d`` random sealed segments (first found wins a tie).

    Random numbers: xorshift64 (shifts 13, 7, 17) kept to 63 bits, seeded as the engine seeds it,
    segment = number mod segments; at most 64 * d draws, else plain greedy."""
    best, best_valid, found, draws = None, None, 0, 0
    while found < store.victim_d and draws < 64 * store.victim_d:
        draws += 1
        x = store.rng
        x ^= (x << 13) & MASK63
        x ^= x >> 7
        x ^= (x << 17) & MASK63
        store.rng = x or 1
        seg = store.rng % store.n_segments
        if store.status[seg] == "sealed":
            found += 1
            if best is None or store.valid(seg) < best_valid:
                best, best_valid = seg, store.valid(seg)
    return greedy(store, now) if best is None else best


VICTIMS = {
    "greedy": greedy,
    "cost_benefit": cost_benefit,
    "cost_benefit_sepbit": cost_benefit_sepbit,
    "cost_benefit_sqrt": cost_benefit_sqrt,
    "fifo": fifo,
    "d_choices": d_choices,
}


def _best_score(candidates, score):
    best, best_score = None, None
    for seg in candidates:  # ascending, so a tie keeps the lower segment
        s = score(seg)
        if best is None or s > best_score:
            best, best_score = seg, s
    return best


# -- placement schemes ---------------------------------------------------------------------------
# Each has ``n_groups``, ``bind(store)``, ``place_user(store, lba, now)``,
# ``place_gc(store, lba, victim, now)`` and ``on_reclaim(store, victim, now)``.


class NoSep:
    """Everything in one group."""

    def __init__(self, n_groups=1):
        self.n_groups = n_groups

    def bind(self, store):
        pass

    def place_user(self, store, lba, now):
        return 0

    def place_gc(self, store, lba, victim, now):
        return 0

    def on_reclaim(self, store, victim, now):
        pass


class SepGC(NoSep):
    """User writes in group 0, GC writes in group 1."""

    def __init__(self, n_groups=2):
        super().__init__(2)

    def place_gc(self, store, lba, victim, now):
        return 1


class SepBIT(NoSep):
    """SepBIT (Wang et al., FAST'22); Class k is group k - 1. Default: the authors' simulator
    (fallfish/sepbit ``SepBIT.java``), written as they wrote it, with a real queue.

    Their clock: ``accessId`` counts user writes, 1-based, and is the id of the last user write
    while GC runs (here: ``now + 1`` at a user write, ``now`` during GC).
    User write (id ``a``): Class 1 iff ``a - lba2fifo.get(lba, -1) < min(l, len(fifo))``. Then the
    LBA is queued with its id; if the queue is longer than ``min(V, l)`` the head leaves (and its
    LBA is forgotten if that was its latest entry), and a second one if it is still longer than
    ``l``. ``V`` = blocks stored minus invalid blocks of sealed segments, before this block is
    stored (a full segment is sealed for them: they seal the write that fills it).
    GC write: from a Class-1 segment -> Class 3; else age = id - last user write id; level 3,
    then one more per factor 4 while age >= 4l, 16l (at most 5).
    Reclaim of a Class-1 segment: lifespan = id - its creation id, where a segment is created when
    the previous one of Class 1 fills (the first one at time 0); every 16, l = their mean (float).

    ``variant="paper"``: Algorithm 1 as printed: v = now - last user write (infinite for a first
    write), Class 1 iff v < l; GC age g = now - last user write; creation = first append."""

    def __init__(self, n_groups=6, variant="code"):
        super().__init__(6)
        self.variant = variant

    def bind(self, store):
        self.ell = math.inf
        self.lifespans = []
        self.fifo = collections.deque()
        self.lba2fifo = {}
        self.created = {}  # Class-1 segment -> creation id
        self.next_created = 0  # creation id of Class 1's next segment
        self.opening_created = 0

    def _valid_blocks(self, store):
        """Their log.getnValidBlocks(): stored blocks minus invalid blocks of sealed segments."""
        n = 0
        for seg in range(store.n_segments):
            n += store.valid(seg)
            if store.status[seg] == "open" and len(store.slots[seg]) < store.seg_blocks:
                n += len(store.slots[seg]) - store.valid(seg)
        return n

    def place_user(self, store, lba, now):
        if self.variant == "paper":
            last = store.last_write(lba)
            v = math.inf if last is None else now - last
            return 0 if v < self.ell else 1
        seg0 = store.open[0]
        if seg0 is not None and seg0 not in self.created:
            self.created[seg0] = self.opening_created
        a = now + 1
        level = 0 if a - self.lba2fifo.get(lba, -1) < min(self.ell, len(self.fifo)) else 1
        self.lba2fifo[lba] = a
        self.fifo.append(lba)
        if len(self.fifo) > min(self._valid_blocks(store), self.ell):
            head_id = a - len(self.fifo) + 1
            old = self.fifo.popleft()
            if self.lba2fifo.get(old) == head_id:
                del self.lba2fifo[old]
            if len(self.fifo) > self.ell:
                old = self.fifo.popleft()
                if self.lba2fifo.get(old) == head_id + 1:
                    del self.lba2fifo[old]
        if level == 0:
            seg = store.open[0]
            if seg is None or len(store.slots[seg]) == store.seg_blocks:
                self.opening_created = self.next_created  # this write opens a new segment
                filled = 1
            else:
                filled = len(store.slots[seg]) + 1
            if filled == store.seg_blocks:
                self.next_created = a  # they open the next segment as this one fills
        return level

    def place_gc(self, store, lba, victim, now):
        if store.group[victim] == 0:
            return 2
        if self.variant == "paper":
            g = now - store.last_write(lba)
            if g < 4 * self.ell:
                return 3
            if g < 16 * self.ell:
                return 4
            return 5
        age = now - (store.last_write(lba) + 1)
        level, base = 3, self.ell * 4
        while age >= base and level < 5:
            base *= 4
            level += 1
        return level

    def on_reclaim(self, store, victim, now):
        if store.group[victim] == 0:
            if self.variant == "paper":
                created = store.opened_at[victim]
            else:
                created = self.created.pop(victim)
            self.lifespans.append(now - created)
            if len(self.lifespans) == 16:
                self.ell = sum(self.lifespans) / 16
                self.lifespans = []


class MiDA(NoSep):
    """Groups by migration count: user writes -> group 0 (count reset); each GC move -> one group
    further, capped at the last."""

    def __init__(self, n_groups=6):
        super().__init__(n_groups)

    def bind(self, store):
        self.migrations = {}

    def place_user(self, store, lba, now):
        self.migrations[lba] = 0
        return 0

    def place_gc(self, store, lba, victim, now):
        m = min(self.migrations.get(lba, 0) + 1, self.n_groups - 1)
        self.migrations[lba] = m
        return m


class DAC(NoSep):
    """Dynamic dAta Clustering as in the SepBIT authors' ``DAC.java``: a per-block level (0 =
    coldest). A never-written LBA gets level 0; a rewrite moves it one level hotter, a GC write one
    colder, within 0 .. n_groups - 1; the block goes to its (new) level. ``variant="paper"``: every
    user write promotes, the first one too (SepBIT's text), so a new LBA lands in level 1."""

    def __init__(self, n_groups=6, variant="code"):
        super().__init__(n_groups)
        self.variant = variant

    def bind(self, store):
        self.region = {}

    def place_user(self, store, lba, now):
        if lba not in self.region and self.variant == "code":
            r = 0
        else:
            r = min(self.region.get(lba, 0) + 1, self.n_groups - 1)
        self.region[lba] = r
        return r

    def place_gc(self, store, lba, victim, now):
        r = max(self.region.get(lba, 0) - 1, 0)
        self.region[lba] = r
        return r


class WARCIP(NoSep):
    """WARCIP as the SepBIT authors' ``Warcip.java`` does it, with their lists.

    ``clusters[0]`` is the GC class (group 0, every GC write); the others are user clusters, each
    a dict with its group, centre (starts at 0), ``blocks`` (user blocks in its open segment) and
    ``writes`` (user writes this period). User write: ui = now - last user write + penalty (0 if
    never written), penalty cleared; the nearest centre wins, scanning from the last cluster down
    to cluster 1, strict < (a tie keeps the later one); centre = (centre * blocks + ui) /
    (blocks + 1). When the write fills the cluster's segment: 256 such seals -> split or merge
    (below); a cluster marked for merging is removed, else its block count restarts. Split: the
    first user cluster with more than half the period's writes (integer half), if fewer than
    n_groups clusters: a new one before it, centre = mean of its neighbours, in the lowest free
    group. Else the first user cluster with fewer writes than a segment is marked (if none is).
    Then the period's counts restart. GC write: penalty = (now - 1) - last user write. A merged
    cluster's full segment is sealed at the next user write or reclaim (the engine's
    retire_group)."""

    def __init__(self, n_groups=6):
        super().__init__(n_groups)

    def bind(self, store):
        self.clusters = [{"group": g, "center": 0.0, "blocks": 0, "writes": 0} for g in range(self.n_groups)]
        self.total = 0
        self.sealed_user = 0
        self.next_merge = -1
        self.penalty = {}
        self.to_retire = None

    def _retire_merged(self, store):
        g, self.to_retire = self.to_retire, None
        if g is not None:
            seg = store.open[g]
            if seg is not None and len(store.slots[seg]) == store.seg_blocks:
                store.retire(g)

    def place_user(self, store, lba, now):
        self._retire_merged(store)
        last = store.last_write(lba)
        ui = 0 if last is None else now - last + self.penalty.get(lba, 0)
        self.penalty[lba] = 0
        nearest, min_diff = 1, float("inf")
        for i in range(len(self.clusters) - 1, 0, -1):
            diff = abs(self.clusters[i]["center"] - ui)
            if diff < min_diff:
                nearest, min_diff = i, diff
        c = self.clusters[nearest]
        c["center"] = (c["center"] * c["blocks"] + ui) / (c["blocks"] + 1)
        c["blocks"] += 1
        c["writes"] += 1
        self.total += 1
        g = c["group"]
        seg = store.open[g]
        filled = 1 if seg is None or len(store.slots[seg]) == store.seg_blocks else len(store.slots[seg]) + 1
        if filled == store.seg_blocks:
            self._seal(store, nearest)
        return g

    def _seal(self, store, i):
        self.sealed_user += 1
        if self.next_merge == i:
            self.to_retire = self.clusters.pop(i)["group"]
            self.next_merge = -1
        else:
            self.clusters[i]["blocks"] = 0
        if self.sealed_user == 256:
            self.sealed_user = 0
            self._split_and_merge(store)

    def _split_and_merge(self, store):
        split = False
        for i in range(1, len(self.clusters)):
            if self.clusters[i]["writes"] > self.total // 2 and len(self.clusters) < self.n_groups:
                used = {c["group"] for c in self.clusters}
                free = min(g for g in range(self.n_groups) if g not in used)
                center = (self.clusters[i - 1]["center"] + self.clusters[i]["center"]) / 2
                self.clusters.insert(i, {"group": free, "center": center, "blocks": 0, "writes": 0})
                split = True
                break
        if not split:
            for i in range(1, len(self.clusters)):
                if self.clusters[i]["writes"] < store.seg_blocks:
                    if self.next_merge == -1:
                        self.next_merge = i
                    break
        self.total = 0
        for c in self.clusters:
            c["writes"] = 0

    def place_gc(self, store, lba, victim, now):
        self.penalty[lba] = now - 1 - store.last_write(lba)
        return self.clusters[0]["group"]

    def on_reclaim(self, store, victim, now):
        self._retire_merged(store)


POLICIES = {"nosep": NoSep, "sepgc": SepGC, "sepbit": SepBIT, "mida": MiDA, "dac": DAC, "warcip": WARCIP}


def simulate(policy, victim, writes, capacity, segment_blocks, prefill=True, n_groups=None, params=None, **config):
    """Run the twin of ``policy`` (with ``params``, e.g. a variant) with selector ``victim`` over
    ``writes``; the result dict."""
    cls = POLICIES[policy]
    params = params or {}
    pol = cls(**params) if n_groups is None else cls(n_groups, **params)
    store = NaiveStore(pol, VICTIMS[victim], capacity, segment_blocks, **config)
    return store.run(writes, prefill=prefill)


def _f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (ties to even). One operation on two float32 values
    done in float64 and rounded once to float32 is that operation in float32: 53 >= 2 * 24 + 2
    bits, so the double rounding cannot differ (Figueroa 1995)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def minos_op_distance_f32(x, y, weights, lanes=16):
    """MINOS's OP distance (Eqs. 1-3) between ID-Vectors ``x`` and ``y`` (each a pair of
    sequences, writes and invalidations per slot) in float32, in the order
    ``dogi_ml/policies/_minos_cluster.py`` states for its kernels: each slot's term
    ``w * |Wx Iy - Wy Ix| / max(Wx + Wy, 1)`` evaluated left to right, slot ``t`` added into
    partial sum ``t % lanes`` in increasing ``t``, then lane ``j + h`` added into lane ``j`` for
    ``h = lanes/2, ..., 1``. Every operation is rounded to float32 as it happens, so the result
    is the kernel's to the last bit."""
    acc = [0.0] * lanes
    for t, (w, wx, ix, wy, iy) in enumerate(zip(weights, x[0], x[1], y[0], y[1])):
        w, wx, ix, wy, iy = (_f32(float(v)) for v in (w, wx, ix, wy, iy))
        cross = abs(_f32(_f32(wx * iy) - _f32(wy * ix)))
        term = _f32(_f32(w * cross) / max(_f32(wx + wy), 1.0))
        acc[t % lanes] = _f32(acc[t % lanes] + term)
    h = lanes // 2
    while h >= 1:
        for j in range(h):
            acc[j] = _f32(acc[j] + acc[j + h])
        h //= 2
    return acc[0]


def minos_cluster_adjacent(W, I, k, weights):
    """MINOS Algorithm 3 in plain Python (float64): merge the closest *adjacent* clusters of the
    rows of ``W``/``I`` (ID-Vectors, one list per virtual stream) by the OP distance of Eqs.
    (1)-(3) with per-slot ``weights``, recomputing every adjacent distance after each merge,
    until ``k`` remain (ties: lowest index). Returns the physical stream of each row, numbered
    in order of first member."""
    wt = [float(x) for x in weights]

    def dist(x, y):
        return math.fsum(
            w * abs(wx * iy - wy * ix) / max(wx + wy, 1.0) for w, wx, ix, wy, iy in zip(wt, x[0], x[1], y[0], y[1])
        )

    clusters = [([v], ([float(x) for x in W[v]], [float(x) for x in I[v]])) for v in range(len(W))]
    while len(clusters) > k:
        d = [dist(clusters[j][1], clusters[j + 1][1]) for j in range(len(clusters) - 1)]
        j = d.index(min(d))
        (ma, (wa, ia)), (mb, (wb, ib)) = clusters[j], clusters[j + 1]
        merged = ([a + b for a, b in zip(wa, wb)], [a + b for a, b in zip(ia, ib)])
        clusters[j : j + 2] = [(ma + mb, merged)]
    out = [0] * len(W)
    for c, (members, _) in enumerate(clusters):
        for v in members:
            out[v] = c
    return out


def midas_first_bucket(past, tw, unit, pps):
    """MiDAS's search (markov/midas.py ``_first_bucket_at``) as the authors' code finds a group's
    first update-interval bucket: a walk from bucket 0 to the first whose start ``j * unit / pps``
    is not before ``past`` (``tw`` if none)."""
    j = 0
    while j < tw and j * unit / pps < past:
        j += 1
    return j


def concordance_tau_b(predicted, lifetimes, horizon):
    """The hybrid's ``lifetimes=select`` score in plain Python, pair by pair: Kendall's tau-b
    between predicted buckets and lifetimes censored at ``horizon`` (a negative lifetime or one
    beyond the horizon: outlived it). Two samples that both outlived the horizon are tied in
    lifetime (their order is unknown). ``(concordant - discordant) / sqrt((n0 - t_pred) x (n0 -
    t_life))``, ``n0`` the pairs, ``t_*`` the pairs tied in that variable."""
    life = [x if 0 <= x <= horizon else horizon + 1 for x in lifetimes]
    conc = disc = tied_pred = tied_life = pairs = 0
    n = len(life)
    for i in range(n):
        for j in range(i + 1, n):
            pairs += 1
            dp = predicted[i] - predicted[j]
            dl = life[i] - life[j]
            if dp == 0:
                tied_pred += 1
            if dl == 0:
                tied_life += 1
            if dp == 0 or dl == 0:
                continue
            if (dp > 0) == (dl > 0):
                conc += 1
            else:
                disc += 1
    return (conc - disc) / math.sqrt((pairs - tied_pred) * (pairs - tied_life))


def shiro_count_state(writes, counted, age, t, seg_type, bins=24, offset=8, n_groups=8):
    """Shiro's credit_state=counts (dogi_ml.policies.shiro.count_state), spelled out: the LBA's
    expected lifetime ``counted / writes`` and the block's ``age`` each in half-octave bins of their
    ratio to the threshold ``t`` (``floor(2 log2(x / t)) + offset``, clipped to ``0 .. bins - 1``;
    the count's bin is ``bins`` when ``writes`` is 0), then the victim's segment type."""

    def half_octave(x):
        return min(max(math.floor(2 * math.log2(x / t)) + offset, 0), bins - 1)

    count_bin = bins if writes == 0 else half_octave(counted / writes)
    return (count_bin * bins + half_octave(max(age, 1))) * n_groups + seg_type


def decayed_write_counts(lbas, decay):
    """Shiro's count_halflife counts, spelled out: for each LBA of the write stream ``lbas`` (the
    user writes after the prefill, numbered 1, 2, ...), the sum over its writes of
    ``exp(-decay x (its last write's number - that write's number))``, and that last number (0 for
    an LBA never written)."""
    counts, last = {}, {}
    for k, lba in enumerate(lbas, start=1):
        last[int(lba)] = k
    for k, lba in enumerate(lbas, start=1):
        counts[int(lba)] = counts.get(int(lba), 0.0) + math.exp(-decay * (last[int(lba)] - k))
    return counts, last


def shiro_frequency_level(writes, counted, t, bands=(1, 4, 16, 64)):
    """Shiro's agent=frequency: the GC level (0-based) of the band of ``t`` that holds the LBA's
    expected lifetime ``counted / writes``; the top level for an LBA with no counted write."""
    if writes == 0:
        return len(bands)
    e = counted / writes
    return sum(e >= b * t for b in bands)


def count_decay(x: int, dt: int, half: int, pow_table) -> int:
    """A hybrid count bundle's integer decay (``dogi_ml.policies.hybrid_frozen.count_decay``, the
    harness's ``hl_decay``): ``x * 2^(-dt / half)`` with a shift per whole half-life, then the Q16
    power table's entries for the fraction's high byte (``pow_table[f >> 8]``) and low byte
    (``pow_table[256 + (f & 255)]``), ``f`` the fraction in 1/65536 of a half-life, each product
    rounded down; ``half == 0``: no decay; 48 or more half-lives: 0."""
    if half == 0:
        return x
    if dt // half >= 48:
        return 0
    x >>= dt // half
    f = ((dt % half) << 16) // half
    x = (x * pow_table[f >> 8]) >> 16
    return (x * pow_table[256 + (f & 255)]) >> 16


def count_changes(lbas, first, n_lbas, decay, threshold, drift, prior=0.5):
    """The hybrid's count_reset change test (policies/hybrid.py ``_stream_changed``), spelled out:
    the user writes ``lbas`` of the trace (after the prefill; the first is write number ``first``)
    counted twice, undecayed since the epoch's start and decayed by ``exp(-decay x age)``; at
    each write, once the test is not resting, the statistic S = max(0, S + log(p_fast / p_epoch)
    - drift) with p = (count before the write + prior) / (writes weighed + prior x n_lbas); past
    ``threshold`` a new epoch starts at the write (its undecayed count restarts at 1) and the test
    rests for 1 / decay writes. Returns the write numbers at which epochs started. Kept in the log
    domain here, where the kernel multiplies likelihood ratios."""
    epoch, fast = {}, {}  # lba -> (count, the write number it is for)
    start, rest, s, weight = first, 0.0, 0.0, 0.0
    changes = []
    for k, lba in enumerate(lbas):
        now = first + k
        lba = int(lba)
        c_epoch, at = epoch.get(lba, (0.0, -1))
        if at < start:
            c_epoch = 0.0
        c_fast, at_fast = fast.get(lba, (0.0, -1))
        if c_fast > 0:
            c_fast *= math.exp(-decay * (now - at_fast))
        epoch[lba] = (c_epoch + 1.0, now)
        fast[lba] = (c_fast + 1.0, now)
        w_fast, weight = weight, (weight + 1.0) * math.exp(-decay)
        if now < rest:
            continue
        p_fast = (c_fast + prior) / (w_fast + prior * n_lbas)
        p_epoch = (c_epoch + prior) / ((now - start) + prior * n_lbas)
        s = max(s + math.log(p_fast / p_epoch) - drift, 0.0)
        if s > threshold:
            changes.append(now)
            start, rest, s = now, now + 1.0 / decay, 0.0
            epoch[lba] = (1.0, now)
    return changes


def first_read_clocks(requests, capacity, prefill=True, never=2**62):
    """Shiro's credit_state=counts_read clocks (dogi_ml.policies.shiro.first_read_clocks), spelled
    out from ``requests`` ``(lba, nblocks, op)`` (op 0 read, 1 write, 2 trim): the block events in
    order, each write numbered by the simulator's clock (the prefill's ``capacity`` writes first, LBA
    w as write w); for each write, the number of the first write that comes after the first read of
    its LBA that follows it and precedes its next write, ``never`` if there is none."""
    events = [(lba + b, op) for lba, nblocks, op in requests for b in range(nblocks) if op in (0, 1)]
    writes = [(w, w) for w in range(capacity if prefill else 0)]  # (clock, lba)
    clock = len(writes)
    position = {}  # clock of a write -> its index among the events (prefill: before them all)
    for w, _ in writes:
        position[w] = -1
    for i, (lba, op) in enumerate(events):
        if op == 1:
            writes.append((clock, lba))
            position[clock] = i
            clock += 1
    out = []
    for w, lba in writes:
        found = never
        written_before = sum(1 for _, o in events[: position[w] + 1] if o == 1)  # writes up to and with w
        for lba2, op in events[position[w] + 1 :]:
            if lba2 != lba:
                if op == 1:
                    written_before += 1
                continue
            if op == 1:
                break
            found = (capacity if prefill else 0) + written_before
            break
        out.append(found)
    return out
