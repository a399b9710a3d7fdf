"""ONNX export: float models (torch.onnx for MLP/GRU/TCN, skl2onnx/onnxmltools for trees) and
the int8 MLP as a QDQ graph; checked with ``onnx.checker`` and run with onnxruntime.

Every exported graph takes the raw features as ``features`` (``double [n, F]``, or ``[n, T,
F]`` for sequence models) and applies the model's scaler inside the graph (``sign(x) log2(1 +
|x|)`` on the log columns, then ``(g - mean) / std``, cast to float), so a caller feeds what the
feature extractor produced. Outputs: ``logits`` (float ``[n, classes]``; class scores or
probabilities for trees) and ``class`` (int64 ``[n]``).
"""

from __future__ import annotations

import io
import math
import warnings
from pathlib import Path

import numpy as np

from .quantize import ExportError, QuantizedMLP, as_int_features

FLOAT_OPSET = 17
QDQ_OPSET = 21  # int16 QuantizeLinear


def _onnx():
    import onnx

    return onnx


def _preprocess_nodes(scaler, n_features: int, out_name: str = "z", in_name: str = "features"):
    """Nodes and initialisers: raw double features -> the scaler's float32 output."""
    from onnx import TensorProto, helper, numpy_helper

    logs = set(range(n_features)) if scaler.log_columns is None else {int(c) for c in scaler.log_columns}
    mask = np.array([f in logs for f in range(n_features)])
    inits = [
        numpy_helper.from_array(np.array(1.0), "pp_one"),
        numpy_helper.from_array(np.array(math.log(2.0)), "pp_ln2"),
        numpy_helper.from_array(mask, "pp_logmask"),
        numpy_helper.from_array(np.asarray(scaler.mean, np.float64), "pp_mean"),
        numpy_helper.from_array(np.asarray(scaler.std, np.float64), "pp_std"),
    ]
    nodes = [
        helper.make_node("Abs", [in_name], ["pp_abs"]),
        helper.make_node("Add", ["pp_abs", "pp_one"], ["pp_1p"]),
        helper.make_node("Log", ["pp_1p"], ["pp_ln"]),
        helper.make_node("Div", ["pp_ln", "pp_ln2"], ["pp_log2"]),
        helper.make_node("Sign", [in_name], ["pp_sign"]),
        helper.make_node("Mul", ["pp_sign", "pp_log2"], ["pp_slog"]),
        helper.make_node("Where", ["pp_logmask", "pp_slog", in_name], ["pp_g"]),
        helper.make_node("Sub", ["pp_g", "pp_mean"], ["pp_c"]),
        helper.make_node("Div", ["pp_c", "pp_std"], ["pp_z"]),
        helper.make_node("Cast", ["pp_z"], [out_name], to=TensorProto.FLOAT),
    ]
    return nodes, inits


def _input_shape(n_features: int, seq: bool):
    return ["n", "t", n_features] if seq else ["n", n_features]


def preprocess_model(scaler, n_features: int, seq: bool, opset: int, ir_version: int):
    """A standalone ONNX model ``features`` (double) -> ``z`` (float)."""
    from onnx import TensorProto, helper

    nodes, inits = _preprocess_nodes(scaler, n_features)
    shape = _input_shape(n_features, seq)
    graph = helper.make_graph(
        nodes,
        "preprocess",
        [helper.make_tensor_value_info("features", TensorProto.DOUBLE, shape)],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, shape)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)


def _torch_graph(model, seq_len: int | None):
    """The trained PyTorch network exported with ``z`` as input and ``logits`` as output."""
    import torch

    onnx = _onnx()
    net = model.net.eval()
    F = model.n_features
    example = torch.zeros((2, seq_len or 4, F) if model.sequence else (2, F))
    dyn = {"z": {0: "n", 1: "t"} if model.sequence else {0: "n"}, "logits": {0: "n"}}
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net,
            (example,),
            buf,
            input_names=["z"],
            output_names=["logits"],
            dynamic_axes=dyn,
            opset_version=FLOAT_OPSET,
            dynamo=False,
        )
    return onnx.load_from_string(buf.getvalue())


def _tree_graph(model):
    """The tree model through skl2onnx (random forest) or onnxmltools (LightGBM)."""
    F = model.n_features
    if model.name == "random_forest":
        from skl2onnx import convert_sklearn
        from skl2onnx.common.data_types import FloatTensorType

        m = convert_sklearn(
            model.est,
            initial_types=[("z", FloatTensorType([None, F]))],
            options={id(model.est): {"zipmap": False}},
            target_opset={"": FLOAT_OPSET, "ai.onnx.ml": 3},
        )
    elif model.name == "lightgbm":
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = onnxmltools.convert_lightgbm(
                model.est, initial_types=[("z", FloatTensorType([None, F]))], zipmap=False, target_opset=15
            )  # its highest
    else:
        raise ExportError(f"no tree converter for {model.name}")
    return m


def export_float(model, path: str | Path, seq_len: int | None = None) -> Path:
    """Write the float model as ONNX (scaler inside the graph) and check it."""
    onnx = _onnx()
    from onnx import TensorProto, compose, helper

    F = model.n_features
    if model.name in ("mlp", "gru", "tcn", "deepfm"):
        net = _torch_graph(model, seq_len)
        out_name, is_tree = "logits", False
    elif model.name in ("random_forest", "lightgbm"):
        net = _tree_graph(model)
        out_name, is_tree = "probabilities", True
    else:
        raise ExportError(f"no ONNX export for model {model.name!r}")
    opset = next(o.version for o in net.opset_import if o.domain in ("", "ai.onnx"))
    pre = preprocess_model(model.scaler, F, model.sequence, opset, net.ir_version)
    for o in net.opset_import:
        if o.domain not in ("", "ai.onnx"):
            pre.opset_import.append(helper.make_opsetid(o.domain, o.version))
    merged = compose.merge_models(pre, net, io_map=[("z", "z")])
    g = merged.graph
    if is_tree:
        # tree graphs: label (int64 class id) and probabilities over the classes seen in training
        classes = np.asarray(model.est.classes_, np.int64)
        full = np.zeros((len(classes), model.n_classes), np.float32)
        full[np.arange(len(classes)), classes] = 1.0
        g.initializer.append(onnx.numpy_helper.from_array(full, "to_all_classes"))
        g.node.append(helper.make_node("MatMul", [out_name, "to_all_classes"], ["logits"]))
    g.node.append(helper.make_node("ArgMax", ["logits"], ["class"], axis=1, keepdims=0))
    del g.output[:]
    g.output.extend(
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", model.n_classes]),
            helper.make_tensor_value_info("class", TensorProto.INT64, ["n"]),
        ]
    )
    merged.producer_name = "dogi_ml export"
    return _save_checked(merged, path)


def _real_bias(L) -> np.ndarray:
    """The layer's bias in accumulator units without the integer path's rounding offsets
    (QuantizeLinear rounds by itself)."""
    from .quantize import hidden_bias_offset

    b = L.b.astype(np.float64)
    return b - hidden_bias_offset(L.mul, L.shift) if L.relu else b


def export_qdq(q: QuantizedMLP, scaler, path: str | Path) -> Path:
    """The int8 MLP as a QDQ graph (opset 21): input codes int16 per feature, int8 weights per
    output channel, uint8 activations, float logits in the integer reference's units."""
    from onnx import TensorProto, helper, numpy_helper

    F = q.n_features
    nodes, inits = _preprocess_nodes(scaler, F)
    qmax = q.inputs.qmax
    in_type = np.int16 if q.inputs.bits == 16 else np.int8
    inits += [
        numpy_helper.from_array(q.inputs.scale.astype(np.float32), "in_scale"),
        numpy_helper.from_array(q.inputs.zero.astype(np.float32), "in_zero"),
        numpy_helper.from_array(np.zeros(F, in_type), "in_zp"),
        numpy_helper.from_array(np.array(-qmax, np.float32) * q.inputs.scale.astype(np.float32), "in_lo"),
        numpy_helper.from_array(np.array(qmax, np.float32) * q.inputs.scale.astype(np.float32), "in_hi"),
        numpy_helper.from_array(np.array(1.0, np.float32), "unit_scale"),
        numpy_helper.from_array(np.array(0, in_type), "unit_zp_in"),
    ]
    # a code stands for code * scale + zero: remove the zero, saturate to +-qmax like the integer
    # rules, quantise per feature, then use the codes (layer 0's bias holds W @ zero)
    nodes += [
        helper.make_node("Sub", ["z", "in_zero"], ["z_c"]),
        helper.make_node("Max", ["z_c", "in_lo"], ["z_lo"]),
        helper.make_node("Min", ["z_lo", "in_hi"], ["z_sat"]),
        helper.make_node("QuantizeLinear", ["z_sat", "in_scale", "in_zp"], ["x_q"], axis=1),
        helper.make_node("DequantizeLinear", ["x_q", "unit_scale", "unit_zp_in"], ["a0"]),
    ]
    src = "a0"
    for i, L in enumerate(q.layers):
        n_out = L.w.shape[0]
        # layer 0 multiplies codes (scale 1), later layers real activations (scale out_scale)
        in_scale = 1.0 if i == 0 else q.layers[i - 1].out_scale
        w_scale = (L.w_scale / in_scale).astype(np.float32)
        inits += [
            numpy_helper.from_array(np.ascontiguousarray(L.w.T), f"w{i}_q"),
            numpy_helper.from_array(w_scale, f"w{i}_scale"),
            numpy_helper.from_array(np.zeros(n_out, np.int8), f"w{i}_zp"),
            numpy_helper.from_array((_real_bias(L) * L.w_scale).astype(np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node("DequantizeLinear", [f"w{i}_q", f"w{i}_scale", f"w{i}_zp"], [f"w{i}"], axis=1),
            helper.make_node("MatMul", [src, f"w{i}"], [f"mm{i}"]),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"h{i}"]),
        ]
        if L.relu:
            inits += [
                numpy_helper.from_array(np.array(L.out_scale, np.float32), f"a{i}_scale"),
                numpy_helper.from_array(np.array(0, np.uint8), f"a{i}_zp"),
            ]
            nodes += [
                helper.make_node("Relu", [f"h{i}"], [f"r{i}"]),
                helper.make_node("QuantizeLinear", [f"r{i}", f"a{i}_scale", f"a{i}_zp"], [f"a{i}_q"]),
                helper.make_node("DequantizeLinear", [f"a{i}_q", f"a{i}_scale", f"a{i}_zp"], [f"a{i + 1}"]),
            ]
            src = f"a{i + 1}"
        else:
            inits.append(numpy_helper.from_array(np.array(L.out_scale, np.float32), "logit_scale"))
            nodes += [
                helper.make_node("Div", [f"h{i}", "logit_scale"], ["logits"]),
                helper.make_node("ArgMax", ["logits"], ["class"], axis=1, keepdims=0),
            ]
    graph = helper.make_graph(
        nodes,
        "dogi_int8_mlp_qdq",
        [helper.make_tensor_value_info("features", TensorProto.DOUBLE, ["n", F])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", q.n_classes]),
            helper.make_tensor_value_info("class", TensorProto.INT64, ["n"]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", QDQ_OPSET)], ir_version=10)
    model.producer_name = "dogi_ml export"
    return _save_checked(model, path)


def _save_checked(model, path) -> Path:
    onnx = _onnx()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def check(path: str | Path) -> None:
    """``onnx.checker`` on a saved file (raises ExportError with the checker's reason)."""
    onnx = _onnx()
    try:
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    except Exception as exc:  # noqa: BLE001 - the checker raises several types
        raise ExportError(f"{path}: ONNX check failed: {exc}") from exc


def session(path: str | Path, threads: int = 1):
    """An onnxruntime CPU session (``threads`` intra-op threads)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads)
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def run(sess, X, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """``(class, logits)`` of raw features through an ONNX session."""
    X = as_int_features(X, n_features).astype(np.float64)
    logits, cls = sess.run(["logits", "class"], {"features": X})
    return cls, logits


def torch_classes(model, X) -> np.ndarray:
    """The float PyTorch model's classes (its own network, not the numpy fast path)."""
    import torch

    z = np.ascontiguousarray(model.scaler.transform(X))
    with torch.no_grad():
        out = []
        for i in range(0, len(z), 8192):
            out.append(model.net(torch.from_numpy(z[i : i + 8192])).argmax(dim=1).numpy())
    return np.concatenate(out) if out else np.zeros(0, np.int64)
