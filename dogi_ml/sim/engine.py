"""The simulator: a policy, a victim selector and a state, fed chunk after chunk.

Garbage collection runs after a user write once fewer than ``sim.gc_free_segments`` segments
are free (the low watermark). By default it then collects one victim at a time until that many
are free again, so victims' survivors share open segments with the user writes that keep
arriving. With ``sim.gc_high_free_segments`` set, each trigger is a burst that goes on until
that many segments are free (the high watermark), as firmware does: Shiro (shared/papers/shiro.txt,
"GC triggering") starts foreground GC below 5% free superblocks and background GC below 25%.
The MiDAS simulator (sungkyun123/MiDAS-Simulation, ``ssdsimul.cpp``: ``GC()`` loops
``while (fbqueue.size() < FREENUM)`` after every page write, ``FREENUM = 4`` in ``ssd_config.cpp``)
has the single watermark, i.e. this engine's default (its survivors go to the open segment of
the victim's next group, ``do_gc``: a placement choice, not a GC schedule). The high watermark
follows Shiro's two thresholds read as hysteresis; a count of segments, not a share, because at
the default 10% over-provisioning a quarter of all segments can never be free.
``sim.gc_free_ratio`` gives the low watermark as a share of the physical segments instead, and
``sim.gc_background_free_ratio`` with ``sim.gc_idle_gap_us`` adds background GC: in an idle gap
of the write timestamps longer than ``gc_idle_gap_us``, GC collects until that share is free.

Time: with the RAID chunk layer (``sim.raid_chunk_blocks`` > 0) or background GC, every user
write carries a wall-clock time in µs (``feed(writes, times)``). The chunk layer (ADAPT,
shared/papers/adapt-icpp25.txt §2.2) fills each group's open segment chunk by chunk; a chunk not
full when its oldest block has waited more than ``sim.raid_chunk_timeout_us`` is flushed with
padding blocks (physical slots, invalid from the start, counted as written: WAF = (user + GC +
padding + shadow) / user); a GC pass that ends inside a chunk pads it at once. Off by default,
and then nothing of it runs.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from dogi_ml.errors import DogiMLError, checked_setting

from .kernels import retire_group, specialise
from .policy_api import PlacementPolicy, SimContext
from .state import (
    C_BG_GC,
    C_BG_PASSES,
    C_CHUNKS,
    C_ERROR_ARG,
    C_FREE,
    C_GC,
    C_GC_BURSTS,
    C_INVALID,
    C_LAZY,
    C_NOW,
    C_NOW_US,
    C_PAD,
    C_PAD_CHUNKS,
    C_RECLAIMED,
    C_SERIES_EXTRA,
    C_SERIES_GC,
    C_SERIES_USER,
    C_SHADOW,
    C_SPILLS,
    C_USER,
    ERR_OK,
    ERROR_TEXT,
    P_BG_FREE,
    P_WINDOW,
    check_invariants,
    new_state,
    state_nbytes,
)
from .victims import get_victim, resolve_victim, victim_label

_NO_TIMES = np.empty(0, np.int64)  # the times argument of an untimed run


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a`` itself if it is read-only, else a read-only view of it."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.setflags(write=False)
    return view


class SimulationError(DogiMLError, RuntimeError):
    """The run cannot continue (impossible configuration or exhausted space)."""


@dataclass
class SimConfig:
    """Simulator parameters (Hydra group ``sim``)."""

    capacity_blocks: int | None = None  # logical capacity; default: the trace's capacity/WSS
    op_ratio: float = 0.10  # physical = logical x (1 + op), whole segments
    segment_blocks: int = 512
    victim: str | None = None  # None: the policy's own rule (policy.victim), else greedy
    victim_for: str = "all"  # all: a set victim binds every scheme (or errors); followers: only policy.victim=None ones
    victim_d: int = 8  # d of d-choices
    gc_trigger: str = "free_segments"  # or "garbage_proportion" (SepBIT)
    gc_free_segments: int = 2  # GC runs while fewer segments than this are free
    gc_high_free_segments: int | None = None  # once triggered, GC collects until this many are free (None/0 = off)
    gc_garbage_ratio: float = 0.15
    prefill: bool = True  # write the logical space once before the trace
    chunk_blocks: int = 1 << 20  # user writes between Python hooks / invariant checks
    series_window: int | None = None  # user writes per instantaneous-WAF sample (default capacity/4)
    debug_invariants: bool = False  # check the state's invariants after every chunk
    seed: int = 1
    # RAID chunk layer (ADAPT): blocks per chunk (0 = off; 16 = 64 KiB) and the padding deadline
    raid_chunk_blocks: int = 0
    raid_chunk_timeout_us: int = 100
    # GC trigger options (Shiro): low watermark as a share of physical segments (replaces
    # gc_free_segments), background GC in idle gaps of the timestamps (both null = off)
    gc_free_ratio: float | None = None
    gc_background_free_ratio: float | None = None
    gc_idle_gap_us: int | None = None
    # time source (pipeline): null = the trace's own timestamps; else light | medium | heavy or a
    # mean interval in µs between requests for a seeded exponential arrival process
    arrival: str | float | None = None
    # checkpoints (dogi_ml.sim.checkpoint; the pipeline takes them): at the first chunk boundary
    # past every checkpoint_every user writes and/or checkpoint_minutes of wall time, into
    # checkpoint_dir. They never change the outcome, so they are left out of the result's config.
    checkpoint_every: int | None = None
    checkpoint_minutes: float | None = None
    checkpoint_dir: str | None = None

    @classmethod
    def from_mapping(cls, cfg) -> SimConfig:
        """The ``sim`` config group as a SimConfig; a value of the wrong type or range (a string
        for a number, 0 for a positive count) is a ConfigError naming ``sim.<key>`` and the fix."""
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in dict(cfg).items() if k in known}
        for key, value in data.items():
            rule = _SETTING_RULES.get(key)
            if rule is not None:
                kind, minimum, nullable = rule
                example = (
                    getattr(cls, key) if getattr(cls, key) is not None else _NULL_DEFAULT_EXAMPLES.get(key, minimum)
                )
                data[key] = checked_setting(
                    value, f"sim.{key}", kind, minimum=minimum, nullable=nullable, example=example
                )
        return cls(**data)


# SimConfig keys checked by from_mapping: (type, smallest value, null allowed). 0 is refused where
# it once meant "the default" (capacity_blocks, series_window): null says that.
_SETTING_RULES = {
    "capacity_blocks": (int, 1, True),
    "op_ratio": (float, 0, False),
    "segment_blocks": (int, 1, False),
    "victim_d": (int, 1, False),
    "gc_free_segments": (int, 0, False),
    "gc_high_free_segments": (int, 0, True),
    "gc_garbage_ratio": (float, 0, False),
    "prefill": (bool, None, False),
    "chunk_blocks": (int, 1, False),
    "series_window": (int, 1, True),
    "debug_invariants": (bool, None, False),
    "seed": (int, None, False),
    "raid_chunk_blocks": (int, 0, False),
    "raid_chunk_timeout_us": (int, 0, False),
    "gc_free_ratio": (float, 0, True),
    "gc_background_free_ratio": (float, 0, True),
    "gc_idle_gap_us": (int, 0, True),
    "checkpoint_every": (int, 1, True),
    "checkpoint_minutes": (float, 0, True),
}

#: a value to suggest in the message for each checked key whose default is null (its smallest
#: value was suggested: sim.capacity_blocks=1, sim.gc_free_ratio=0, which the run then refuses)
_NULL_DEFAULT_EXAMPLES = {
    "capacity_blocks": 262144,  # 1 GiB of 4 KiB blocks
    "gc_high_free_segments": 8,
    "series_window": 65536,
    "gc_free_ratio": 0.05,  # conf/experiment/shiro_bggc.yaml
    "gc_background_free_ratio": 0.25,
    "gc_idle_gap_us": 5000,
    "checkpoint_every": 16777216,
    "checkpoint_minutes": 10,
}

#: SimConfig keys that decide when and where checkpoints go, never what a run computes
CHECKPOINT_KEYS = ("checkpoint_every", "checkpoint_minutes", "checkpoint_dir")


class Simulator:
    """Runs a placement policy over block writes; resumable chunk by chunk.

    >>> sim = Simulator(policy, SimConfig(), capacity=262144)
    >>> sim.prefill(); sim.feed(writes[:n]); sim.feed(writes[n:]); sim.result()
    """

    def __init__(
        self, policy: PlacementPolicy, config: SimConfig, capacity: int, stream: np.ndarray | None = None, trace=None
    ):
        self.policy = policy
        self.cfg = config
        self.capacity = int(capacity)
        cfg = config
        if self.capacity <= 0:
            raise SimulationError("logical capacity must be positive (sim.capacity_blocks)")
        if cfg.segment_blocks <= 0:
            raise SimulationError(f"sim.segment_blocks must be positive, got {cfg.segment_blocks}")
        if not 0 <= cfg.op_ratio < 100:
            raise SimulationError(
                f"sim.op_ratio must be >= 0 and below 100 (a share of the logical capacity), got {cfg.op_ratio}"
            )
        self.n_groups = policy.n_groups
        self.n_segments = int(math.floor(self.capacity * (1.0 + cfg.op_ratio) / cfg.segment_blocks))
        gc_free = int(cfg.gc_free_segments)
        if cfg.gc_free_ratio is not None:
            gc_free = self._ratio_segments("gc_free_ratio", cfg.gc_free_ratio)
        if gc_free < 1:
            raise SimulationError(f"sim.gc_free_segments must be >= 1, got {gc_free}")
        gc_high = self._high_watermark(cfg.gc_high_free_segments, gc_free)
        # Logical data fills ceil(cap/seg) segments; every group holds an open segment; GC keeps
        # gc_free in reserve; one more sealed segment must exist to have garbage to collect.
        data_segments = math.ceil(self.capacity / cfg.segment_blocks)
        if gc_high > gc_free:
            # The same count with the high watermark in reserve: more free segments than this
            # cannot exist once the logical space is written, so a burst could never end.
            reachable = self.n_segments - data_segments - self.n_groups - 1
            if gc_high > reachable:
                raise SimulationError(
                    f"sim.gc_high_free_segments={gc_high} cannot be reached: of {self.n_segments} physical "
                    f"segments, {data_segments} hold the logical data, {self.n_groups} are the groups' open "
                    f"segments and one more must hold garbage, so at most {max(reachable, 0)} can be free; "
                    f"lower it or raise sim.op_ratio"
                )
        needed = data_segments + self.n_groups + gc_free + 1
        if self.n_segments < needed:
            raise SimulationError(
                f"impossible configuration: {self.n_segments} physical segments of {cfg.segment_blocks} "
                f"blocks (capacity {self.capacity} x (1 + op_ratio {cfg.op_ratio})) but at least {needed} "
                f"are needed ({self.n_groups} open groups + {gc_free} free for GC + data); raise "
                f"sim.op_ratio, lower sim.segment_blocks or use fewer groups"
            )
        if cfg.gc_trigger not in ("free_segments", "garbage_proportion"):
            raise SimulationError(
                f"unknown sim.gc_trigger {cfg.gc_trigger!r}; known: free_segments, garbage_proportion"
            )
        gp_ppm = int(round(cfg.gc_garbage_ratio * 1e6)) if cfg.gc_trigger == "garbage_proportion" else 0
        chunk, timeout = self._chunk_params(cfg)
        bg_free, idle_gap = self._background_params(cfg, data_segments, gc_free)
        self.timed = bool(chunk or bg_free)
        self.chunk_blocks = chunk
        window = cfg.series_window if cfg.series_window else max(1, self.capacity // 4)
        self.state = new_state(
            capacity=self.capacity,
            n_segments=self.n_segments,
            segment_blocks=cfg.segment_blocks,
            n_groups=self.n_groups,
            gc_free_segments=gc_free,
            gc_high_free_segments=gc_high,
            gc_garbage_ppm=gp_ppm,
            victim_d=cfg.victim_d,
            window=window,
            seed=cfg.seed,
            time_on=self.timed,
            chunk_blocks=chunk,
            chunk_timeout_us=timeout,
            bg_free_segments=bg_free,
            idle_gap_us=idle_gap,
        )
        self.victim_rule, self.victim_selector = resolve_victim(cfg.victim, cfg.victim_for, policy)
        self.victim_name = victim_label(self.victim_rule, self.victim_selector)
        policy.victim_rule = self.victim_rule
        self.select_victim = get_victim(self.victim_selector)
        self.prefill_blocks = self.capacity if cfg.prefill else 0
        self.settings = {  # what this run actually does, after defaults and the policy's own rules
            "victim": self.victim_name,
            "victim_d": int(cfg.victim_d) if self.victim_rule == "d_choices" else None,
            "gc_trigger": cfg.gc_trigger,
            "gc_garbage_ratio": float(cfg.gc_garbage_ratio) if cfg.gc_trigger == "garbage_proportion" else None,
            "gc_free_segments": gc_free,
            "gc_high_free_segments": gc_high if gc_high > gc_free else None,
            "gc_background": {"free_segments": bg_free, "idle_gap_us": idle_gap} if bg_free else None,
            "op_ratio": float(cfg.op_ratio),
            "segment_blocks": int(cfg.segment_blocks),
            "capacity_blocks": self.capacity,
            "physical_segments": self.n_segments,
            "prefill": bool(cfg.prefill),
            "raid_chunk_blocks": chunk or None,
            "raid_chunk_timeout_us": timeout if chunk else None,
            "arrival": cfg.arrival if self.timed else None,  # write times: only a timed run uses them
        }
        if stream is not None and cfg.prefill:
            stream = np.concatenate([np.arange(self.capacity, dtype=np.int64), stream])
        self.ctx = SimContext(
            capacity=self.capacity,
            segment_blocks=cfg.segment_blocks,
            n_segments=self.n_segments,
            prefill_blocks=self.prefill_blocks,
            stream=stream,
            trace=trace,
            chunk_blocks=chunk,
            chunk_timeout_us=timeout,
            timed=self.timed,
            gc_free_segments=gc_free,
            victim_rule=self.victim_rule,
        )
        if policy.needs_future and stream is None:
            raise SimulationError(
                f"policy {policy.name} needs the whole write stream in advance "
                "(future knowledge); pass stream= to the simulator"
            )
        self.pstate = policy.bind(self.ctx)
        self._run_chunk = specialise(*policy.kernel_functions(), self.select_victim)
        self.times: np.ndarray | None = None  # the writes' µs times, set by the pipeline for a timed run
        self.series_t: list[np.ndarray] = []
        self.series_user: list[np.ndarray] = []
        self.series_gc: list[np.ndarray] = []
        self.elapsed_s = 0.0
        self.loop_cpu_s = 0.0
        self.compile_s = 0.0
        self.chunks = 0
        self._feed_plan = None  # (end time, chunk size) of the feed() call under way, for next_chunk
        self._compiled = False

    # -- checkpoints (dogi_ml.sim.checkpoint pickles the whole simulator) -------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        # the compiled loop and victim selector are rebuilt from their names on restore
        state.pop("_run_chunk")
        state.pop("select_victim")
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.select_victim = get_victim(self.victim_selector)
        self._run_chunk = specialise(*self.policy.kernel_functions(), self.select_victim)

    def _ratio_segments(self, key: str, ratio) -> int:
        """A share of the physical segments as a whole number of segments (rounded up)."""
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < float(ratio) < 1:
            raise SimulationError(f"sim.{key} must be a share in (0, 1), got {ratio!r}; or null to leave it off")
        return max(1, math.ceil(float(ratio) * self.n_segments))

    def _chunk_params(self, cfg) -> tuple[int, int]:
        chunk = cfg.raid_chunk_blocks or 0
        if isinstance(chunk, bool) or not float(chunk).is_integer() or int(chunk) < 0:
            raise SimulationError(
                f"sim.raid_chunk_blocks must be a whole number of blocks >= 0 (0 = off), got {chunk!r}"
            )
        chunk = int(chunk)
        if chunk and cfg.segment_blocks % chunk:
            raise SimulationError(
                f"sim.raid_chunk_blocks={chunk} does not divide sim.segment_blocks={cfg.segment_blocks}: a segment "
                f"must hold whole chunks; pick a divisor (16 = 64 KiB with segments of 512)"
            )
        timeout = cfg.raid_chunk_timeout_us
        if isinstance(timeout, bool) or timeout is None or float(timeout) < 0 or not float(timeout).is_integer():
            raise SimulationError(f"sim.raid_chunk_timeout_us must be a whole number of µs >= 0, got {timeout!r}")
        return chunk, int(timeout)

    def _background_params(self, cfg, data_segments: int, gc_free: int) -> tuple[int, int]:
        ratio, gap = cfg.gc_background_free_ratio, cfg.gc_idle_gap_us
        if ratio is None and gap is None:
            return 0, 0
        if ratio is None or gap is None:
            raise SimulationError(
                "background GC needs both sim.gc_background_free_ratio (share of segments to keep free) and "
                f"sim.gc_idle_gap_us (idle gap that starts it); got {ratio!r} and {gap!r}; set both or neither"
            )
        if isinstance(gap, bool) or float(gap) < 0 or not float(gap).is_integer():
            raise SimulationError(f"sim.gc_idle_gap_us must be a whole number of µs >= 0, got {gap!r}")
        target = self._ratio_segments("gc_background_free_ratio", ratio)
        reachable = self.n_segments - data_segments - self.n_groups - 1
        if target > reachable:
            raise SimulationError(
                f"sim.gc_background_free_ratio={ratio} means {target} free segments, but of {self.n_segments} "
                f"physical segments {data_segments} hold the logical data, {self.n_groups} are open and one more "
                f"must hold garbage, so at most {max(reachable, 0)} can be free; lower it or raise sim.op_ratio"
            )
        return max(target, gc_free), int(gap)

    @staticmethod
    def _high_watermark(value, gc_free: int) -> int:
        """``sim.gc_high_free_segments`` as a segment count; ``gc_free`` (no bursts) when unset."""
        if value is None or value == 0:
            return gc_free
        if isinstance(value, bool) or not float(value).is_integer():
            raise SimulationError(
                f"sim.gc_high_free_segments must be a whole number of segments or null, got {value!r}"
            )
        high = int(value)
        if high < gc_free:
            raise SimulationError(
                f"sim.gc_high_free_segments={high} is below the low watermark sim.gc_free_segments={gc_free}: "
                f"a GC burst starts below the low one and collects up to the high one; set it to at least "
                f"{gc_free}, or null for no bursts"
            )
        return high

    # -- groups --------------------------------------------------------------------------
    def retire_group(self, group: int) -> int:
        """Seal ``group``'s open segment now, full or not (see :func:`dogi_ml.sim.kernels.retire_group`).

        Call it between chunks (e.g. from a policy's ``between_chunks``) for a group the scheme
        stops using, so its half-written segment becomes a GC victim like any sealed one instead
        of holding spare space for the rest of the run. Writing to the group again later opens a
        fresh segment. Returns the sealed segment, ``-1`` if the group had no open segment."""
        g = self._group_index(group)
        return int(retire_group(self.state, g, int(self.state.ctr[C_NOW])))

    def retire_groups(self, groups) -> list[int]:
        """:meth:`retire_group` for each of ``groups``; the sealed segments (``-1`` for none)."""
        return [self.retire_group(g) for g in groups]

    def _group_index(self, group) -> int:
        if isinstance(group, bool) or not isinstance(group, (int, np.integer)):
            raise TypeError(f"group must be an integer, got {group!r}")
        g = int(group)
        if not 0 <= g < self.n_groups:
            raise ValueError(
                f"group {g} is outside [0, {self.n_groups}) (policy {self.policy.name} has {self.n_groups} groups)"
            )
        return g

    # -- running -----------------------------------------------------------------------
    def _kernel(self, writes: np.ndarray, times: np.ndarray | None = None) -> None:
        n = writes.shape[0]
        window = int(self.state.prm[P_WINDOW])
        cap = n // window + 2
        st, su, sg = (np.empty(cap, np.int64) for _ in range(3))
        if times is None:
            times = _NO_TIMES
        # the loop only reads writes and times: hand it read-only views always, so it has one
        # signature whether the writes are a trace's read-only memory map or a plain array. With
        # two, a cold kernel cache compiled the loop a second time inside the first chunk (and
        # its CPU time counted as the loop's: 4.06 s against 0.87 s warm, hybrid on zipf 1 GiB)
        rc, ns = self._run_chunk(self.state, self.pstate, _read_only(writes), _read_only(times), st, su, sg)
        if ns:
            self.series_t.append(st[:ns])
            self.series_user.append(su[:ns])
            self.series_gc.append(sg[:ns])
        if rc != ERR_OK:
            arg = int(self.state.ctr[C_ERROR_ARG])
            raise SimulationError(
                f"{ERROR_TEXT.get(int(rc), 'error ' + str(rc))} "
                f"(policy {self.policy.name}, at user write {int(self.state.ctr[C_NOW])}, "
                f"detail {arg})"
            )

    def compile(self) -> float:
        """JIT-compile (or load from cache) the loop for this policy and victim; seconds taken."""
        if not self._compiled:
            t0 = time.perf_counter()
            self._kernel(np.empty(0, np.int64))
            self.compile_s = time.perf_counter() - t0
            self._compiled = True
        return self.compile_s

    def prefill(self, start_us: int = 0) -> None:
        """Write every logical block once, then zero the counters: the measured run starts full.
        A timed run's prefill writes all arrive at ``start_us`` (the first measured write's time),
        so they fill whole chunks."""
        self.compile()
        if self.timed:
            self.state.ctr[C_NOW_US] = int(start_us)
        if self.prefill_blocks:
            self.policy.before_chunk(self, int(self.state.ctr[C_NOW]), self.prefill_blocks)
            times = np.full(self.prefill_blocks, int(start_us), np.int64) if self.timed else None
            self._kernel(np.arange(self.prefill_blocks, dtype=np.int64), times)
        self.reset_counters()

    def reset_counters(self) -> None:
        s = self.state
        for k in (
            C_USER,
            C_GC,
            C_RECLAIMED,
            C_SERIES_USER,
            C_SERIES_GC,
            C_SPILLS,
            C_GC_BURSTS,
            C_PAD,
            C_SHADOW,
            C_PAD_CHUNKS,
            C_CHUNKS,
            C_LAZY,
            C_BG_PASSES,
            C_BG_GC,
            C_SERIES_EXTRA,
        ):
            s.ctr[k] = 0
        for a in (
            s.group_user,
            s.group_gc,
            s.group_reclaimed,
            s.group_reclaimed_valid,
            s.group_pad,
            s.group_pad_chunks,
            s.group_shadow,
            s.group_chunks,
            s.group_lazy,
        ):
            a[:] = 0
        self.series_t, self.series_user, self.series_gc = [], [], []
        self.elapsed_s = 0.0
        self.loop_cpu_s = 0.0

    def feed(self, writes: np.ndarray, progress=None, times: np.ndarray | None = None, after_chunk=None) -> None:
        """Apply user writes (``times``: their wall-clock times in µs, non-decreasing, for a timed
        run: chunk layer or background GC). Chunk boundaries fall on absolute multiples of
        ``chunk_blocks``, so the result does not depend on how the caller splits its calls.
        ``after_chunk(sim, applied)`` runs at each chunk boundary after the policy's
        ``between_chunks``, with the writes of this call applied so far: the point where the
        run's outcome depends on nothing in flight (a checkpoint is taken there)."""
        self.compile()
        writes = np.ascontiguousarray(writes, dtype=np.int64)
        times = self._check_times(writes, times)
        chunk = max(1, int(self.cfg.chunk_blocks))
        if self.policy.max_chunk_blocks:
            chunk = max(1, min(chunk, int(self.policy.max_chunk_blocks)))
        self._feed_plan = (int(self.state.ctr[C_NOW]) + writes.shape[0], chunk)
        try:
            self._feed_chunks(writes, times, chunk, progress, after_chunk)
        finally:
            self._feed_plan = None
        if self.cfg.debug_invariants:
            check_invariants(self.state)

    def next_chunk(self, start: int, n_writes: int) -> tuple[int, int] | None:
        """``(start, writes)`` of the chunk :meth:`feed` applies after the one of ``n_writes``
        writes from ``start``, or None if that one ends the feed() call under way (or none is):
        a policy may prepare that chunk while the loop applies this one."""
        if self._feed_plan is None:
            return None
        end, chunk = self._feed_plan
        nxt = start + n_writes
        if nxt >= end:
            return None
        return nxt, min(end - nxt, chunk - nxt % chunk)

    def _feed_chunks(self, writes, times, chunk: int, progress, after_chunk=None) -> None:
        i = 0
        n = writes.shape[0]
        while i < n:
            now = int(self.state.ctr[C_NOW])
            step = min(n - i, chunk - (now % chunk))
            self.policy.before_chunk(self, now, step)
            t0, c0 = time.perf_counter(), time.thread_time()
            self._kernel(writes[i : i + step], None if times is None else times[i : i + step])
            self.elapsed_s += time.perf_counter() - t0
            # CPU time of this thread in the loop: on a shared machine wall time also counts the
            # waits for a core (issue 18 measured up to 4x); the CPU time does not
            self.loop_cpu_s += time.thread_time() - c0
            i += step
            if progress is not None:
                progress(step)
            if int(self.state.ctr[C_NOW]) % chunk == 0:
                self.chunks += 1
                if self.cfg.debug_invariants:
                    check_invariants(self.state)
                self.policy.between_chunks(self)
                if after_chunk is not None:
                    after_chunk(self, i)

    def _check_times(self, writes: np.ndarray, times) -> np.ndarray | None:
        if not self.timed:
            return None  # logical time only: any times given are not needed
        if times is None:
            raise SimulationError(
                "this run needs wall-clock times per write (sim.raid_chunk_blocks > 0 or background GC); "
                "pass times= (µs per write), or turn those options off"
            )
        times = np.ascontiguousarray(times, dtype=np.int64)
        if times.shape != writes.shape:
            raise SimulationError(f"times has {times.size} entries for {writes.size} writes; give one per write")
        if times.size and (np.any(np.diff(times) < 0) or int(times[0]) < int(self.state.ctr[C_NOW_US])):
            raise SimulationError("write times must be non-decreasing (µs), also across feed() calls")
        return times

    def run(self, writes: np.ndarray, progress=None, times: np.ndarray | None = None) -> dict:
        """Prefill (if configured), feed every write, return :meth:`result`."""
        self.prefill(int(times[0]) if times is not None and len(times) else 0)
        self.feed(writes, progress=progress, times=times)
        return self.result()

    # -- results -----------------------------------------------------------------------
    @property
    def user_writes(self) -> int:
        return int(self.state.ctr[C_USER])

    @property
    def gc_writes(self) -> int:
        return int(self.state.ctr[C_GC])

    @property
    def padding_writes(self) -> int:
        """Padding plus shadow blocks of the chunk layer (0 when it is off)."""
        return int(self.state.ctr[C_PAD]) + int(self.state.ctr[C_SHADOW])

    @property
    def waf(self) -> float:
        u = self.user_writes
        return (u + self.gc_writes + self.padding_writes) / u if u else float("nan")

    def waf_series(self) -> tuple[np.ndarray, np.ndarray]:
        """(logical time, instantaneous WAF per window of user writes)."""
        if not self.series_t:
            return np.empty(0, np.int64), np.empty(0)
        t = np.concatenate(self.series_t)
        u = np.concatenate(self.series_user).astype(float)
        g = np.concatenate(self.series_gc).astype(float)
        return t, (u + g) / np.maximum(u, 1)

    def result(self) -> dict:
        s = self.state
        seg = self.cfg.segment_blocks
        user, gc = self.user_writes, self.gc_writes
        reclaimed = int(s.ctr[C_RECLAIMED])
        groups = []
        for g in range(self.n_groups):
            rec = int(s.group_reclaimed[g])
            groups.append(
                {
                    "group": g,
                    "user_writes": int(s.group_user[g]),
                    "gc_writes": int(s.group_gc[g]),
                    "reclaimed_segments": rec,
                    "victim_valid_ratio": (int(s.group_reclaimed_valid[g]) / (rec * seg)) if rec else None,
                }
            )
        t, inst = self.waf_series()
        state_bytes = state_nbytes(s) + state_nbytes(self.pstate)
        appends = user + gc
        extra = self.padding_writes
        out = {
            "policy": self.policy.name,
            "scheme": self.policy.label(),
            "victim": self.victim_name,
            "waf": (user + gc + extra) / user if user else None,
            "user_writes": user,
            "gc_writes": gc,
            "reclaimed_segments": reclaimed,
            "victim_valid_ratio": (gc / (reclaimed * seg)) if reclaimed else None,
            "groups": groups,
            "n_groups": self.n_groups,
            "capacity_blocks": self.capacity,
            "physical_segments": self.n_segments,
            "segment_blocks": seg,
            "op_ratio": self.cfg.op_ratio,
            "prefill_blocks": self.prefill_blocks,
            "free_segments": int(s.ctr[C_FREE]),
            "gc_spills": int(s.ctr[C_SPILLS]),
            "gc_bursts": int(s.ctr[C_GC_BURSTS]),
            "invalid_blocks": int(s.ctr[C_INVALID]),
            "waf_series": {"t": t.tolist(), "waf": [round(float(x), 6) for x in inst]},
            "state_bytes": state_bytes,
            "elapsed_s": self.elapsed_s,
            "compile_s": self.compile_s,
            "appends_per_second": appends / self.elapsed_s if self.elapsed_s > 0 else None,
            "loop_cpu_s": self.loop_cpu_s,
            "appends_per_cpu_second": appends / self.loop_cpu_s if self.loop_cpu_s > 0 else None,
            "settings": dict(self.settings),
            "config": {k: v for k, v in asdict(self.cfg).items() if k not in CHECKPOINT_KEYS},
            **self.policy.summary(self.pstate),
        }
        if self.chunk_blocks:
            out.update(self._chunk_result(groups))
        if int(s.prm[P_BG_FREE]):  # background GC configured
            out["background_gc_passes"] = int(s.ctr[C_BG_PASSES])
            out["background_gc_writes"] = int(s.ctr[C_BG_GC])
        return out

    def _chunk_result(self, groups: list) -> dict:
        """The chunk layer's figures: padding (per group, and its share of all blocks written)."""
        s = self.state
        pad, shadow = int(s.ctr[C_PAD]), int(s.ctr[C_SHADOW])
        total = self.user_writes + self.gc_writes + pad + shadow
        for g, row in enumerate(groups):
            row["padding_blocks"] = int(s.group_pad[g])
            row["padded_chunks"] = int(s.group_pad_chunks[g])
            row["shadow_blocks"] = int(s.group_shadow[g])
            row["chunks"] = int(s.group_chunks[g])
            written = row["user_writes"] + row["gc_writes"] + row["padding_blocks"] + row["shadow_blocks"]
            row["padding_ratio"] = row["padding_blocks"] / written if written else None
        return {
            "raid_chunk_blocks": self.chunk_blocks,
            "padding_blocks": pad,
            "shadow_blocks": shadow,
            "padded_chunks": int(s.ctr[C_PAD_CHUNKS]),
            "chunks_flushed": int(s.ctr[C_CHUNKS]),
            "lazy_appended_blocks": int(s.ctr[C_LAZY]),
            "padding_traffic_ratio": pad / total if total else None,
            "waf_without_padding": (self.user_writes + self.gc_writes) / self.user_writes if self.user_writes else None,
        }
