"""Integer-only deployed form of a lifetime model: the int8 MLP, and :func:`quantize_model`, the
integer form of any exportable model (the GRU is :mod:`dogi_ml.export.gru`, the trees
:mod:`dogi_ml.export.trees`; the input rules and layers all share are :mod:`dogi_ml.export.integer`).

**MLP.** Every layer has int8 weights, symmetric per output channel, the input scale folded in
(``W'[o, i] = W[o, i] * in_scale[i]``, ``w_scale[o] = max|W'[o]| / 127``), an int32 bias at
``w_scale[o]``, int32 accumulation. Hidden layers requantise in 16-bit steps that map onto
SIMD lanes (:func:`hidden_requantize`: ``t = sat16(acc >> p[o])``, ``r = (t * m16[o]) >> 16``,
ReLU and saturation by clamping to ``[0, 255]``; ``m16/2**(16+p) ~ w_scale[o] / out_scale``,
rounding offsets folded into the bias): unsigned 8-bit activations, zero point 0, ``out_scale``
from a percentile of the float activations on the calibration set. The last layer requantises
every class to one logit scale exactly, ``rshift_round(acc * m[o], s[o])`` (int32 logits), and
the class is the first index of the largest logit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import fixedpoint as fx
from .gru import quantize_gru

# the building blocks, importable from here as before
from .integer import (  # noqa: F401
    ACT_MAX,
    HIDDEN_M_HI,
    HIDDEN_M_LO,
    HIDDEN_MAX_SHIFT,
    INT64_MAX,
    INT64_MIN,
    LINEAR,
    LOG,
    LOGIT_BITS,
    MUL_MAX,
    PRE_COLUMNS,
    SPREAD_MAX,
    WEIGHT_MAX,
    ExportError,
    InputQuantizer,
    QuantLayer,
    as_int_features,
    hidden_bias_offset,
    hidden_multiplier,
    hidden_requantize,
    logit_scale,
    percentile_scale,
    quantize_linear,
)
from .trees import integer_trees


# -- MLP ---------------------------------------------------------------------------------------
@dataclass
class QuantizedMLP:
    """The deployed MLP: integer input rules, int8 layers, int32 logits, argmax class."""

    inputs: InputQuantizer
    layers: list
    class_names: list
    info: dict = field(default_factory=dict)
    kind = "mlp"

    @property
    def n_features(self) -> int:
        return self.inputs.n_features

    @property
    def n_classes(self) -> int:
        return int(self.layers[-1].w.shape[0])

    @property
    def dims(self) -> list[int]:
        return [int(self.layers[0].w.shape[1])] + [int(L.w.shape[0]) for L in self.layers]

    def codes(self, X) -> np.ndarray:
        return self.inputs.codes(X)

    def logits_from_codes(self, codes) -> np.ndarray:
        """int32 logits ``[n, classes]`` from input codes ``[n, F]`` (the integer reference)."""
        a = np.asarray(codes, np.int64)
        if a.ndim != 2 or a.shape[1] != self.n_features:
            raise ExportError(f"codes: expected [n, {self.n_features}], got shape {a.shape}")
        for layer in self.layers:
            a = layer.forward(a)
        return a.astype(np.int32)

    def logits_int(self, X) -> np.ndarray:
        """int32 logits of raw int64 features ``[n, F]``."""
        X = as_int_features(X, self.n_features)
        if X.ndim != 2:
            raise ExportError(f"features: expected [n, {self.n_features}], got shape {X.shape}")
        return self.logits_from_codes(self.codes(X))

    def predict(self, X) -> np.ndarray:
        """Class per row: the first index of the largest int32 logit."""
        return self.logits_int(X).argmax(axis=1)

    def packed(self) -> dict:
        """Flat arrays for the Numba kernel (see :func:`dogi_ml.export.numba_kernel.kernel_args`)."""
        return {
            "pre": self.inputs.packed(),
            "log_table": fx.LOG2_TABLE.copy(),
            "dims": np.array(self.dims, np.int64),
            "w": np.concatenate([L.w.ravel() for L in self.layers]).astype(np.int8),
            "b": np.concatenate([L.b for L in self.layers]).astype(np.int32),
            "mul": np.concatenate([L.mul for L in self.layers]).astype(np.int64),
            "shift": np.concatenate([L.shift for L in self.layers]).astype(np.int64),
        }

    def kernel_args(self) -> tuple:
        """``(pre, log_table, dims, w, b, mul, shift)`` for :mod:`dogi_ml.export.numba_kernel`."""
        p = self.packed()
        return tuple(np.ascontiguousarray(p[k]) for k in ("pre", "log_table", "dims", "w", "b", "mul", "shift"))

    def params_dict(self) -> dict:
        """Quantisation parameters for the manifest (the weights live in the .npz and header)."""
        return {
            "activation_max": ACT_MAX,
            "weight_max": WEIGHT_MAX,
            "dims": self.dims,
            "layers": [
                {
                    "relu": L.relu,
                    "out_scale": L.out_scale,
                    "w_scale": L.w_scale.tolist(),
                    "multiplier": L.mul.tolist(),
                    "shift": L.shift.tolist(),
                }
                for L in self.layers
            ],
        }

    def arrays(self) -> dict:
        out = {}
        for i, L in enumerate(self.layers):
            out.update({f"w{i}": L.w, f"b{i}": L.b, f"mul{i}": L.mul, f"shift{i}": L.shift, f"w_scale{i}": L.w_scale})
        return out

    @classmethod
    def from_arrays(cls, inputs: InputQuantizer, params: dict, arrays, class_names) -> QuantizedMLP:
        layers = []
        for i, lp in enumerate(params["layers"]):
            layers.append(
                QuantLayer(
                    w=np.asarray(arrays[f"w{i}"], np.int8),
                    b=np.asarray(arrays[f"b{i}"], np.int32),
                    mul=np.asarray(arrays[f"mul{i}"], np.int64),
                    shift=np.asarray(arrays[f"shift{i}"], np.int64),
                    relu=bool(lp["relu"]),
                    w_scale=np.asarray(arrays[f"w_scale{i}"], np.float64),
                    out_scale=float(lp["out_scale"]),
                )
            )
        return cls(inputs=inputs, layers=layers, class_names=list(class_names))


def mlp_float_layers(model) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(W [out, in], b)`` of the trained MLP's linear layers (float64)."""
    net = getattr(model, "net", None)
    if net is None:
        raise ExportError(f"model {getattr(model, 'name', '?')} is not trained (no network)")
    out = []
    for mod in net:
        kind = type(mod).__name__
        if kind == "Linear":
            out.append(
                (
                    mod.weight.detach().cpu().numpy().astype(np.float64),
                    mod.bias.detach().cpu().numpy().astype(np.float64),
                )
            )
        elif kind not in ("ReLU", "Dropout"):
            raise ExportError(f"MLP export handles Linear/ReLU/Dropout layers, found {kind}")
    return out


def quantize_mlp(
    model,
    X_calib,
    class_names=None,
    feature_names=None,
    input_bits: int = 16,
    input_margin: float = 4.0,
    act_percentile: float = 99.99,
) -> QuantizedMLP:
    """Quantise a trained ``models.MLP`` calibrating on raw training features ``X_calib``."""
    if getattr(model, "name", None) != "mlp":
        raise ExportError(f"quantize_mlp needs an mlp model, got {getattr(model, 'name', type(model).__name__)}")
    inputs = InputQuantizer.fit(model.scaler, X_calib, feature_names, bits=input_bits, margin=input_margin)
    fl = mlp_float_layers(model)
    # float forward on the calibration set (standardised inputs) for the activation ranges
    h = np.asarray(model.scaler.transform(as_int_features(X_calib, inputs.n_features)), np.float64)
    layers, in_scale, in_zero, in_max = [], inputs.scale, inputs.zero, inputs.qmax
    for i, (W, b) in enumerate(fl):
        h = h @ W.T + b
        last = i == len(fl) - 1
        if last:
            out_scale = logit_scale(h)
        else:
            h = np.maximum(h, 0)
            out_scale = percentile_scale(h, act_percentile, ACT_MAX)
        layers.append(
            quantize_linear(W, b, in_scale, in_max, out_scale, relu=not last, name=f"layer {i}", in_zero=in_zero)
        )
        in_scale, in_zero, in_max = np.full(W.shape[0], out_scale), None, ACT_MAX
    names = list(class_names) if class_names is not None else [str(c) for c in range(model.n_classes)]
    return QuantizedMLP(
        inputs=inputs,
        layers=layers,
        class_names=names,
        info={
            "input_margin": input_margin,
            "act_percentile": act_percentile,
            "calibration_rows": int(np.asarray(X_calib).shape[0]),
        },
    )


def quantize_model(model, X_calib, class_names=None, feature_names=None, **opts):
    """The deployed integer form of any exportable model: MLP, GRU, LightGBM, random forest."""
    name = getattr(model, "name", None)
    if name == "mlp":
        return quantize_mlp(model, X_calib, class_names, feature_names, **opts)
    if name == "gru":
        return quantize_gru(model, X_calib, class_names, feature_names, **opts)
    if name in ("lightgbm", "random_forest"):
        return integer_trees(model, class_names, feature_names)
    raise ExportError(
        f"no integer export for model {name!r}; exportable: mlp, gru, lightgbm, random_forest "
        "(tcn and others: float ONNX only)"
    )
