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
# # Traces: real samples, statistics, invalidation times, and SepBIT's conditional probability
#
# 1. The real trace samples shared beside the repository (`../shared/data/traces`), read with
#    `dogi_ml.load_trace`, and their statistics.
# 2. Invalidation-time CDFs (`dogi_ml.annotate`): how soon each written block is overwritten.
# 3. SepBIT §3.2 (Fig. 8): the closed form of Pr(u ≤ u0 | v ≤ v0) for Zipf writes, with the
#    paper's figures as checks (77.1% at α = 1, u0 = 0.25 GiB, v0 = 4 GiB, 10 GiB working set),
#    next to the frequencies measured on a generated Zipf trace.
#
# `scale` (papermill parameter): 1 runs in seconds; larger values grow the generated trace.

# %% tags=["parameters"]
scale = 1

# %%
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import dogi_ml

REPO = Path(dogi_ml.__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DOGI_SHARED_DATA", REPO.parent / "shared" / "data")) / "traces"
SAMPLES = {"tencent_cut_490.csv": "flashnet_tencent", "tencent_cut_211.csv": "flashnet_tencent",
           "msr_cut_105.txt": "flashnet_msr", "blkparse_hadoop.txt": "blkparse",
           "msn_fs_sectors.txt": "sectors_trace", "mqsim_tpcc_small.trace": "mqsim"}

# %% [markdown]
# ## 1. The real samples
# Each is read in its own format; writes are in 4 KiB blocks with dense addresses.

# %%
traces = {name.split(".")[0]: dogi_ml.load_trace(SHARED / name, format=fmt)
          for name, fmt in SAMPLES.items() if (SHARED / name).exists()}
if not traces:
    print(f"no trace samples at {SHARED}: parts 1 and 2 are empty (set DOGI_SHARED_DATA)")
stats = pd.DataFrame([t.stats() for t in traces.values()],
                     columns=["name", "requests", "write_requests", "write_blocks", "wss_blocks",
                              "traffic_over_wss", "time_span_s"]).set_index("name")
stats.round(2)

# %% [markdown]
# ## 2. Invalidation-time CDFs
# The invalidation time of a block write is the number of user-written blocks until its LBA is
# written again (never-overwritten blocks stay above the curve's end). The x axis is in units
# of each trace's write working set: below 1, a block dies before the whole set is rewritten once.

# %%
fig, ax = plt.subplots(figsize=(7, 4))
never = {}
for name, t in traces.items():
    inv = dogi_ml.annotate(t).inv.to_numpy()
    wss = t.stats()["wss_blocks"]
    finite = np.sort(inv[np.isfinite(inv)])
    never[name] = 1 - finite.size / inv.size
    ax.step(finite / wss, np.arange(1, finite.size + 1) / inv.size, where="post", label=name)
ax.set_xscale("log")
ax.set_xlabel("invalidation time / write WSS")
ax.set_ylabel("fraction of block writes")
ax.grid(alpha=0.3)
if traces:
    ax.legend(fontsize=8)
ax.set_title("invalidation-time CDF of the real samples")
plt.show()
pd.Series(never, name="never overwritten").round(3)

# %% [markdown]
# ## 3. SepBIT's conditional probability (§3.2, Fig. 8)
# For a Zipf(α) workload over n LBAs with write probabilities $p_i$, the lifespan $u$ of a
# user-written block and the lifespan $v$ of the block it invalidates satisfy
#
# $$\Pr(u \le u_0 \mid v \le v_0) = \frac{\sum_i (1-(1-p_i)^{u_0})(1-(1-p_i)^{v_0})\,p_i}{\sum_i (1-(1-p_i)^{v_0})\,p_i}.$$

# %%
GiB = 2**18                      # 4 KiB blocks per GiB


def conditional_probability(n: int, alpha: float, u0: float, v0: float) -> float:
    """SepBIT's closed form of Pr(u <= u0 | v <= v0) for Zipf(alpha) over n LBAs."""
    p = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    p /= p.sum()
    log_q = np.log1p(-p)
    a, b = -np.expm1(u0 * log_q), -np.expm1(v0 * log_q)
    return float((a * b * p).sum() / (b * p).sum())


n_paper = 10 * GiB               # the paper's 10 GiB working set
checks = pd.DataFrame([
    ("Fig. 8(a) lowest: alpha 1, u0 0.25 GiB, v0 4 GiB", 0.771, conditional_probability(n_paper, 1.0, GiB / 4, 4 * GiB)),
    ("Fig. 8(b): alpha 1, u0 1 GiB, v0 4 GiB (at least)", 0.871, conditional_probability(n_paper, 1.0, GiB, 4 * GiB)),
    ("Fig. 8(b): alpha 0 (uniform), u0 1 GiB", 0.095, conditional_probability(n_paper, 0.0, GiB, GiB)),
], columns=["paper", "paper value", "closed form"]).set_index("paper")
assert np.allclose(checks["closed form"], checks["paper value"], atol=5e-4), checks
checks.round(4)

# %%
sizes = [0.25, 0.5, 1, 2, 4]                 # GiB
grid = pd.DataFrame([[conditional_probability(n_paper, 1.0, u * GiB, v * GiB) for v in sizes] for u in sizes],
                    index=pd.Index(sizes, name="u0 (GiB)"), columns=pd.Index(sizes, name="v0 (GiB)"))
fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 3.8))
im = ax_a.imshow(grid.to_numpy(), origin="lower", cmap="viridis", vmin=0.7, vmax=1)
ax_a.set_xticks(range(len(sizes)), sizes)
ax_a.set_yticks(range(len(sizes)), sizes)
ax_a.set_xlabel("v0 (GiB)")
ax_a.set_ylabel("u0 (GiB)")
for (i, j), x in np.ndenumerate(grid.to_numpy()):
    ax_a.text(j, i, f"{x:.1%}", ha="center", va="center", fontsize=7, color="w" if x < 0.85 else "k")
ax_a.set_title("(a) alpha = 1")
for alpha in (0, 0.2, 0.4, 0.6, 0.8, 1.0):
    ax_b.plot(sizes, [conditional_probability(n_paper, alpha, GiB, v * GiB) for v in sizes], marker="o", label=f"alpha {alpha}")
ax_b.set_xscale("log", base=2)
ax_b.set_xlabel("v0 (GiB)")
ax_b.set_ylabel("Pr(u <= u0 | v <= v0)")
ax_b.set_title("(b) u0 = 1 GiB")
ax_b.legend(fontsize=7)
fig.suptitle("SepBIT Fig. 8: closed form, 10 GiB working set")
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Measured on a generated trace
# A Zipf trace from `dogi_ml.generate` over n blocks (u0, v0 scaled by n / 10 GiB). For each
# user write that overwrites a block (lifespan v ≤ v0) and is followed by at least u0 more
# writes (so u ≤ u0 is known), we count how often its own lifespan u is ≤ u0.

# %%
n = int(2**15 * scale)
rows = []
for alpha in (0.6, 1.0, 1.2):
    trace = dogi_ml.generate("zipf", capacity_blocks=n, write_volume=12, theta=alpha, seed=1)
    ann = dogi_ml.annotate(trace)
    b = np.arange(len(ann))
    prev, inv = ann.prev.to_numpy(), ann.inv.to_numpy()
    for u_gib, v_gib in ((0.25, 4), (1, 4), (1, 1), (4, 0.25)):
        u0, v0 = u_gib * n / n_paper * GiB, v_gib * n / n_paper * GiB
        cond = (prev >= 0) & (b - prev <= v0) & (b + u0 < b.size)
        rows.append({"alpha": alpha, "u0 (GiB at 10 GiB)": u_gib, "v0 (GiB at 10 GiB)": v_gib, "writes": int(cond.sum()),
                     "measured": float((inv[cond] <= u0).mean()),
                     "closed form": conditional_probability(n, alpha, u0, v0)})
measured = pd.DataFrame(rows)
measured["difference"] = measured["measured"] - measured["closed form"]
assert measured["difference"].abs().max() < 0.02, measured
measured.round(4)
