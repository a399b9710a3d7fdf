"""Integer GRU (one step with the caller's hidden state) and its C emission.

PyTorch's GRU cell, gates in order r, z, n::

    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
    z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
    h' = (1 - z) * n + z * h = n + z * (h - n)

Integer form: ``x`` are the manifest's input codes, ``h`` is int16 in Q15. Both matrix
products are int8 per output channel with int32 accumulation (:func:`dogi_ml.export.quantize.
quantize_linear`), each requantised to Q12 gate pre-activations; sigmoid and tanh come from the
interpolated Q15 table of :mod:`dogi_ml.export.fixedpoint`; products of Q15 values are rounded back with
``rshift_round(., 15)``. The head is an int8 linear layer to int32 logits, as in the MLP.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import fixedpoint as fx
from .c_common import c_array, epilogue, helpers, prologue, quantize_inputs_fn, rules_doc
from .integer import ExportError, InputQuantizer, QuantLayer, as_int_features, logit_scale, quantize_linear

H_FRAC = 15  # hidden state in Q15 (int16)
GATE_FRAC = fx.SIG_IN_FRAC  # gate pre-activations in Q12
H_MIN, H_MAX = -(1 << 15), (1 << 15) - 1


@dataclass
class QuantizedGRU:
    """The deployed GRU: integer input rules, int8 gate matrices, Q15 state, int32 logits."""

    inputs: InputQuantizer
    wx: QuantLayer  # [3H, F] -> Q12
    wh: QuantLayer  # [3H, H] -> Q12
    head: QuantLayer  # [C, H] -> int32 logits
    class_names: list
    info: dict = field(default_factory=dict)
    kind = "gru"

    @property
    def hidden(self) -> int:
        return int(self.wh.w.shape[1])

    @property
    def n_features(self) -> int:
        return self.inputs.n_features

    @property
    def n_classes(self) -> int:
        return int(self.head.w.shape[0])

    def step_codes(self, codes: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step for a batch: codes ``[n, F]``, state ``[n, H]`` (Q15) -> logits, new state."""
        H = self.hidden
        h = np.asarray(h, np.int64)
        gx = self.wx.forward(np.asarray(codes, np.int64))
        gh = self.wh.forward(h)
        r = fx.sigmoid_q15(gx[:, :H] + gh[:, :H])
        z = fx.sigmoid_q15(gx[:, H : 2 * H] + gh[:, H : 2 * H])
        n = fx.tanh_q15(gx[:, 2 * H :] + fx.rshift_round(r * gh[:, 2 * H :], H_FRAC))
        h_new = np.clip(n + fx.rshift_round(z * (h - n), H_FRAC), H_MIN, H_MAX)
        return self.head.forward(h_new).astype(np.int32), h_new

    def step(self, X, h) -> tuple[np.ndarray, np.ndarray]:
        """One step from raw features ``[n, F]`` and the caller's state ``[n, H]``."""
        X = as_int_features(X, self.n_features)
        h = np.asarray(h)
        if h.shape != (X.shape[0], self.hidden):
            raise ExportError(f"hidden state: expected shape ({X.shape[0]}, {self.hidden}), got {h.shape}")
        return self.step_codes(self.inputs.codes(X), h)

    def logits_int(self, Xseq) -> np.ndarray:
        """int32 logits of feature histories ``[n, T, F]`` (oldest first) from a zero state."""
        X = as_int_features(Xseq, self.n_features)
        if X.ndim != 3:
            raise ExportError(f"GRU features: expected [n, history, {self.n_features}], got shape {X.shape}")
        h = np.zeros((X.shape[0], self.hidden), np.int64)
        logits = np.zeros((X.shape[0], self.n_classes), np.int32)
        for t in range(X.shape[1]):
            logits, h = self.step_codes(self.inputs.codes(X[:, t]), h)
        return logits

    def predict(self, Xseq) -> np.ndarray:
        return self.logits_int(Xseq).argmax(axis=1)

    def params_dict(self) -> dict:
        return {
            "hidden": self.hidden,
            "state": "int16 Q15",
            "gates": "Q12 pre-activations",
            "sigmoid_table": "round(32768*sigmoid(-8 + i/16)), i=0..256, interpolated on Q12 inputs",
            "layers": [
                {"name": n, "out_scale": L.out_scale, "multiplier": L.mul.tolist(), "shift": L.shift.tolist()}
                for n, L in (("wx", self.wx), ("wh", self.wh), ("head", self.head))
            ],
        }

    def arrays(self) -> dict:
        out = {}
        for n, L in (("wx", self.wx), ("wh", self.wh), ("head", self.head)):
            out.update(
                {f"{n}_w": L.w, f"{n}_b": L.b, f"{n}_mul": L.mul, f"{n}_shift": L.shift, f"{n}_w_scale": L.w_scale}
            )
        return out

    @classmethod
    def from_arrays(cls, inputs, params, arrays, class_names) -> QuantizedGRU:
        scales = {lp["name"]: lp["out_scale"] for lp in params["layers"]}
        mk = lambda n: QuantLayer(
            w=np.asarray(arrays[f"{n}_w"], np.int8),
            b=np.asarray(arrays[f"{n}_b"], np.int32),  # noqa: E731
            mul=np.asarray(arrays[f"{n}_mul"], np.int64),
            shift=np.asarray(arrays[f"{n}_shift"], np.int64),
            relu=False,
            w_scale=np.asarray(arrays[f"{n}_w_scale"], np.float64),
            out_scale=scales[n],
        )
        return cls(inputs=inputs, wx=mk("wx"), wh=mk("wh"), head=mk("head"), class_names=list(class_names))


def quantize_gru(
    model, X_calib, class_names=None, feature_names=None, input_bits: int = 16, input_margin: float = 4.0, **_ignored
) -> QuantizedGRU:
    """Quantise a trained ``models.GRU``; ``X_calib`` are raw training histories ``[n, T, F]``."""
    import torch

    net = getattr(model, "net", None)
    if net is None:
        raise ExportError("GRU model is not trained (no network)")
    Xc = as_int_features(X_calib, model.n_features, "calibration histories")
    inputs = InputQuantizer.fit(
        model.scaler, Xc.reshape(-1, model.n_features), feature_names, bits=input_bits, margin=input_margin
    )
    g = net.gru
    W_ih = g.weight_ih_l0.detach().numpy().astype(np.float64)
    W_hh = g.weight_hh_l0.detach().numpy().astype(np.float64)
    b_ih = g.bias_ih_l0.detach().numpy().astype(np.float64)
    b_hh = g.bias_hh_l0.detach().numpy().astype(np.float64)
    W_o = net.head.weight.detach().numpy().astype(np.float64)
    b_o = net.head.bias.detach().numpy().astype(np.float64)
    H = W_hh.shape[1]
    gate = 2.0**-GATE_FRAC
    hs = 2.0**-H_FRAC
    wx = quantize_linear(
        W_ih, b_ih, inputs.scale, inputs.qmax, gate, relu=False, name="gru input gates", in_zero=inputs.zero
    )
    wh = quantize_linear(W_hh, b_hh, np.full(H, hs), 1 << H_FRAC, gate, relu=False, name="gru hidden gates")
    with torch.no_grad():
        z = torch.from_numpy(np.ascontiguousarray(model.scaler.transform(Xc)))
        logits = net(z).numpy()
    head = quantize_linear(W_o, b_o, np.full(H, hs), 1 << H_FRAC, logit_scale(logits), relu=False, name="gru head")
    names = list(class_names) if class_names is not None else [str(c) for c in range(model.n_classes)]
    return QuantizedGRU(
        inputs=inputs,
        wx=wx,
        wh=wh,
        head=head,
        class_names=names,
        info={"input_margin": input_margin, "calibration_rows": int(Xc.shape[0])},
    )


def _linear_c(P: str, name: str, L: QuantLayer, src: str, dst: str, n_in: int, n_out: int, clip: str) -> str:
    return f"""    for (o = 0; o < {n_out}; ++o) {{
        int64_t acc = {P}_{name}_b[o], r;
        for (i = 0; i < {n_in}; ++i) acc += (int64_t){P}_{name}_w[o][i] * {src}[i];
        r = {P}_rshift_round(acc * {P}_{name}_m[o], {P}_{name}_s[o]);
        {clip}
        {dst}[o] = r;
    }}
"""


def emit_gru(q: QuantizedGRU, P: str = "dogi", source: str | None = None) -> str:
    """C99 header of the integer GRU step (see :mod:`dogi_ml.export.c_header` for the API)."""
    H, F, C = q.hidden, q.n_features, q.n_classes
    U = P.upper()
    doc = [
        f"int8 GRU, {F} features -> hidden {H} -> {C} classes; state int16 Q15 kept by the caller",
        "(zeros for an LBA never seen); gate pre-activations Q12; sigmoid/tanh from an",
        "interpolated table; int32 logits, class = first index of the largest logit.",
        "",
    ] + rules_doc(q.inputs)
    out = [prologue(P, f"{P}: deployed lifetime classifier (GRU step)", doc, source)]
    out.append(f"#define {U}_N_FEATURES {F}\n#define {U}_N_CLASSES {C}\n#define {U}_HIDDEN {H}\n\n")
    out.append(helpers(P))
    out.append(quantize_inputs_fn(P, q.inputs))
    out.append(c_array(f"{P}_sigmoid_table", "int32_t", fx.SIGMOID_TABLE, 10))
    out.append(f"""
/* sigmoid of a Q12 value, in Q15 */
static inline int64_t {P}_sigmoid_q15(int64_t a)
{{
    int64_t u, lo;
    int32_t idx;
    if (a < -32768) a = -32768;
    if (a > 32767) a = 32767;
    u = a + 32768;
    idx = (int32_t)(u >> 8);
    lo = {P}_sigmoid_table[idx];
    return lo + ((({P}_sigmoid_table[idx + 1] - lo) * (u & 255) + 128) >> 8);
}}

/* tanh of a Q12 value, in Q15: 2 sigmoid(2a) - 1 */
static inline int64_t {P}_tanh_q15(int64_t a) {{ return 2 * {P}_sigmoid_q15(2 * a) - 32768; }}

""")
    for name, L in (("wx", q.wx), ("wh", q.wh), ("head", q.head)):
        out.append(c_array(f"{P}_{name}_w", "int8_t", L.w))
        out.append(c_array(f"{P}_{name}_b", "int32_t", L.b, 8))
        out.append(c_array(f"{P}_{name}_m", "int64_t", L.mul, 6))
        out.append(c_array(f"{P}_{name}_s", "int8_t", L.shift, 16))
    clip32 = "if (r > INT32_MAX) r = INT32_MAX;\n        if (r < INT32_MIN) r = INT32_MIN;"
    out.append(f"""
/* one write of one LBA: raw features [{U}_N_FEATURES], that LBA's state h [{U}_HIDDEN] (updated in
 * place) -> class; logits [{U}_N_CLASSES] (int32) if not 0 */
static inline int32_t {P}_gru_step(const int64_t *features, int16_t *h, int32_t *logits)
{{
    int32_t x[{F}];
    int64_t gx[{3 * H}], gh[{3 * H}], hn[{H}], lg[{C}];
    int32_t i, o, c, best;
    {P}_quantize_inputs(features, x);
{_linear_c(P, "wx", q.wx, "x", "gx", F, 3 * H, clip32)}{_linear_c(P, "wh", q.wh, "h", "gh", H, 3 * H, clip32)}    for (i = 0; i < {H}; ++i) {{
        const int64_t r = {P}_sigmoid_q15(gx[i] + gh[i]);
        const int64_t z = {P}_sigmoid_q15(gx[{H} + i] + gh[{H} + i]);
        const int64_t n = {P}_tanh_q15(gx[{2 * H} + i] + {P}_rshift_round(r * gh[{2 * H} + i], 15));
        int64_t v = n + {P}_rshift_round(z * ((int64_t)h[i] - n), 15);
        if (v > 32767) v = 32767;
        if (v < -32768) v = -32768;
        hn[i] = v;
    }}
    for (i = 0; i < {H}; ++i) h[i] = (int16_t)hn[i];
{_linear_c(P, "head", q.head, "hn", "lg", H, C, clip32)}    best = 0;
    for (c = 1; c < {C}; ++c)
        if (lg[c] > lg[best]) best = c;
    if (logits) for (c = 0; c < {C}; ++c) logits[c] = (int32_t)lg[c];
    return best;
}}

/* n blocks, each with its own state: features [n][{U}_N_FEATURES], h [n][{U}_HIDDEN] -> classes [n] */
static inline void {P}_gru_step_batch(const int64_t *features, int16_t *h, int32_t n, int32_t *classes,
                                      int32_t *logits)
{{
    int32_t r;
    for (r = 0; r < n; ++r)
        classes[r] = {P}_gru_step(features + (int64_t)r * {U}_N_FEATURES, h + (int64_t)r * {U}_HIDDEN,
                                  logits ? logits + (int64_t)r * {U}_N_CLASSES : 0);
}}

/* a whole history [t][{U}_N_FEATURES] (oldest first) from a zero state -> class of the last step */
static inline int32_t {P}_gru_predict_sequence(const int64_t *features, int32_t t, int32_t *logits)
{{
    int16_t h[{H}];
    int32_t i, c = 0;
    for (i = 0; i < {H}; ++i) h[i] = 0;
    for (i = 0; i < t; ++i) c = {P}_gru_step(features + (int64_t)i * {U}_N_FEATURES, h, logits);
    return c;
}}
""")
    out.append(epilogue(P))
    return "".join(out)
