# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Export: the deployed integer model
#
# `dogi_ml.export` (= `python -m dogi_ml export`) turns a trained MLP into the integer form a
# drive's firmware would run: int8 weights, integer inputs, a C header, ONNX files, and a report
# of what that costs.
#
# 1. Accuracy of the float model against the integer one (and how often they agree).
# 2. Parity: the same predictions from Python, Numba and the compiled C header.
# 3. Speed: ns per block at batch 128 on one core for C, Numba, PyTorch and onnxruntime.
#
# `scale` (papermill parameter): the training workload's capacity is 16384 × scale blocks.

# %% tags=["parameters"]
scale = 1

# %%
import warnings

import matplotlib.pyplot as plt
import pandas as pd

import dogi_ml

# mlflow imports tqdm.auto, which warns that ipywidgets is missing: plain bars are fine here
warnings.filterwarnings("ignore", message="IProgress not found")
workload = {"name": "ycsb_a", "capacity_blocks": int(16384 * scale), "write_volume": 6}
fast = ["latency_budget_s=0.02", f"model.params.epochs={int(10 * scale)}"] if scale < 4 else []
model = dogi_ml.train(workload, model="mlp", out_dir="train/mlp", overrides=fast)
report = dogi_ml.export_model(model, out="export/mlp", parity_rows=20000 if scale < 4 else 100000,
                        bench_seconds=0.05 if scale < 4 else 0.3)
model

# %% [markdown]
# ## 1. Integer against float accuracy
# `loss_points`: accuracy points lost by the integer model; `float_int_agreement`: the share of
# test rows where both predict the same class.

# %%
acc = pd.Series(report["accuracy"], name=f"{report['model']} on {report['workload']}")
assert abs(acc["float"] - acc["int"] - acc["loss_points"] / 100) < 1e-9
acc.round(4)

# %% [markdown]
# ## 2. Parity across implementations

# %%
pd.json_normalize(report.get("parity") or {}, sep=".").T.rename(columns={0: "value"})

# %% [markdown]
# ## 3. ns per block
# Batch 128, one core; the C header is built with the machine's C compiler when there is one
# (`report["c"]` says why not otherwise).

# %%
ns = {k: v for k, v in report.get("ns_per_block", {}).items() if isinstance(v, (int, float)) and k not in ("batch", "target_c")}
speed = pd.Series(ns, name="ns/block").sort_values()
assert (speed > 0).all() and any(k.startswith("numba") for k in speed.index)
fig, ax = plt.subplots(figsize=(8, 3.2))
speed.plot.barh(ax=ax, logx=True)
if "target_c" in report.get("ns_per_block", {}):
    ax.axvline(report["ns_per_block"]["target_c"], color="k", ls="--", lw=1, label="C target")
    ax.legend(fontsize=8)
ax.set_xlabel("ns per block (batch 128, one core; log scale)")
ax.set_title("deployed model inference cost")
plt.show()
speed.round(1)

# %% [markdown]
# The exported files (the C header is what firmware includes; `report.json` holds the numbers above):

# %%
from pathlib import Path

pd.DataFrame([{"file": p.name, "bytes": p.stat().st_size} for p in sorted(Path("export/mlp").iterdir())]).set_index("file")
