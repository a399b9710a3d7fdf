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
# # Placement schemes side by side
#
# Every heuristic scheme and the future-knowledge oracle on one workload with the same
# simulator settings (`dogi_ml.simulate`): the final WAF, the WAF over time and where the
# traffic goes (user and GC writes per group). `python -m dogi_ml simulate -m +workload=ycsb_a
# policy=...` gives the same numbers for the same settings.
#
# `scale` (papermill parameter): the logical capacity is 16384 × scale blocks (64 MiB at 1).

# %% tags=["parameters"]
scale = 1

# %%
import matplotlib.pyplot as plt
import pandas as pd

import dogi_ml

workload = {"name": "ycsb_a", "capacity_blocks": int(16384 * scale), "write_volume": 8}
sim = {"segment_blocks": 64 if scale < 4 else 512, "victim": "cost_benefit", "victim_for": "followers"}  # MiDAS, DOGI: their own
schemes = ["nosep", "sepgc", "dac", "warcip", "mida", "midas", "sepbit", "fk"]
trace = dogi_ml.generate(workload)           # once: every scheme sees the same writes
pd.Series(trace.stats())[["requests", "write_blocks", "wss_blocks", "traffic_over_wss"]]

# %%
results = {p: dogi_ml.simulate(trace, policy=p, **sim) for p in schemes}
table = pd.DataFrame([{"policy": p, "scheme": r.scheme, "groups": len(r.groups), "waf": r.waf,
                       "gc_writes": r.raw["gc_writes"], "M appends/s": (r.raw["appends_per_second"] or 0) / 1e6}
                      for p, r in results.items()]).sort_values("waf").set_index("policy")
assert (table.waf >= 1).all() and table.loc["fk", "waf"] <= table.loc["nosep", "waf"]
table.round(3)

# %% [markdown]
# `dogi_ml.compare` is the one-call form of the table above (it also nests MLflow runs under
# one parent with `log=True`):

# %%
dogi_ml.compare(["nosep", "sepbit"], trace, **sim).round(3)

# %%
fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [2, 1]})
for p, r in results.items():
    ax_t.plot(r.series.t_over_capacity, r.series.waf, lw=1.1, label=r.scheme)
ax_t.set_xlabel("user writes / capacity (prefill included)")
ax_t.set_ylabel("instantaneous WAF")
ax_t.grid(alpha=0.3)
ax_t.legend(fontsize=8, ncol=2)
ax_b.barh(table.scheme, table.waf)
for i, w in enumerate(table.waf):
    ax_b.text(w, i, f" {w:.2f}", va="center", fontsize=8)
ax_b.invert_yaxis()
ax_b.set_xlabel("WAF")
fig.suptitle(f"{trace.name}: {workload['capacity_blocks']} blocks written {workload['write_volume']}x")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Per-group traffic
# User writes and GC rewrites landing in each group: separation schemes send cold survivors
# of GC to their own groups; the share of GC writes per group shows where the WAF comes from.

# %%
shown = [p for p in ("sepgc", "midas", "sepbit", "fk") if p in results]
fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 3.4), sharey=True)
for ax, p in zip(axes, shown):
    g = results[p].groups
    ax.bar(g.group, g.user_writes, label="user")
    ax.bar(g.group, g.gc_writes, bottom=g.user_writes, label="GC")
    ax.set_title(f"{results[p].scheme} (WAF {results[p].waf:.2f})", fontsize=9)
    ax.set_xlabel("group")
axes[0].set_ylabel("blocks written")
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()
results["sepbit"].groups[["group", "user_writes", "gc_writes", "reclaimed_segments", "victim_valid_ratio"]].round(3)
