"""docs/fleets.md's worked example (100 synthetic volumes) is docs/results/fleet_study*.json and
fleet_study*_results.parquet's: each table cell and each figure the text quotes is compared with its
stored entry, rounded as the page prints it (as ``dogi_ml.pipeline.study.aggregate_markdown`` does),
so a regenerated study (``bash docs/results/regenerate.sh fleet``) cannot leave the page quoting old
numbers.

Not checked here (no stored file holds them, or they are machine timings): the ingest benchmark's
table and memory figures, the study's wall and CPU time and peak RSS, the second study's 5 min 13 s,
the failures at other settings (MiDAS on 6 of 13 volumes, DOGI on 12-16K writes), DOGI's learned
mode on every volume, the SLURM task cost (2.1 CPU-s, 98.8 s, 0.34 s) and the checkpoint sizes and
times. The job times are the Parquet's ``elapsed_s`` (a machine timing, but the page quotes that
file)."""

from __future__ import annotations

import json

import pandas as pd
from helpers import REPO, DocsCells, docs_table, docs_text

PAGE = "docs/fleets.md"  # the tests read the page through this name (a scratch copy can be put in its place)
RESULTS = REPO / "docs/results"

HEAD = (
    "| scheme | overall WAF | vs sepbit (overall) | per-volume WAF p10 | per-volume WAF p25 | per-volume WAF p50 "
    "| per-volume WAF p75 | per-volume WAF p90 | wins |"
)
FIRST = HEAD + " wins without oracles | vs sepbit per volume p10 / p50 / p90 |"
FROZEN = HEAD + " vs sepbit per volume p10 / p50 / p90 |"
#: the page's names of the schemes in its text
NAMES = {
    "phftl_ng": "PHFTL-NG", "shiro_ng": "Shiro-NG", "dogi_frozen": "DOGI frozen", "dogi": "DOGI", "adapt": "ADAPT",
    "hybrid": "hybrid", "sepgc": "SepGC", "shiro": "Shiro", "sepbit_ng": "SepBIT-NG", "mida": "MiDA", "dac": "DAC",
    "minos": "MINOS", "shiro_cb": "Shiro-CB",
}  # fmt: skip

#: the schemes 0.1-1.3% above SepBIT overall, in the page's order
ABOVE = ["sepgc", "shiro", "sepbit_ng", "mida", "dac", "minos", "shiro_cb"]


def aggregate(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def jobs(name: str) -> pd.DataFrame:
    return pd.read_parquet(RESULTS / f"{name}_results.parquet")


def table(head: str) -> list[list[str]]:
    return docs_table(PAGE, head)


def text() -> str:
    return docs_text(PAGE)


def pc(x: float) -> str:
    """A percentage as the study's Markdown prints it."""
    return f"{x:+.1f}%"


def expected_row(agg: dict, s: str) -> list[str]:
    """The cells after the scheme's name, as ``aggregate_markdown`` writes them."""
    red, per = agg["reduction"], agg["per_volume"][s]
    cells = [f"{agg['overall'][s]['waf']:.4f}", pc(red[s]["overall_pct"])]
    cells += [f"{per[f'p{q}']:.4f}" for q in agg["percentiles"]]
    cells += [str(agg["winners"][s])]
    if agg["oracles"]:
        cells += [str(agg["winners_online"].get(s, "oracle"))]
    cells += [" / ".join(pc(red[s][f"per_volume_p{q}_pct"]) for q in (10, 50, 90))]
    return cells


def check_table(agg: dict, head: str, where: str) -> None:
    rows = table(head)
    assert [r[0] for r in rows] == agg["schemes"], [r[0] for r in rows]
    assert agg["percentiles"] == [10, 25, 50, 75, 90]
    c = DocsCells(PAGE)
    columns = head.strip("| ").split(" | ")[1:]
    for scheme, *cells in rows:
        want = expected_row(agg, scheme)
        assert len(cells) == len(want) == len(columns), (scheme, cells)
        for col, page, exp in zip(columns, cells, want):
            c.eq(f"{where} {scheme} {col}", page, exp)
    c.done(len(agg["schemes"]) * len(columns))


def test_first_study_table_is_fleet_study_json():
    """The 22 schemes' aggregates over the 100 volumes: fleet_study.json."""
    agg = aggregate("fleet_study")
    assert agg["volumes"] == 100 and not agg["incomplete_volumes"]
    check_table(agg, FIRST, "fleet_study")


def test_frozen_study_table_is_fleet_study_frozen_json():
    """The second study (hybrid_frozen beside four of the first's schemes): fleet_study_frozen.json."""
    agg = aggregate("fleet_study_frozen")
    assert agg["volumes"] == 100 and not agg["incomplete_volumes"]
    check_table(agg, FROZEN, "fleet_study_frozen")


def test_overall_wafs_are_the_parquet_rows():
    """ "The overall WAFs below were recomputed from the Parquet rows ... and they equal the study's
    own aggregate to the last digit"; the four schemes the second study shares with the first
    "came out equal ... in user writes, GC writes and WAF"."""
    for name in ("fleet_study", "fleet_study_frozen"):
        agg, df = aggregate(name), jobs(name)
        assert (df.status == "ok").all() and len(df) == agg["jobs"]
        sums = df.groupby("scheme")[["total_writes", "user_writes"]].sum()
        for s in agg["schemes"]:
            assert sums.loc[s, "total_writes"] / sums.loc[s, "user_writes"] == agg["overall"][s]["waf"], (name, s)
    first, second = jobs("fleet_study"), jobs("fleet_study_frozen")
    both = second.merge(first, on=["volume", "scheme"], suffixes=("_2", ""))
    assert len(both) == 400 and set(both.scheme) == {"sepbit", "dogi", "dogi_frozen", "hybrid"}
    for k in ("user_writes", "gc_writes", "waf"):
        assert (both[f"{k}_2"] == both[k]).all(), k


def test_job_time_table_is_the_parquet_rows():
    """Job time per scheme: the sum of the first study's ``elapsed_s``, whole seconds."""
    df = jobs("fleet_study")
    secs = {s: f"{t:,.0f} s" for s, t in df.groupby("scheme").elapsed_s.sum().items()}
    rows = {r[0]: r[1] for r in table("| schemes | job time |")}
    groups = {
        "`shiro`, `shiro_ng`, `shiro_cb`": ["shiro", "shiro_ng", "shiro_cb"],
        "`nodap` (the offline group search)": ["nodap"],
        "`mldt`": ["mldt"],
        "`phftl`, `phftl_ng`": ["phftl", "phftl_ng"],
        "`dogi_frozen` (a DOGI run, then the frozen one)": ["dogi_frozen"],
        "`dogi`": ["dogi"],
        "`hybrid`": ["hybrid"],
    }
    rest = sorted(set(secs) - {s for g in groups.values() for s in g})
    label = f"the {len(rest)} heuristic schemes and oracles"
    assert list(rows) == [*groups, label], list(rows)
    c = DocsCells(PAGE)
    for row, schemes in groups.items():
        each = [secs[s] for s in schemes]
        want = each[0] if len(each) == 1 else ", ".join(each[:-1]) + " and " + each[-1]
        c.eq(f"job time {row}", rows[row], want)
    rest_t = sorted(df[df.scheme.isin(rest)].groupby("scheme").elapsed_s.sum())
    c.eq(f"job time {label}", rows[label], f"{rest_t[0]:.0f}-{rest_t[-1]:.0f} s each")
    c.done(len(groups) + 1)
    assert f"Job time was {df.elapsed_s.sum():,.0f} s in all" in text()


def test_text_figures_are_the_stored_study():
    """The worked example's text: the fleet (from the Parquet rows: user writes per volume, the
    working sets as the effective capacities, the settings), the study (jobs, failures, code) and
    the figures "What it shows" quotes from the aggregates."""
    agg, frozen, df = aggregate("fleet_study"), aggregate("fleet_study_frozen"), jobs("fleet_study")
    ov, red, per = agg["overall"], agg["reduction"], agg["per_volume"]
    wins, online = agg["winners"], agg["winners_online"]
    one = df[df.scheme == "sepbit"].set_index("volume")
    settings = df.settings.map(json.loads)
    cap = one.settings.map(lambda s: json.loads(s)["capacity_blocks"])
    assert one.user_writes.sum() == ov["sepbit"]["user_writes"]
    assert {s["segment_blocks"] for s in settings} == {16} and {s["op_ratio"] for s in settings} == {0.15}
    assert df.groupby("volume").user_writes.nunique().max() == 1  # every scheme saw the same writes
    mib = cap * 4096 / 2**20
    overall = {s: red[s]["overall_pct"] for s in agg["schemes"]}
    below = [s for s in agg["schemes"] if 0.35 <= overall[s] < 1.35 and s not in agg["oracles"]]
    above = [s for s in agg["schemes"] if -1.35 < overall[s] <= -0.05]
    assert set(above) == set(ABOVE), above
    online_low = min((s for s in agg["schemes"] if s not in agg["oracles"]), key=lambda s: ov[s]["waf"])
    assert online_low == "midas"
    # lowest WAF first: Shiro-NG before PHFTL-NG, both +1.3% (2.9782 and 2.9789)
    assert sorted(below, key=lambda s: ov[s]["waf"]) == ["shiro_ng", "phftl_ng", "dogi_frozen", "dogi", "adapt", "hybrid"]  # fmt: skip
    assert max(wins, key=wins.get) == "nodap" and sorted(online.values())[-2:] == [online["midas"], online["sepgc"]]
    expected = [
        f"{ov['sepbit']['user_writes'] / 1e6:.2f} M block writes in all, {one.user_writes.min():,} to "
        f"{one.user_writes.max():,} per volume (median {one.user_writes.median():,.0f}); write working sets of "
        f"{cap.min():,} to {cap.max():,} blocks ({mib.min():.0f}-{mib.max():.0f} MiB), each written "
        f"{(one.user_writes / cap).min():.0f} times over",
        f"**Cost.** The {agg['jobs']:,} jobs ran",
        f"Peak RSS of one worker was 1.1 GB. {len(agg['failed'])} jobs failed.",
        f"`0 to run, {agg['jobs']} already done (skipped)`",
        f"`fleet_study_results.parquet` (the {len(df):,} rows)",
        f"{agg['volumes']} volumes (every scheme completed on each), code {agg['code_version'][:7]}",
        f"per-volume WAF CDF of the {len(agg['schemes'])} schemes over the {agg['volumes']} volumes",
        f"at code {frozen['code_version'][:7]}",
        f"Those four schemes' {4 * frozen['volumes']} jobs came out equal",
        f"{frozen['jobs']} jobs ran in",
        f"These volumes' working sets ({mib.min():.0f}-{mib.max():.0f} MiB)",
        f"MiDAS has the lowest overall WAF of the online schemes: {ov['midas']['waf']:.3f}, "
        f"{overall['midas']:.1f}% below SepBIT's {ov['sepbit']['waf']:.3f}.",
        f"Next come, {min(overall[s] for s in below):.1f}-{max(overall[s] for s in below):.1f}% below SepBIT, "
        "lowest WAF first: " + ", ".join(NAMES[s] for s in sorted(below, key=lambda s: ov[s]["waf"])[:-1])
        + f" and the hybrid ({overall['hybrid']:.1f}%).",
        f"PHFTL and ML-DT are level with SepBIT ({pc(overall['phftl'])} and {abs(overall['mldt']):.1f}%).",
        ", ".join(NAMES[s] for s in ABOVE[:-1])
        + f" and {NAMES[ABOVE[-1]]} are {-max(overall[s] for s in above):.1f}-{-min(overall[s] for s in above):.1f}% "
        f"above it, WARCIP {-overall['warcip']:.1f}% and NoSep {-overall['nosep']:.1f}% above.",
        f"SepGC wins {online['sepgc']} volumes and MiDAS {online['midas']}.",
        f"+{red['midas']['per_volume_p50_pct']:.1f}% at the median and +{red['midas']['per_volume_p90_pct']:.1f}% at p90",
        f"NoSep wins {online['nosep']} and DOGI frozen {online['dogi_frozen']} (MINOS {online['minos']}, DAC {online['dac']}).",
        f"DOGI's per-volume WAF runs from p10 {per['dogi']['p10']:.3f} to p90 {per['dogi']['p90']:.3f}, against "
        f"SepBIT's {per['sepbit']['p10']:.3f}-{per['sepbit']['p90']:.3f}.",
        f"Its median per-volume reduction against SepBIT is {red['dogi']['per_volume_p50_pct']:.1f}%, and its "
        f"overall lead ({pc(overall['dogi'])}) also comes from a minority of volumes (p90 {pc(red['dogi']['per_volume_p90_pct'])}).",
        f"is {overall['fk']:.1f}% below SepBIT.",
        f"(`kstream_oracle`) is {overall['kstream_oracle']:.1f}% below and NoDaP (DOGI's offline oracle) "
        f"{overall['nodap']:.1f}% below: NoDaP has the lowest WAF on all {wins['nodap']} volumes.",
        f"(p10 {per['minos']['p10']:.3f}, p50 {per['minos']['p50']:.3f}).",
        f"{settings.iloc[0]['segment_blocks']}-block segments and {100 * settings.iloc[0]['op_ratio']:.0f}% over-provisioning",
    ]  # fmt: skip
    assert len(agg["failed"]) == 0 and wins["nodap"] == agg["volumes"]
    page = text()
    missing = [e for e in expected if e not in page]
    assert not missing, missing


def test_the_published_cdf_is_its_parquet_rows():
    """docs/results/fleet_study_waf_cdf.json (what fleet_study_waf_cdf.png draws, and whose digest
    the PNG records) holds each scheme's per-volume WAFs as fleet_study_results.parquet has them,
    in the aggregate's scheme order, the title naming the fleet and its volumes."""
    from dogi_ml.plotting import data_digest, figure_source

    results = REPO / "docs/results"
    agg = json.loads((results / "fleet_study.json").read_text())
    cdf = json.loads((results / "fleet_study_waf_cdf.json").read_text())
    rows = pd.read_parquet(results / "fleet_study_results.parquet")
    assert (rows["status"] == "ok").all() and agg["incomplete_volumes"] == []
    assert cdf["title"] == f"fleet study: fleet100 ({agg['volumes']} volumes)"
    assert cdf["schemes"] == agg["schemes"] and cdf["oracles"] == agg["oracles"]
    assert cdf["curves"] == {s: sorted(rows.loc[rows["scheme"] == s, "waf"].tolist()) for s in agg["schemes"]}
    assert figure_source(results / "fleet_study_waf_cdf.png") == data_digest(cdf)
