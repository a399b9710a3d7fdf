"""Where DOGI's S-type gap to the paper comes from (docs/dogi.md "Where the gap to the paper comes from").

The paper (shared/papers/dogi-fast26.txt §5.2) reports that on its S-type workloads (FIO, YCSB-A,
YCSB-F) DOGI's WAF is 19.7% below MiDAS's: the mean of the per-workload reductions its Fig. 10
prints above each DOGI bar. :class:`DogiGap` is the callback of ``+experiment=dogi_gap``, which runs
DOGI and MiDAS on ``zipf``, ``ycsb_a`` and ``ycsb_f`` once as configured and once per cause
(``conf/dogi_gap``: a switch of DOGI's, its training span, the run length, the scale). Each cause's row
is the mean reduction with that one change, and its contribution the difference to the row as
configured; the JSON records the command, the commit, MiDAS's commit and the scale.
"""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from dogi_ml.callbacks import reported
from dogi_ml.provenance import code_commit
from dogi_ml.report import Callback, console, settings_of

PAPER_S_TYPE = 19.7  # §5.2: DOGI vs MiDAS on FIO, YCSB-A, YCSB-F (%)
#: the run measuring two causes together, then the runs of those causes alone
COMBINED = ("dogi_4g_vol31", "dogi_4g", "dogi_vol31")
S_TYPE = ("zipf", "ycsb_a", "ycsb_f")  # zipf stands for FIO's Zipf workload
#: (cause, DOGI's run, MiDAS's run, what changes): each ``conf/dogi_gap`` option pairs with the
#: other scheme's run it is compared with
CAUSES = (
    ("as configured", "dogi", "midas", "this tree at the default scale (1 GiB, 16 capacities written, 10% OP)"),
    ("DOGI's switches at the paper's text", "dogi_text", "midas",
     "final_victim=greedy, fallback_victims=final, reloc_estimate=mean, fallback_compare=none"),
    ("... greedy victims in GN / G_frzn", "dogi_final_greedy", "midas", "final_victim=greedy"),
    ("... fallback victims in GN / G_frzn only", "dogi_fallback_final", "midas", "fallback_victims=final"),
    ("DOGI's training samples over the paper's span", "dogi_span", "midas",
     "train_span=0.3 label_lag=0.3 censored_labels=age (the authors' code)"),
    ("run length as the paper's (4 TiB over 132 GiB)", "dogi_vol31", "midas_vol31", "workload.write_volume=31 (both)"),
    ("scale 4 GiB", "dogi_4g", "midas_4g", "capacity 1,048,576 blocks, 2,048-block segments (both)"),
    ("... 4 GiB and the paper's run length", "dogi_4g_vol31", "midas_4g_vol31", "both of the two rows above (both)"),
)  # fmt: skip


def job_option(job_dir: Path) -> str | None:
    """The ``+dogi_gap`` option a sweep job ran (its ``.hydra/overrides.yaml``)."""
    path = Path(job_dir) / ".hydra" / "overrides.yaml"
    if not path.exists():
        return None
    for o in OmegaConf.load(path) or []:
        if str(o).startswith("+dogi_gap="):
            return str(o).split("=", 1)[1]
    return None


def collect_gap_runs(sweep_dir: Path) -> list[dict]:
    """Each job's result with its ``+dogi_gap`` option under ``gap_option``."""
    runs = []
    for path in sorted(Path(sweep_dir).glob("*/result.json")):
        r = json.loads(path.read_text())
        r["gap_option"] = job_option(path.parent)
        runs.append(r)
    return runs


def gap_table(runs: list[dict]) -> dict:
    """``{"waf": {workload: {option: WAF}}, "causes": [...], "definition": ..., "unexplained": ...}``.

    Per cause: the reduction ``100 (1 - DOGI / MiDAS)`` per S-type workload, their mean, and the
    change against the row as configured (positive: towards the paper's 19.7). ``definition``: the
    same runs' reduction of the mean WAF (the other reading of "reduces WAF by 19.7% on average").
    ``unexplained``: 19.7 less the row as configured and the causes' changes that move towards the
    paper, added as if independent (they are measured one at a time)."""
    waf: dict = {}
    for r in runs:
        if r.get("gap_option"):
            waf.setdefault(str(r["workload"]), {})[r["gap_option"]] = r["waf"]
    causes = []
    for name, dogi, midas, what in CAUSES:
        red = {}
        for wl in S_TYPE:
            d, m = waf.get(wl, {}).get(dogi), waf.get(wl, {}).get(midas)
            red[wl] = None if d is None or m is None else 100.0 * (1.0 - d / m)
        vals = [v for v in red.values() if v is not None]
        mean = sum(vals) / len(vals) if len(vals) == len(S_TYPE) else None
        causes.append({"cause": name, "dogi": dogi, "midas": midas, "change": what, "reduction": red, "mean": mean})
    base = causes[0]["mean"]
    for c in causes:
        c["contribution"] = None if c["mean"] is None or base is None else c["mean"] - base
    definition = None
    if base is not None:
        d = sum(waf[wl]["dogi"] for wl in S_TYPE) / len(S_TYPE)
        m = sum(waf[wl]["midas"] for wl in S_TYPE) / len(S_TYPE)
        definition = {"mean_of_reductions": base, "reduction_of_mean_waf": 100.0 * (1.0 - d / m)}
    # the sub-rows ("... ") split or combine rows above them; only whole causes add up
    whole = [c for c in causes[1:] if not c["cause"].startswith("...")]
    unexplained = None if base is None else PAPER_S_TYPE - base - sum(_towards(whole))
    # the same with the scale and the run length measured together (their own interaction included)
    together = next((c for c in causes if c["dogi"] == COMBINED[0]), None)
    unexplained_together = None
    if base is not None and together is not None and together["contribution"] is not None:
        rest = [c for c in whole if c["dogi"] not in COMBINED[1:]]
        unexplained_together = PAPER_S_TYPE - base - sum(_towards(rest)) - max(0.0, together["contribution"])
    return {
        "waf": waf,
        "causes": causes,
        "definition": definition,
        "unexplained": unexplained,
        "unexplained_together": unexplained_together,
    }


def _towards(causes: list[dict]) -> list[float]:
    """The contributions of ``causes`` that move towards the paper (positive)."""
    return [c["contribution"] for c in causes if (c["contribution"] or 0) > 0]


def _f(v, fmt="{:+.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def gap_markdown(table: dict, meta: dict, title: str) -> str:
    """The gap table: one row per cause, its reductions, mean and change, then the remainder."""
    lines = [
        f"# {title}",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Code: {meta['commit']}; MiDAS: {meta['midas_commit']}",
        "",
        "DOGI's WAF against MiDAS's (%, 100 (DOGI / MiDAS - 1), negative: DOGI lower; the paper's S-type "
        f"figure is -{PAPER_S_TYPE}, the mean over FIO, YCSB-A and YCSB-F); change: of the mean against the row "
        "as configured, in points, positive = towards the paper. Rows starting with ... split or combine the "
        "row above them and do not count towards the remainder.",
        "",
        "| cause | switched | " + " | ".join(S_TYPE) + " | mean | change |",
        "|---|---|" + "---|" * (len(S_TYPE) + 2),
    ]
    for c in table["causes"]:
        cells = [_f(-v if v is not None else None) for v in (c["reduction"][wl] for wl in S_TYPE)]
        lines.append(
            f"| {c['cause']} | {c['change']} | "
            + " | ".join(cells)
            + f" | {_f(-c['mean'] if c['mean'] is not None else None)}"
            f" | {_f(c['contribution'])} |"
        )
    d = table["definition"]
    if d:
        lines += [
            "",
            f"Definition: the mean of the per-workload reductions is {d['mean_of_reductions']:.1f}%, the "
            f"reduction of the mean WAF {d['reduction_of_mean_waf']:.1f}%.",
        ]
    if table["unexplained"] is not None:
        together = table.get("unexplained_together")
        lines += [
            "",
            f"Left unexplained: {table['unexplained']:.1f} points of the paper's {PAPER_S_TYPE} (the causes "
            "that move towards it added as if independent)"
            + (
                f"; {together:.1f} with the scale and the run length measured together."
                if together is not None
                else "."
            ),
        ]
    lines.append("")
    lines.append("WAF per run:")
    lines.append("")
    opts = sorted({o for v in table["waf"].values() for o in v})
    lines += ["| run | " + " | ".join(S_TYPE) + " |", "|---" * (len(S_TYPE) + 1) + "|"]
    for o in opts:
        lines.append(f"| {o} | " + " | ".join(_f(table["waf"].get(wl, {}).get(o), "{:.4f}") for wl in S_TYPE) + " |")
    return "\n".join(lines) + "\n"


MIDAS_FILES = ("dogi_ml/policies/midas.py", "markov/midas.py")


def gap_report(runs: list[dict], prefix: Path, title: str, command: str) -> dict:
    """Write ``PREFIX.json`` and ``PREFIX.md`` of a ``dogi_gap`` sweep; return the JSON payload."""
    table = gap_table(runs)
    scale = {}
    for r in runs:
        st = settings_of(r)
        cfg = r.get("workload_config") or {}
        scale[f"{r['workload']}/{r['gap_option']}"] = {
            "capacity_blocks": st.get("capacity_blocks"),
            "write_volume": cfg.get("write_volume"),
            "segment_blocks": st.get("segment_blocks"),
            "op_ratio": st.get("op_ratio"),
            "gc_free_segments": st.get("gc_free_segments"),
        }
    meta = {"command": command, "commit": code_commit(), "midas_commit": code_commit(MIDAS_FILES)}
    payload = {**meta, "paper_s_type_pct": PAPER_S_TYPE, "scale": scale, **table}
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    prefix.with_suffix(".json").write_text(json.dumps(payload, indent=2, default=float))
    md = gap_markdown(table, meta, title)
    prefix.with_suffix(".md").write_text(md)
    console.print(md, markup=False)
    return payload


class DogiGap(Callback):
    """Hydra callback of ``+experiment=dogi_gap``: :func:`gap_report` of the sweep at ``output=PREFIX``
    (default: the sweep directory's ``dogi_gap``)."""

    @reported
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        runs = collect_gap_runs(sweep_dir)
        if not runs:
            return
        prefix = Path(config.get("output") or sweep_dir / "dogi_gap")
        command = "python -m dogi_ml simulate -m " + " ".join(config.hydra.overrides.task)
        gap_report(runs, prefix, str(config.get("title") or "DOGI's S-type gap"), command)


def main(argv=None) -> None:
    """``python -m dogi_ml.report_dogi OUT_PREFIX SWEEP_DIR``: the gap report of a finished
    ``dogi_gap`` sweep (the command read from its ``multirun.yaml``)."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefix")
    ap.add_argument("sweep")
    ap.add_argument("--title", default="DOGI vs MiDAS on the S-type workloads - the gap to the paper's 19.7% by cause")
    a = ap.parse_args(argv)
    runs = collect_gap_runs(Path(a.sweep))
    if not runs:
        raise SystemExit(f"no */result.json under {a.sweep}")
    cfg = OmegaConf.load(Path(a.sweep) / "multirun.yaml")
    gap_report(runs, Path(a.prefix), a.title, "python -m dogi_ml simulate -m " + " ".join(cfg.hydra.overrides.task))


if __name__ == "__main__":
    main()
