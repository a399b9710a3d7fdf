"""DOGI frozen: a DOGI run's deployed int8 MLP and configuration, placing writes with no
retraining and no search (issue 15's learned scheme for the ZNS harness, ``dogi_ml/zns/dogi_place.h``).

It loads a deployment bundle (:mod:`dogi_ml.policies._dogi_bundle`, written from a DOGI run
with ``model.deployed=int8`` by :func:`export_bundle`) and places

- user writes: the Hot Filter with ``mu`` frozen at the run's last value (no window steps): a
  write whose latest invalidation time is ``<= mu`` goes to G_hot (0); any other to the group
  of the category the int8 MLP predicts from its causal features (G1..GN, 1..N; the exported
  header's integers, run here by the Numba kernel, bit-exact with the Python reference);
  prefill writes to GN;
- GC survivors: DOGI's ``relocation=next_group``: the Frozen Filter (a block not overwritten
  since its clock last cleared goes to G_frzn, N + 1), else one group further (G_hot -> G1,
  Gk -> Gk+1, GN and G_frzn stay);
- victims: DOGI's (``dogi_victim``): a dead segment at once, else the oldest expired segment
  (residence since its first write above its group's expiry: mu for G_hot, the BIR upper bound
  for G1..G(N-1)), else cost-benefit (or greedy) over the fallback-victim groups, else over all.

The group layout is compact (N + 2 groups, at most 12: one open zone each on a ZNS device).
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, new_scalars, no_reclaim_hook, record, scalar_fields
from dogi_ml.sim.victims import register_victim

from . import register
from ._dogi_bundle import N_CAT, WRITE_BUNDLE, BundleError, load_bundle, write_bundle, write_command
from .dogi import G_FRZN, G_HOT, INF, MODE_ML, dogi_victim

CHUNK_ROWS = 1 << 20  # feature/prediction rows per engine chunk
#: ``policy.params.bundle`` in a fleet study: the bundle a DOGI run on the job's own volume exports
#: (dogi_ml/pipeline/study.py makes it; the model has then seen the trace it is deployed on)
SAME_TRACE = "same_trace"

SCALARS = scalar_fields(
    mu=np.int64,  # the Hot Filter's threshold, frozen
    n_intermediate=np.int64,  # N
    prefill=np.int64,  # prefill writes (placed in GN, no features)
    chunk_start=np.int64,  # logical time of preds[0]
    frozen_clock=np.int64,  # user writes between Frozen-Filter clears
    next_clock_at=np.int64,  # user-write count of the next clear
    final_greedy=np.int64,  # 1: greedy, 0: cost-benefit among the fallback-victim groups
    hot_writes=np.int64,  # user writes placed in G_hot (after prefill)
    frozen_gc=np.int64,  # GC writes the Frozen Filter sent to G_frzn
    expired_victims=np.int64,  # victims chosen as the oldest expired segment
)


class FrozenState(NamedTuple):
    scalars: np.ndarray
    preds: np.ndarray  # int8 per write of the current chunk: the model's category
    cat2group: np.ndarray  # int64 [10]: group 1..N of each category
    group_expiry: np.ndarray  # int64 per group: expiry age (INF: none)
    group_final: np.ndarray  # uint8 per group: 1 if a fallback-victim group
    updated: np.ndarray  # uint8 per LBA: overwritten since the Frozen Filter's last clear
    class_writes: np.ndarray  # int64 [10]: non-hot user writes per predicted category


@nb.njit(cache=True)
def frozen_user(s, p, lba, now):
    st = p.scalars[0]
    last = s.lba_time[lba]
    v = INF
    if last >= 0:
        v = now - last
        p.updated[lba] = 1
    if now < st.prefill:
        return st.n_intermediate
    u = now - st.prefill  # user writes before this one
    if u >= st.next_clock_at:
        p.updated[:] = 0  # the Frozen Filter's clock
        st.next_clock_at = u + st.frozen_clock
    if v <= st.mu:
        st.hot_writes += 1
        return 0
    c = p.preds[now - st.chunk_start]
    p.class_writes[c] += 1
    return p.cat2group[c]


@nb.njit(cache=True)
def frozen_gc(s, p, lba, victim, now):
    st = p.scalars[0]
    n = st.n_intermediate
    vg = s.seg_group[victim]
    if p.updated[lba] == 0:
        st.frozen_gc += 1
        return n + 1
    if vg < n:
        return vg + 1  # G_hot -> G1, Gk -> Gk+1
    return vg  # GN and G_frzn keep their survivors


@nb.njit(cache=True)
def frozen_victim(s, p, now):
    """DOGI's victim (:func:`dogi_ml.policies.dogi.dogi_victim`, run on the compact groups),
    counting the victims chosen as the oldest expired segment: a returned segment with valid
    blocks that is expired can only come from that rule (the other two apply when no sealed
    segment is expired)."""
    seg = dogi_victim(s, p, now)
    if seg >= 0:
        count_if_expired(s, p, seg, now)
    return seg


@nb.njit(cache=True)
def count_if_expired(s, p, seg, now):
    """Count ``seg`` in ``expired_victims`` when it holds valid blocks and has outlived its
    group's expiry age (the frozen selectors' expiry scan is the only rule that picks such a
    segment while dead or emptier ones wait); shared by ``hybrid_frozen``'s selector."""
    if s.seg_valid[seg] > 0:
        e = p.group_expiry[s.seg_group[seg]]
        if e < INF and now - s.seg_open_time[seg] > e and s.seg_valid[seg] < s.seg_wp[seg]:
            p.scalars[0].expired_victims += 1


register_victim("dogi_frozen", frozen_victim)


@register
class DOGIFrozen(PlacementPolicy):
    name = "dogi_frozen"
    default_groups = None  # the bundle decides
    victim = "dogi_frozen"
    selector = "dogi_frozen"
    victim_rules = ()
    victim_note = "DOGI's: a dead or expired segment first, then the bundle's final rule in the open-ended groups"
    place_user = frozen_user
    place_gc = frozen_gc
    on_reclaim = no_reclaim_hook
    max_chunk_blocks = CHUNK_ROWS
    #: the bundle's scheme (policies/hybrid_frozen.py deploys the hybrid's with this class's machinery)
    scheme = "dogi"

    def __init__(self, n_groups=None, bundle=None, **params):
        if params:
            raise ValueError(f"policy {self.name}: unknown parameter(s) {sorted(params)}; accepted: ['bundle']")
        self.bundle = None
        if bundle == SAME_TRACE:
            raise ValueError(
                f"policy {self.name}: policy.params.bundle={SAME_TRACE} is made by the study command "
                f"(study.frozen_bundle={SAME_TRACE}: a {self.scheme} run on each volume exports that volume's "
                f"bundle); elsewhere give a bundle directory (write one with: {WRITE_BUNDLE})"
            )
        if not bundle:
            # the config without its bundle composes (conf/policy/dogi_frozen.yaml); a run refuses it in bind
            super().__init__(1)
            self.params = {"bundle": None}
            return
        self.bundle = load_bundle(bundle, self.scheme)
        n = self.bundle.n_groups
        if n_groups is not None and int(n_groups) != n:
            raise ValueError(
                f"policy {self.name}: the bundle has {n} groups (G_hot, G1..GN, G_frzn), not n_groups={n_groups}"
            )
        super().__init__(n)
        self.params = {"bundle": str(bundle)}
        from dogi_ml.export.numba_kernel import batch_scratch

        self.qargs = self.bundle.qmodel.kernel_args()
        self.qscratch = batch_scratch(self.qargs)

    def accepted_params(self):
        return ("bundle",)

    def bind(self, ctx: SimContext) -> FrozenState:
        from dogi_ml.features.extract import FeatureConfig, FeatureStream

        if self.bundle is None:
            label = "DOGI" if self.scheme == "dogi" else self.scheme
            raise BundleError(
                f"policy {self.name} needs policy.params.bundle=DIR, a {label} deployment bundle (write one with: "
                f"{write_command(self.scheme)})"
            )
        d = self.bundle.deploy
        if int(d["capacity_blocks"]) != ctx.capacity:
            raise BundleError(
                f"policy {self.name}: the bundle was exported for a capacity of {d['capacity_blocks']} blocks (its mu "
                f"and BIRs are in blocks of that run), this run has {ctx.capacity}; export a bundle at this capacity"
            )
        if ctx.trace is None:
            raise ValueError(
                f"policy {self.name} needs the trace (its features): use the simulate command or pass trace="
            )
        self.stream = FeatureStream(
            ctx.trace,
            FeatureConfig(
                capacity_blocks=ctx.capacity,
                window_blocks=int(d["feature_window"]),
                chunk_blocks=int(d["feature_chunk_blocks"]),
            ),
        )
        self.columns = self.bundle.feature_columns()
        self.prefill = ctx.prefill_blocks
        self.n_trace_writes = int(ctx.trace.block_writes.size)
        self.feats = np.zeros((CHUNK_ROWS, len(self.columns)), np.int64)
        scalars = new_scalars(SCALARS)
        st = record(scalars)
        st.mu = int(d["mu"])
        st.n_intermediate = self.bundle.n_intermediate
        st.prefill = self.prefill
        st.frozen_clock = int(d["frozen_clock"])
        st.next_clock_at = st.frozen_clock
        # DOGI's fallback victim settings (a hybrid bundle has none: its selector is the hybrid's)
        st.final_greedy = int(bool(d.get("final_greedy", 0)))
        self.state = FrozenState(
            scalars=scalars,
            preds=np.zeros(CHUNK_ROWS, np.int8),
            cat2group=np.asarray(d["cat2group"], np.int64),
            group_expiry=np.array([INF if e is None else int(e) for e in d["group_expiry"]], np.int64),
            group_final=np.asarray(d.get("group_final", [1] * self.bundle.n_groups), np.uint8),
            updated=np.zeros(ctx.capacity, np.uint8),
            class_writes=np.zeros(N_CAT, np.int64),
        )
        return self.state

    def classify(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Categories of raw feature rows ``X`` (the bundle's columns) by the int8 kernel."""
        from dogi_ml.export.numba_kernel import int8_mlp_classes_into

        X = np.ascontiguousarray(X, np.int64)
        out = np.empty(X.shape[0], np.int8) if out is None else out
        int8_mlp_classes_into(X, *self.qargs, self.qscratch, out)
        return out

    def before_chunk(self, sim, start: int, n_writes: int) -> None:
        st = record(self.state.scalars)
        st.chunk_start = start
        lo = max(start - self.prefill, 0)
        hi = min(start + n_writes - self.prefill, self.n_trace_writes)
        if hi <= lo:
            return
        if self.stream.position != lo:
            raise RuntimeError(
                f"policy dogi_frozen: features at write {self.stream.position}, the chunk starts at {lo}"
            )
        r0 = lo + self.prefill - start
        X = self.feats[: hi - lo]
        if self.stream.next_into(X, self.columns) != hi - lo:
            raise RuntimeError(f"policy dogi_frozen: the trace ended before write {hi}")
        self.classify(X, self.state.preds[r0 : r0 + hi - lo])

    def summary(self, state) -> dict:
        st = record(state.scalars)
        return {
            "learned": learned_counts(st.hot_writes, state.class_writes, st.frozen_gc, st.expired_victims),
            "bundle": self.params["bundle"],
        }


def learned_counts(hot: int, classes, frozen_gc: int, expired: int) -> dict:
    """The placement counts the C harness reports too (its JSON's ``learned``)."""
    return {
        "hot_writes": int(hot),
        "class_writes": [int(c) for c in classes],
        "frozen_gc_writes": int(frozen_gc),
        "expired_victims": int(expired),
    }


def export_bundle(policy, out_dir, source: dict | None = None):
    """A deployment bundle from a DOGI policy (:class:`dogi_ml.policies.dogi.DOGI`) after its run:
    the int8 model it deploys now, its hot threshold, categories' groups and BIRs, the Frozen
    Filter's clock and its fallback victim score. The survivor rule is fixed to ``next_group``."""
    from dogi_ml.features.extract import FeatureConfig

    st = record(policy.state.scalars)
    if policy.cfg.get("deployed") != "int8" or getattr(policy, "qmodel", None) is None:
        raise BundleError(
            "the DOGI run has no deployed int8 model: run it with policy.params.deployed=int8 (and a trace long "
            "enough for a model: policy.params.min_samples / retrain_every)"
        )
    if int(st.mode) != MODE_ML:
        raise BundleError(
            "the DOGI run ended in fallback mode (its model switched off): no learned configuration to export; "
            "use a longer trace or policy.params.fallback_accuracy=0 fallback_compare=none"
        )
    p = policy.state
    n = int(st.n_intermediate)
    groups = [G_HOT, *range(1, n + 1), G_FRZN]
    expiry = [None if int(p.group_expiry[g]) >= int(INF) else int(p.group_expiry[g]) for g in groups]
    window = FeatureConfig(capacity_blocks=policy.capacity).window
    deploy = {
        "features": list(policy.cfg["features"]),
        "feature_window": int(window),
        "feature_chunk_blocks": int(FeatureConfig(capacity_blocks=policy.capacity).chunk_blocks),
        "mu": int(st.hot_threshold),
        "bounds": [int(b) for b in p.bounds],
        "n_intermediate": n,
        "cat2group": [int(g) for g in p.cat2group],
        "group_hi": [None if int(p.group_hi[g]) >= int(INF) else int(p.group_hi[g]) for g in groups],
        "group_expiry": expiry,
        "group_final": [int(p.group_final[g]) for g in groups],
        "frozen_clock": int(st.frozen_clock),
        "final_greedy": int(st.final_greedy),
        "capacity_blocks": int(policy.capacity),
        "relocation": "next_group",
        "configuration": policy.configuration,
    }
    return write_bundle(out_dir, policy.qmodel, policy.model, deploy, source=source)
