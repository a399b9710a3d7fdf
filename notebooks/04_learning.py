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
# # Learning block lifetimes
#
# `dogi_ml.train` (= `python -m dogi_ml train`): rows sampled as DOGI does, the six features of
# DOGI's Table 3, labels c1..c10 by invalidation time, split by time into train / validation /
# test. Each run is also an MLflow run (`make ui` shows them, with these plots as artifacts).
#
# 1. Feature relevance (Pearson correlation and mutual information with the label).
# 2. Model comparison in the shape of DOGI's Fig. 7: accuracy and inference latency per model.
# 3. Confusion matrices.
#
# `scale` (papermill parameter): the capacity is 16384 × scale blocks; at 1 the models see a few
# thousand rows, so accuracies sit below the paper's.

# %% tags=["parameters"]
scale = 1

# %%
import json
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dogi_ml

# mlflow imports tqdm.auto, which warns that ipywidgets is missing: plain bars are fine here
warnings.filterwarnings("ignore", message="IProgress not found")
workload = {"name": "ycsb_a", "capacity_blocks": int(16384 * scale), "write_volume": 6}
fast = ["latency_budget_s=0.02"] if scale < 4 else []
epochs = [f"model.params.epochs={int(10 * scale)}"] if scale < 4 else []
models = ["logistic", "mlp", "lightgbm", "random_forest", "deepfm"]
runs = {m: dogi_ml.train(workload, model=m, out_dir=f"train/{m}",
                         overrides=fast + (epochs if m in ("mlp", "deepfm") else [])) for m in models}
runs["mlp"]

# %% [markdown]
# ## 1. Feature relevance
# Computed on the training rows of the twelve candidate features (`feature_report.json` of each
# run); DOGI keeps the six with the highest relevance.

# %%
report = pd.DataFrame(json.loads((runs["mlp"].out_dir / "feature_report.json").read_text())).set_index("feature")
fig, ax = plt.subplots(figsize=(8, 3.5))
report[["pcc", "mi"]].abs().sort_values("mi").plot.barh(ax=ax)
ax.set_xlabel("|Pearson correlation| and mutual information with the class")
ax.set_title(f"feature relevance on {workload['name']}")
plt.show()
report.drop(columns="description").round(3)

# %% [markdown]
# ## 2. Models side by side (the shape of DOGI Fig. 7)
# `accuracy_all_classes` scores the test rows as the paper does (hot included);
# `latency_ns_per_block` is the inference time per block at batch 128 on one core.

# %%
cmp = pd.DataFrame([{"model": m, "accuracy": r.accuracy, "accuracy_all_classes": r.metrics["accuracy_all_classes"],
                     "macro_f1": r.metrics["macro_f1"], "majority_baseline": r.metrics["majority_baseline"],
                     "latency_ns_per_block": r.metrics["latency_ns_per_block"],
                     "n_parameters": r.metrics["n_parameters"], "train_seconds": r.metrics["train_seconds"]}
                    for m, r in runs.items()]).set_index("model")
assert cmp.accuracy.between(0, 1).all() and (cmp.latency_ns_per_block > 0).all()
fig, (ax_a, ax_l) = plt.subplots(1, 2, figsize=(10, 3.5))
cmp.accuracy_all_classes.plot.bar(ax=ax_a, rot=0)
ax_a.axhline(cmp.majority_baseline.iloc[0], color="k", ls="--", lw=1, label="majority class")
ax_a.set_ylabel("test accuracy (hot included)")
ax_a.legend(fontsize=8)
cmp.latency_ns_per_block.plot.bar(ax=ax_l, rot=0, logy=True, color="tab:orange")
ax_l.set_ylabel("ns per block (batch 128)")
fig.suptitle(f"models on {workload['name']}")
fig.tight_layout()
plt.show()
cmp.round(3)

# %% [markdown]
# ## 3. Confusion matrices
# Rows are the true classes, columns the predicted ones (the model's classes c1..c10), each row
# normalised to 1: a good lifetime model concentrates on the diagonal.

# %%
shown = ["logistic", "mlp", "lightgbm"]
fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 3.8))
for ax, m in zip(axes, shown):
    cm = runs[m].confusion
    norm = cm.div(cm.sum(axis=1).replace(0, np.nan), axis=0).fillna(0)
    ax.imshow(norm.to_numpy(), cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(cm.columns)), cm.columns, fontsize=7)
    ax.set_yticks(range(len(cm.index)), cm.index, fontsize=7)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"{m}: accuracy {runs[m].accuracy:.3f}", fontsize=9)
fig.tight_layout()
plt.show()
runs["lightgbm"].confusion
