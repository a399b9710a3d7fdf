"""The integer building blocks of every deployed form (MLP, GRU, trees): the input rules,
int8 linear layers and their requantisation, the error type.

**Inputs.** A model sees raw integer features (``dogi_ml.features.extract``), and the trained model
scales them (``dogi_ml.models.base.InputScaler``): ``sign(v) log2(1 + |v|)`` on the log columns, then
``z = (g - mean) / std``. The deployed model turns each raw ``int64`` feature ``v`` into an
integer *code* with a few integer operations (reproducible in C from the manifest) and leaves
the standardisation to the first layer's weights and bias:

1. ``g = v`` for a linear column; for a log column ``g = sign(v) * log2_q8(1 + |v|)`` (Q8,
   ``|v| + 1`` taken unsigned, so every int64 works; ``|g| <= 63 * 256``; see
   :mod:`dogi_ml.export.fixedpoint`);
2. ``code = ((clamp(g, lo, hi) - lo) * mul >> shift) - qmax`` (unsigned arithmetic: the
   clamp makes the difference non-negative and bounds the product below ``2**63``).

The code step ``2**shift / mul`` (``mul`` up to ``2**15``) makes ``margin`` times the largest
calibration ``|g - mean|`` span the codes, so every feature uses its codes' range (which keeps
the first layer's int8 weights balanced across features) and values beyond the training range
keep resolution and then saturate. A code stands for ``z ~ code * scale[f] + zero[f]`` (the
middle of its step); the quantiser folds ``scale`` into the first layer's weights and
``W @ zero`` into its bias, so a firmware caller pays only the log2, a clamp, a multiply and a
shift per feature.

**Layers.** :func:`quantize_linear` gives int8 weights, symmetric per output channel, with the
input scale folded in, an int32 bias and int32 accumulation; hidden layers requantise in
16-bit steps (:func:`hidden_requantize`), the last layer to int32 logits at one scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dogi_ml.errors import DogiMLError

from . import fixedpoint as fx

LINEAR, LOG = 0, 1
ACT_MAX = 255  # hidden activations are uint8 (post-ReLU), zero point 0
WEIGHT_MAX = 127  # symmetric int8 weights
LOGIT_BITS = 20  # calibration logits span about +-2**20 (int32 leaves room to spare)
#: columns of the packed per-feature rule table (``InputQuantizer.packed``)
PRE_COLUMNS = ("kind", "lo", "hi", "mul", "shift", "qmax")
MUL_MAX = 1 << 15  # input multipliers: 15 bits of precision
SPREAD_MAX = 1 << 61  # input codes cover at most +-2**61 around a feature's mean
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class ExportError(DogiMLError):
    """A model, a feature matrix or an export artefact that cannot be used; the message says why."""


def as_int_features(X, n_features: int, what: str = "features") -> np.ndarray:
    """Check and convert a raw feature matrix (``[..., n_features]`` integers) to int64."""
    X = np.asarray(X)
    if X.ndim < 1 or X.shape[-1] != n_features:
        raise ExportError(f"{what}: expected {n_features} features per row, got shape {X.shape}")
    if X.dtype.kind not in "iu":
        if X.dtype.kind == "f" and X.size and np.all(np.isfinite(X)) and np.all(X == np.round(X)):
            X = X.astype(np.float64)
        else:
            raise ExportError(f"{what}: raw features are integers (int64), got dtype {X.dtype}")
    if X.dtype == np.uint64 and X.size and X.max() > np.uint64(INT64_MAX):
        raise ExportError(f"{what}: values above 2**63 - 1 do not fit the int64 feature type")
    return np.ascontiguousarray(X, dtype=np.int64)


# -- inputs ------------------------------------------------------------------------------------
@dataclass
class InputQuantizer:
    """The manifest's per-feature rules from raw int64 features to integer codes."""

    feature_names: list
    kind: np.ndarray  # LINEAR or LOG per feature
    lo: np.ndarray
    hi: np.ndarray
    mul: np.ndarray
    shift: np.ndarray
    scale: np.ndarray  # float: standardised units per code step
    zero: np.ndarray  # float: the standardised value of code 0
    mean: np.ndarray  # the model's scaler (for documentation and the float path)
    std: np.ndarray
    bits: int = 16

    @property
    def qmax(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @classmethod
    def fit(
        cls, scaler, X_calib: np.ndarray, feature_names=None, bits: int = 16, margin: float = 4.0
    ) -> InputQuantizer:
        """Derive the rules from a fitted ``InputScaler`` and calibration rows (raw features)."""
        if bits not in (8, 16):
            raise ExportError(f"input codes are 8 or 16 bits, got {bits}")
        if not (margin >= 1 and math.isfinite(margin)):  # NaN fails too
            raise ExportError(f"input margin must be a finite number >= 1, got {margin!r}")
        if scaler.mean is None:
            raise ExportError("the model's input scaler is not fitted (train the model first)")
        F = len(scaler.mean)
        X = as_int_features(X_calib, F, "calibration features").reshape(-1, F)
        if X.shape[0] == 0:
            raise ExportError("calibration needs at least one feature row")
        names = list(feature_names) if feature_names is not None else [f"f{i}" for i in range(F)]
        if len(names) != F:
            raise ExportError(f"{len(names)} feature names for {F} features")
        logs = set(range(F)) if scaler.log_columns is None else {int(c) for c in scaler.log_columns}
        mean = np.asarray(scaler.mean, np.float64)
        std = np.asarray(scaler.std, np.float64)
        qmax = (1 << (bits - 1)) - 1
        cols = {k: [] for k in ("kind", "lo", "hi", "mul", "shift")}
        scale, zero = [], []
        for f in range(F):
            kind = LOG if f in logs else LINEAR
            unit = float(1 << fx.LOG2_FRAC) if kind == LOG else 1.0
            if not (std[f] > 0 and math.isfinite(std[f]) and math.isfinite(mean[f])):
                raise ExportError(f"feature {names[f]}: degenerate scaler (mean {mean[f]}, std {std[f]})")
            g = fx.signed_log2_q8(X[:, f]) if kind == LOG else X[:, f]
            centre = float(mean[f]) * unit
            spread = max(float(np.abs(g.astype(np.float64) - centre).max()) * float(margin), 1.0)
            # log values cannot leave +-LOG2_Q8_MAX; nothing useful lies 2**61 beyond the mean
            spread = min(spread, fx.LOG2_Q8_MAX + abs(centre) if kind == LOG else float(SPREAD_MAX))
            step = spread / qmax
            shift = int(min(max(math.ceil(math.log2(step)) + 14, 0), 62 - bits))
            mul = int(min(max(round(2.0**shift / step), 1), MUL_MAX))
            step = 2.0**shift / mul  # the step the integers realise
            lo = int(round(centre)) - ((qmax << shift) // mul)
            lo = max(lo, INT64_MIN)
            hi = min(lo + ((((2 * qmax + 1) << shift) - 1) // mul), INT64_MAX)
            for k, v in (("kind", kind), ("lo", lo), ("hi", hi), ("mul", mul), ("shift", shift)):
                cols[k].append(v)
            scale.append(step / (unit * float(std[f])))
            zero.append(((lo + (qmax + 0.5) * step) / unit - float(mean[f])) / float(std[f]))
        arr = {k: np.array(v, np.int64) for k, v in cols.items()}
        return cls(
            feature_names=names, scale=np.array(scale), zero=np.array(zero), mean=mean, std=std, bits=bits, **arr
        )

    def codes(self, X) -> np.ndarray:
        """Integer codes (int64, in ``[-qmax, qmax]``) of raw features ``[..., F]``."""
        X = as_int_features(X, self.n_features)
        g = X.copy()
        logc = np.flatnonzero(self.kind == LOG)
        if logc.size:
            g[..., logc] = fx.signed_log2_q8(X[..., logc])
        d = np.clip(g, self.lo, self.hi).astype(np.uint64) - self.lo.astype(np.uint64)
        code = (d * self.mul.astype(np.uint64)) >> self.shift.astype(np.uint64)
        return code.astype(np.int64) - self.qmax

    def dequantize(self, codes) -> np.ndarray:
        """Standardised float features that the codes stand for."""
        return np.asarray(codes, np.float64) * self.scale + self.zero

    def packed(self) -> np.ndarray:
        """``int64 [F, 6]``: one row per feature, columns :data:`PRE_COLUMNS`."""
        return np.stack(
            [self.kind, self.lo, self.hi, self.mul, self.shift, np.full(self.n_features, self.qmax, np.int64)], axis=1
        ).astype(np.int64)

    def to_dict(self) -> dict:
        return {
            "feature_names": list(self.feature_names),
            "bits": self.bits,
            "qmax": self.qmax,
            "rules": [
                {
                    "feature": n,
                    "kind": "log2" if k == LOG else "linear",
                    "lo": int(a),
                    "hi": int(b),
                    "mul": int(m),
                    "shift": int(s),
                    "scale": float(sc),
                    "zero": float(z),
                    "scaler_mean": float(mu),
                    "scaler_std": float(sd),
                }
                for n, k, a, b, m, s, sc, z, mu, sd in zip(
                    self.feature_names,
                    self.kind,
                    self.lo,
                    self.hi,
                    self.mul,
                    self.shift,
                    self.scale,
                    self.zero,
                    self.mean,
                    self.std,
                )
            ],
        }

    @classmethod
    def from_dict(cls, d: dict) -> InputQuantizer:
        rules = d["rules"]
        col = lambda k: np.array([r[k] for r in rules], np.int64)  # noqa: E731
        flt = lambda k: np.array([r[k] for r in rules], np.float64)  # noqa: E731
        return cls(
            feature_names=list(d["feature_names"]),
            kind=np.array([LOG if r["kind"] == "log2" else LINEAR for r in rules], np.int64),
            lo=col("lo"),
            hi=col("hi"),
            mul=col("mul"),
            shift=col("shift"),
            scale=flt("scale"),
            zero=flt("zero"),
            mean=flt("scaler_mean"),
            std=flt("scaler_std"),
            bits=int(d["bits"]),
        )


# -- layers ------------------------------------------------------------------------------------
@dataclass
class QuantLayer:
    """One integer linear layer: ``out = requant(W @ a + b)`` (ReLU-clamped unless last)."""

    w: np.ndarray  # int8 [out, in]
    b: np.ndarray  # int32 [out]
    mul: np.ndarray  # int64 [out]
    shift: np.ndarray  # int64 [out]
    relu: bool
    w_scale: np.ndarray  # float [out]: real value of one accumulator unit per output channel
    out_scale: float  # real value of one output unit

    def forward(self, a: np.ndarray) -> np.ndarray:
        acc = a @ self.w.T.astype(np.int64) + self.b.astype(np.int64)
        if self.relu:
            return hidden_requantize(acc, self.mul, self.shift)
        out = fx.requantize(acc, self.mul, self.shift)
        return np.clip(out, fx.INT32_MIN, fx.INT32_MAX)


HIDDEN_M_LO, HIDDEN_M_HI = 4096, 8191  # 16-bit multiplier range: 13 bits of precision
HIDDEN_MAX_SHIFT = 31


def hidden_requantize(acc: np.ndarray, m16, p) -> np.ndarray:
    """Hidden-layer requantisation to uint8 (ReLU included), in 16-bit steps that map onto
    SIMD lanes (SSE2 ``psrad``/``packssdw``/``pmulhw``/``pmaxsw``/``pminsw``, NEON alike):
    ``t = clamp(acc >> p, -2**15, 2**15 - 1)`` (arithmetic shift: floor), ``r = (t * m16) >> 16``
    (floor), ``out = clamp(r, 0, 255)``. The rounding offsets are folded into the bias."""
    t = np.clip(np.asarray(acc, np.int64) >> np.asarray(p, np.int64), -(1 << 15), (1 << 15) - 1)
    r = (t * np.asarray(m16, np.int64)) >> 16
    return np.clip(r, 0, ACT_MAX)


def hidden_bias_offset(m16, p) -> np.ndarray:
    """What the quantiser adds to a hidden layer's int32 bias so both floors of
    :func:`hidden_requantize` round: half a unit of ``t`` (``2**(p-1)``) and half an output unit
    (``2**(15+p) / m16`` accumulator units)."""
    m16 = np.asarray(m16, np.int64)
    p = np.asarray(p, np.int64)
    half_t = np.where(p > 0, np.left_shift(np.int64(1), np.maximum(p - 1, 0)), 0)
    half_out = np.round(np.where(m16 > 0, 2.0 ** (15 + p) / np.maximum(m16, 1), 0.0)).astype(np.int64)
    return half_t + half_out


def hidden_multiplier(real: float) -> tuple[int, int]:
    """``(m16, p)`` with ``m16 / 2**(16 + p) ~ real`` (accumulator unit -> output unit),
    ``m16`` in ``[4096, 8191]`` where ``0 <= p <= 31`` allows."""
    if not (real > 0 and math.isfinite(real)):
        raise ExportError(f"requantisation multiplier must be positive and finite, got {real!r}")
    p = math.floor(math.log2(HIDDEN_M_HI / (real * 65536.0)))
    if p < 0:
        raise ExportError(
            f"hidden-layer multiplier {real:g} too large for 16-bit requantisation "
            f"(needs real * 2**16 <= {HIDDEN_M_HI})"
        )
    p = min(p, HIDDEN_MAX_SHIFT)
    m16 = int(round(real * 2.0 ** (16 + p)))
    return min(m16, HIDDEN_M_HI), p


def quantize_linear(
    W: np.ndarray, b: np.ndarray, in_scale, in_max: int, out_scale: float, relu: bool, name: str = "layer", in_zero=None
) -> QuantLayer:
    """Per-output-channel symmetric int8 weights with the input scale folded in (inputs are
    ``code * in_scale + in_zero``; ``W @ in_zero`` joins the bias); int32 bias; multiplier/shift
    to ``out_scale``. Checks that the accumulator stays within int32."""
    W = np.asarray(W, np.float64)
    b = np.asarray(b, np.float64)
    if in_zero is not None:
        b = b + W @ np.broadcast_to(np.asarray(in_zero, np.float64), (W.shape[1],))
    W = W * np.broadcast_to(np.asarray(in_scale, np.float64), (W.shape[1],))[None, :]
    rowmax = np.abs(W).max(axis=1)
    w_scale = np.maximum(rowmax, np.abs(b) * 2.0**-17) / WEIGHT_MAX
    w_scale = np.where(w_scale > 0, w_scale, 1.0)
    wq = np.clip(np.round(W / w_scale[:, None]), -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)
    bq = np.round(b / w_scale)
    if relu:
        mq = [hidden_multiplier(float(s) / out_scale) for s in w_scale]
        m16 = np.array([m for m, _ in mq], np.int64)
        p = np.array([s for _, s in mq], np.int64)
        bq = bq + hidden_bias_offset(m16, p)
    else:
        mq = [fx.quantize_multiplier(float(s) / out_scale) for s in w_scale]
    bound = np.abs(wq.astype(np.int64)).sum(axis=1) * int(in_max) + np.abs(bq)
    if bound.max() >= 2**31:
        raise ExportError(f"{name}: the int32 accumulator could overflow (bound {int(bound.max())})")
    return QuantLayer(
        w=wq,
        b=bq.astype(np.int32),
        mul=np.array([m for m, _ in mq], np.int64),
        shift=np.array([s for _, s in mq], np.int64),
        relu=relu,
        w_scale=w_scale,
        out_scale=float(out_scale),
    )


def percentile_scale(values: np.ndarray, percentile: float, levels: int) -> float:
    v = np.asarray(values, np.float64).ravel()
    top = float(np.percentile(v, percentile)) if v.size else 0.0
    if top <= 0:
        top = float(v.max()) if v.size and v.max() > 0 else 1.0
    return top / levels


def logit_scale(logits: np.ndarray) -> float:
    m = float(np.abs(logits).max()) if np.size(logits) else 0.0
    return (m if m > 0 else 1.0) / (1 << LOGIT_BITS)
