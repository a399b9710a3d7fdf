"""LightGBM and random forests as integer decision trees, and their C emission.

The tree models are trained on the scaler's float32 output ``z(v)``, which is a monotone
(non-decreasing) function of each raw integer feature ``v``. So each split ``z_f <= t`` is
exactly ``v_f <= T`` for the largest integer ``T`` with ``z_f(T) <= t`` (found by binary search
with the scaler itself): the deployed trees compare raw int64 features with int64 thresholds,
no quantisation of the inputs at all. A split that no int64 value passes (or that every value
passes) is folded into its child.

Leaves become int32: random-forest leaves hold their class distribution in units of
``2**-16`` (the class with the largest sum over trees wins, like ``predict_proba``); LightGBM
leaves hold their raw score scaled by ``2**k`` (``k`` keeps every class's total within
``+-2**30``), summed per class (argmax of the raw scores = argmax of the softmax). Classes the
model never saw get ``INT32_MIN``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .c_common import c_array, epilogue, prologue
from .integer import ExportError, as_int_features

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN = -(1 << 31)
VOTE_BITS = 16


@dataclass
class IntTreeEnsemble:
    """Integer decision trees over raw int64 features."""

    mode: str  # "vote" (random forest) or "boost" (LightGBM)
    feature: np.ndarray  # int32 [nodes]
    threshold: np.ndarray  # int64 [nodes]: go left iff x[feature] <= threshold
    left: np.ndarray  # int32 [nodes]: child node, or -(leaf + 1)
    right: np.ndarray
    roots: np.ndarray  # int32 [trees]: node, or -(leaf + 1) for a single-leaf tree
    leaf: np.ndarray  # int32 [leaves, classes] (vote) or [leaves, 1] (boost)
    tree_class: np.ndarray  # int32 [trees] (boost: the class a tree adds to)
    base: np.ndarray  # int32 [classes]
    n_features: int
    class_names: list
    feature_names: list
    info: dict = field(default_factory=dict)
    kind = "trees"

    @property
    def n_classes(self) -> int:
        return int(self.base.size)

    def logits_int(self, X) -> np.ndarray:
        """int32 class scores of raw features ``[n, F]``."""
        X = as_int_features(X, self.n_features)
        if X.ndim != 2:
            raise ExportError(f"features: expected [n, {self.n_features}], got shape {X.shape}")
        n = X.shape[0]
        scores = np.tile(self.base.astype(np.int64), (n, 1))
        rows = np.arange(n)
        for t in range(self.roots.size):
            idx = np.full(n, self.roots[t], np.int64)
            while True:
                live = np.flatnonzero(idx >= 0)
                if live.size == 0:
                    break
                node = idx[live]
                go_left = X[live, self.feature[node]] <= self.threshold[node]
                idx[live] = np.where(go_left, self.left[node], self.right[node])
            leaf = -idx - 1
            if self.mode == "vote":
                scores += self.leaf[leaf]
            else:
                scores[rows, self.tree_class[t]] += self.leaf[leaf, 0]
        return np.clip(scores, INT32_MIN, (1 << 31) - 1).astype(np.int32)

    def predict(self, X) -> np.ndarray:
        return self.logits_int(X).argmax(axis=1)

    def params_dict(self) -> dict:
        return {
            "mode": self.mode,
            "trees": int(self.roots.size),
            "nodes": int(self.feature.size),
            "leaves": int(self.leaf.shape[0]),
            "comparison": "raw int64 feature <= int64 threshold",
            **self.info,
        }

    def arrays(self) -> dict:
        return {
            k: getattr(self, k)
            for k in ("feature", "threshold", "left", "right", "roots", "leaf", "tree_class", "base")
        }

    @classmethod
    def from_arrays(cls, params: dict, arrays, class_names, feature_names) -> IntTreeEnsemble:
        a = {
            k: np.asarray(arrays[k])
            for k in ("feature", "threshold", "left", "right", "roots", "leaf", "tree_class", "base")
        }
        return cls(
            mode=params["mode"],
            n_features=len(feature_names),
            class_names=list(class_names),
            feature_names=list(feature_names),
            **a,
        )


def raw_thresholds(scaler, n_features: int, feature: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """Per split: the largest int64 ``v`` with ``float32(scaler(v))[f] <= thr`` (``INT64_MAX``
    when every value qualifies), and a mask of splits that no int64 value passes."""
    K = feature.size
    rows = np.arange(K)

    def z(v):
        X = np.zeros((K, n_features), np.int64)
        X[rows, feature] = v
        return np.asarray(scaler.transform(X), np.float32)[rows, feature].astype(np.float64)

    lo = np.full(K, INT64_MIN, np.int64)  # invariant: z(lo) <= thr (else: never left)
    hi = np.full(K, INT64_MAX, np.int64)  # invariant: z(hi) > thr (else: always left)
    never = z(lo) > thr
    always = z(hi) <= thr
    active = ~(never | always)
    while True:
        diff = hi.view(np.uint64) - lo.view(np.uint64)
        act = active & (diff > 1)
        if not act.any():
            break
        mid = (lo.view(np.uint64) + (diff >> np.uint64(1))).view(np.int64)
        ok = z(mid) <= thr
        lo = np.where(act & ok, mid, lo)
        hi = np.where(act & ~ok, mid, hi)
    out = np.where(always, INT64_MAX, lo)
    return out, never


def _flatten(trees: list, scaler, n_features: int):
    """Node arrays from a list of nested trees ``(feature, threshold, left, right)`` / leaf ids."""
    # collect splits first to map all thresholds in one vectorised search
    splits = []

    def collect(node):
        if isinstance(node, tuple):
            splits.append(node)
            collect(node[2])
            collect(node[3])

    for t in trees:
        collect(t)
    if splits:
        f = np.array([s[0] for s in splits], np.int64)
        th = np.array([s[1] for s in splits], np.float64)
        raw, never = raw_thresholds(scaler, n_features, f, th)
        mapped = {id(s): (int(r), bool(nv)) for s, r, nv in zip(splits, raw, never)}
    feat, thr, left, right = [], [], [], []

    def emit(node) -> int:
        if not isinstance(node, tuple):
            return -(int(node) + 1)
        r, nv = mapped[id(node)]
        if nv:  # no int64 value goes left
            return emit(node[3])
        if r == INT64_MAX:  # every value goes left
            return emit(node[2])
        i = len(feat)
        feat.append(int(node[0]))
        thr.append(r)
        left.append(0)
        right.append(0)
        left[i] = emit(node[2])
        right[i] = emit(node[3])
        return i

    roots = [emit(t) for t in trees]
    return (
        np.array(feat, np.int32),
        np.array(thr, np.int64),
        np.array(left, np.int32),
        np.array(right, np.int32),
        np.array(roots, np.int32),
    )


def integer_trees(model, class_names=None, feature_names=None) -> IntTreeEnsemble:
    """The integer form of a trained ``models.LightGBM`` or ``models.RandomForest``."""
    est = getattr(model, "est", None)
    if est is None:
        raise ExportError(f"model {model.name} is not trained")
    C, F = model.n_classes, model.n_features
    classes = np.asarray(est.classes_, np.int64)
    names = list(class_names) if class_names is not None else [str(c) for c in range(C)]
    fnames = list(feature_names) if feature_names is not None else [f"f{i}" for i in range(F)]
    if model.name == "random_forest":
        trees, leaves = [], []
        for e in est.estimators_:
            tr = e.tree_
            val = tr.value[:, 0, :].astype(np.float64)

            def build(i, tr=tr, val=val):
                if tr.children_left[i] == -1:
                    p = val[i] / val[i].sum()
                    vec = np.zeros(C, np.int64)
                    vec[classes] = np.round(p * (1 << VOTE_BITS)).astype(np.int64)
                    leaves.append(vec)
                    return len(leaves) - 1
                return (
                    int(tr.feature[i]),
                    float(tr.threshold[i]),
                    build(tr.children_left[i]),
                    build(tr.children_right[i]),
                )

            trees.append(build(0))
        feat, thr, left, right, roots = _flatten(trees, model.scaler, F)
        base = np.zeros(C, np.int64)
        return IntTreeEnsemble(
            mode="vote",
            feature=feat,
            threshold=thr,
            left=left,
            right=right,
            roots=roots,
            leaf=np.array(leaves, np.int32).reshape(-1, C),
            tree_class=np.zeros(len(trees), np.int32),
            base=base.astype(np.int32),
            n_features=F,
            class_names=names,
            feature_names=fnames,
            info={"leaf_units": f"2^-{VOTE_BITS} of a tree's class probability"},
        )
    if model.name != "lightgbm":
        raise ExportError(f"integer trees handle lightgbm and random_forest, got {model.name}")
    dump = est.booster_.dump_model()
    per_iter = int(dump["num_tree_per_iteration"])
    raw_leaves, trees = [], []

    def build(node):
        if "leaf_value" in node:
            raw_leaves.append(float(node["leaf_value"]))
            return len(raw_leaves) - 1
        if node.get("decision_type", "<=") != "<=":
            raise ExportError(f"LightGBM split type {node['decision_type']!r} is not supported (numerical '<=' only)")
        if node.get("missing_type", "None") not in ("None", "NaN"):
            raise ExportError(f"LightGBM missing_type {node['missing_type']!r} is not supported")
        return (
            int(node["split_feature"]),
            float(node["threshold"]),
            build(node["left_child"]),
            build(node["right_child"]),
        )

    tree_class, tree_leaves = [], []
    for k, info in enumerate(dump["tree_info"]):
        start = len(raw_leaves)
        trees.append(build(info["tree_structure"]))
        tree_class.append(k % per_iter)
        tree_leaves.append((start, len(raw_leaves)))
    raw = np.array(raw_leaves, np.float64)
    # scale so that each class's total stays within +-2**30
    worst = np.zeros(per_iter)
    for (a, b), c in zip(tree_leaves, tree_class):
        worst[c] += np.abs(raw[a:b]).max() if b > a else 0.0
    bits = min(24, math.floor(math.log2((1 << 30) / max(worst.max(), 1e-12))))
    leaf_int = np.round(raw * 2.0**bits).astype(np.int64)
    feat, thr, left, right, roots = _flatten(trees, model.scaler, F)
    base = np.full(C, INT32_MIN, np.int64)
    if per_iter == 1:  # binary objective: score for classes_[1], 0 for classes_[0]
        if classes.size != 2:
            raise ExportError("LightGBM with one tree per iteration must be binary")
        base[classes[0]] = 0
        base[classes[1]] = 0
        tcls = np.full(len(trees), classes[1], np.int32)
    else:
        base[classes] = 0
        tcls = classes[np.array(tree_class)].astype(np.int32)
    return IntTreeEnsemble(
        mode="boost",
        feature=feat,
        threshold=thr,
        left=left,
        right=right,
        roots=roots,
        leaf=leaf_int.astype(np.int32).reshape(-1, 1),
        tree_class=tcls,
        base=base.astype(np.int32),
        n_features=F,
        class_names=names,
        feature_names=fnames,
        info={"leaf_units": f"2^-{bits} of the raw score"},
    )


def emit_trees(q: IntTreeEnsemble, P: str = "dogi", source: str | None = None) -> str:
    """C99 header of the integer trees (same API as the MLP header)."""
    U = P.upper()
    C = q.n_classes
    what = "random forest" if q.mode == "vote" else "LightGBM"
    doc = [
        f"{what}: {q.roots.size} trees, {q.feature.size} splits, {q.leaf.shape[0]} leaves, {C} classes.",
        "Splits compare raw int64 features with int64 thresholds (x <= threshold goes left), exactly",
        "the float model's splits on its scaled inputs; leaves hold int32 scores summed per class;",
        "class = first index of the largest score.",
        "",
        "Features, in order:",
    ]
    doc += [f"  {i}: {n}" for i, n in enumerate(q.feature_names)]
    out = [prologue(P, f"{P}: deployed lifetime classifier ({what})", doc, source)]
    out.append(
        f"#define {U}_N_FEATURES {q.n_features}\n#define {U}_N_CLASSES {C}\n#define {U}_N_TREES {q.roots.size}\n\n"
    )
    pad = lambda a, dt: a if a.size else np.zeros(1, dt)  # noqa: E731  (C has no empty arrays)
    out.append(c_array(f"{P}_feature", "uint8_t" if q.n_features < 256 else "int32_t", pad(q.feature, np.int32)))
    out.append(c_array(f"{P}_threshold", "int64_t", pad(q.threshold, np.int64), 4))
    out.append(c_array(f"{P}_left", "int32_t", pad(q.left, np.int32)))
    out.append(c_array(f"{P}_right", "int32_t", pad(q.right, np.int32)))
    out.append(c_array(f"{P}_roots", "int32_t", q.roots))
    out.append(c_array(f"{P}_base", "int32_t", q.base))
    if q.mode == "vote":
        out.append(c_array(f"{P}_leaf", "int32_t", q.leaf))
        add = f"for (c = 0; c < {C}; ++c) s[c] += {P}_leaf[-i - 1][c];"
    else:
        out.append(c_array(f"{P}_leaf", "int32_t", q.leaf[:, 0], 8))
        out.append(c_array(f"{P}_tree_class", "uint8_t" if C < 256 else "int32_t", q.tree_class, 24))
        add = f"s[{P}_tree_class[t]] += {P}_leaf[-i - 1];"
    out.append(f"""
/* one block: raw features [{U}_N_FEATURES] -> class; scores [{U}_N_CLASSES] (int32) if not 0 */
static inline int32_t {P}_predict_one(const int64_t *features, int32_t *logits)
{{
    int64_t s[{C}];
    int32_t t, c, i, best;
    for (c = 0; c < {C}; ++c) s[c] = {P}_base[c];
    for (t = 0; t < {U}_N_TREES; ++t) {{
        i = {P}_roots[t];
        while (i >= 0)
            i = (features[{P}_feature[i]] <= {P}_threshold[i]) ? {P}_left[i] : {P}_right[i];
        {add}
    }}
    best = 0;
    for (c = 1; c < {C}; ++c)
        if (s[c] > s[best]) best = c;
    if (logits)
        for (c = 0; c < {C}; ++c)
            logits[c] = (int32_t)((s[c] > INT32_MAX) ? INT32_MAX : (s[c] < INT32_MIN) ? INT32_MIN : s[c]);
    return best;
}}

/* n blocks: features [n][{U}_N_FEATURES] -> classes [n]; scores [n][{U}_N_CLASSES] if not 0 */
static inline void {P}_predict_batch(const int64_t *features, int32_t n, int32_t *classes, int32_t *logits)
{{
    int32_t r;
    for (r = 0; r < n; ++r)
        classes[r] = {P}_predict_one(features + (int64_t)r * {U}_N_FEATURES,
                                     logits ? logits + (int64_t)r * {U}_N_CLASSES : 0);
}}
""")
    out.append(epilogue(P))
    return "".join(out)
