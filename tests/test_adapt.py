"""ADAPT (issue 16): cross-group aggregation invariants, density behaviour, configuration.

One compiled loop (ADAPT x greedy) for the whole file; traces of 4-8K blocks.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import REPO

from dogi_ml.plotting import data_digest, figure_source
from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, Simulator, check_invariants
from dogi_ml.sim.policy_api import record
from dogi_ml.sim.state import C_LAZY, C_SHADOW
from dogi_ml.traces.generators import density_arrivals, generate

CAP = 8192


def _timed_zipf(n, density, seed=7):
    tr = generate("zipf", capacity_blocks=CAP, n_writes=n, seed=seed, theta=0.9)
    return tr.block_writes.astype(np.int64), density_arrivals(n, density, seed)


def _adapt_sim(**params):
    cfg = SimConfig(segment_blocks=64, op_ratio=0.15, raid_chunk_blocks=16, raid_chunk_timeout_us=100, victim="greedy")
    return Simulator(make_policy("adapt", None, **params), cfg, CAP)


def test_aggregation_moves_no_block_twice_and_loses_none():
    writes, times = _timed_zipf(3 * CAP, 40.0)
    sim = _adapt_sim()
    sim.prefill(int(times[0]))
    written = np.zeros(CAP, bool)
    written[:] = True  # prefill wrote every block
    for lo in range(0, writes.size, 16):
        sim.feed(writes[lo : lo + 16], times=times[lo : lo + 16])
        s = sim.state
        check_invariants(s)  # includes the chunk layer's (shadowed <= pending, deadlines, totals)
        # every shadow copy belongs to exactly one original: lazily appended since, or still pending
        assert int(s.ctr[C_SHADOW]) == int(s.ctr[C_LAZY]) + int(s.chunk_shadowed.sum())
        # no block lost: every written LBA is mapped to a live slot holding it
        assert np.all(s.l2p >= 0) and np.all(s.p2l[s.l2p] == np.arange(CAP))
        # shadows only go into the cold user group, whose own blocks are never shadowed
        assert s.group_shadow[0] == 0 and not np.any(s.group_shadow[2:]) and s.chunk_shadowed[1] == 0
    r = sim.result()
    assert r["adapt_shadowed_blocks"] == r["shadow_blocks"] > 0
    assert r["lazy_appended_blocks"] > 0


def test_aggregation_lowers_padding_of_the_hot_group():
    writes, times = _timed_zipf(3 * CAP, 40.0)
    # the threshold fixed by SepBIT's rule in both runs, so only aggregation differs
    on = _adapt_sim(ghost=False, demote=False).run(writes, times=times)
    off = _adapt_sim(ghost=False, demote=False, aggregate=False).run(writes, times=times)
    assert off["shadow_blocks"] == 0
    assert on["groups"][0]["padding_blocks"] < off["groups"][0]["padding_blocks"]
    assert on["padding_blocks"] + on["shadow_blocks"] < off["padding_blocks"]


@pytest.mark.parametrize("into_cold", [False, True], ids=["gc_groups", "into_cold"])
def test_gc_aggregation_moves_no_block_twice_and_pads_fewer_gc_chunks(into_cold):
    """gc_aggregate: at a GC pass's end the GC groups' partial chunks are shadow-appended into the
    coldest one's (§3.3 applied to GC chunks) instead of each being padded; gc_into_cold: one left
    alone goes into the cold user group's unfilled chunk."""
    writes, times = _timed_zipf(3 * CAP, 40.0)
    sim = _adapt_sim(gc_aggregate=True, gc_into_cold=into_cold)
    sim.prefill(int(times[0]))
    for lo in range(0, writes.size, 64):
        sim.feed(writes[lo : lo + 64], times=times[lo : lo + 64])
        s = sim.state
        check_invariants(s)
        assert int(s.ctr[C_SHADOW]) == int(s.ctr[C_LAZY]) + int(s.chunk_shadowed.sum())
        assert np.all(s.l2p >= 0) and np.all(s.p2l[s.l2p] == np.arange(CAP))
        # the hottest GC group is never a shadow group (a colder one is)
        assert s.group_shadow[2] == 0
    on = sim.result()
    off = _adapt_sim().run(writes, times=times)
    gc_shadows = sum(g["shadow_blocks"] for g in on["groups"][3:])
    assert on["adapt_gc_shadowed_blocks"] >= gc_shadows > 0
    assert on["adapt_gc_agg_passes"] > 0 and off["adapt_gc_agg_passes"] == off["adapt_gc_shadowed_blocks"] == 0
    gc_pad = [sum(g["padding_blocks"] for g in r["groups"][2:]) for r in (on, off)]
    assert gc_pad[0] < gc_pad[1]
    assert (on["adapt_gc_into_cold"] > 0) == into_cold and on["scheme"].endswith(
        "[+gcagg+gccold]" if into_cold else "[+gcagg]"
    )


@pytest.mark.parametrize("ghost_gc_groups", [False, True], ids=["paper_ghosts", "ghosts_with_gc_groups"])
def test_ghost_threshold_and_demotion_in_a_run(ghost_gc_groups):
    writes, times = _timed_zipf(3 * CAP, 40.0)
    sim = _adapt_sim(demote_score=1, ghost_gc_groups=ghost_gc_groups)
    r = sim.run(writes, times=times)
    check_invariants(sim.state)
    # the ghost sets applied thresholds (every 10% of the capacity at least), within their cap,
    # and never dropped a sampled write or a ghost append
    assert r["adapt_ghost_adjustments"] >= 10 and 0 < r["adapt_threshold"] <= 16 * CAP
    assert r["adapt_ghost_dropped"] == 0
    # demoted user writes went to GC groups only, and are counted there as user writes
    dem = r["adapt_demoted_per_group"]
    assert r["adapt_demotions"] == sum(dem) > 0 and dem[0] == dem[1] == 0
    assert all(r["groups"][g]["user_writes"] >= dem[g] for g in range(2, 6))
    mem = r["adapt_memory"]["bytes"]
    assert mem["total"] == mem["sampling"] + mem["ghost_sets"] + mem["filters"] > 0


def test_demote_coldest_demotes_into_the_coldest_gc_group_only():
    """``demote_coldest``: only GC group 5's cascade is consulted; §3.4's rule (the default) takes
    the best score over groups 3-5. Same writes, same filters' inputs until the first demotion."""
    writes, times = _timed_zipf(3 * CAP, 40.0)
    best = _adapt_sim(demote_score=1).run(writes, times=times)
    coldest = _adapt_sim(demote_score=1, demote_coldest=True).run(writes, times=times)
    assert coldest["scheme"] == "adapt[+dcold]" and best["scheme"] == "adapt"
    dem_best, dem_cold = best["adapt_demoted_per_group"], coldest["adapt_demoted_per_group"]
    assert sum(dem_best[3:5]) > 0, "the default rule demotes into the warmer GC groups too"
    assert dem_cold[:5] == [0] * 5 and dem_cold[5] == coldest["adapt_demotions"] > 0


@pytest.mark.parametrize("variant", ["code", "paper"])
def test_adapt_without_its_mechanisms_is_the_sepbit_it_is_built_on(variant):
    """Ghosts, aggregation and demotion off: ADAPT places every block as SepBIT does (its FIFO
    queue, l, creation times and GC classes), per group and in total."""
    writes, times = _timed_zipf(3 * CAP, 40.0)
    cfg = SimConfig(segment_blocks=64, op_ratio=0.15, raid_chunk_blocks=16, raid_chunk_timeout_us=100, victim="greedy")
    bare = dict(ghost=False, demote=False, aggregate=False, base=variant)
    a = Simulator(make_policy("adapt", None, **bare), cfg, CAP).run(writes, times=times)
    b = Simulator(make_policy("sepbit", None, variant=variant), cfg, CAP).run(writes, times=times)
    assert a["waf"] == b["waf"] and a["gc_writes"] == b["gc_writes"] > 0
    cols = ("user_writes", "gc_writes", "padding_blocks")
    assert [[g[c] for c in cols] for g in a["groups"]] == [[g[c] for c in cols] for g in b["groups"]]
    assert a["adapt_sepbit_threshold"] == b["sepbit_threshold"] is not None


def test_sepbit_creation_times_survive_padding_filled_segments():
    """SepBIT's code variant creates Class 1's next segment when the current one fills. Under the
    chunk layer padding fills most of them (sparse writes), after SepBIT's last write to them: the
    next segment's creation is then that write's time + 1, not a time kept from an older segment
    (which made every lifespan, and so l, far too long: Zipf 0.9, 1M blocks, WA 10.76 -> 9.96)."""
    writes, times = _timed_zipf(3 * CAP, 40.0)
    cfg = SimConfig(segment_blocks=64, op_ratio=0.15, raid_chunk_blocks=16, raid_chunk_timeout_us=100, victim="greedy")
    sim = Simulator(make_policy("sepbit", None), cfg, CAP)
    sim.prefill(int(times[0]))
    s, created = sim.state, sim.pstate.created
    checked, last_checked = 0, -1
    for lo in range(0, writes.size, 8):
        sim.feed(writes[lo : lo + 8], times=times[lo : lo + 8])
        seg = s.open_seg[0]
        if seg < 0 or seg != record(sim.pstate.scalars).tracked or seg == last_checked:
            continue  # (its creation time is recorded at the first write after it opened)
        # the previous Class-1 segment: the latest opened before this one among Class 1's
        older = np.flatnonzero((s.seg_group == 0) & (s.seg_open_time < s.seg_open_time[seg]) & (s.seg_wp > 0))
        if older.size:
            prev = older[np.argmax(s.seg_open_time[older])]
            # created after the previous segment opened (it filled after that), at or before its own first block
            assert s.seg_open_time[prev] < created[seg] <= s.seg_open_time[seg] + 1, (prev, seg)
            checked += 1
        last_checked = seg
    assert checked > 20
    assert int(s.group_pad[0]) > 0  # padding did fill Class-1 chunks


def test_fixed_threshold_places_exactly_the_short_lifespans_hot():
    """``threshold`` (ghosts off): a user write is hot iff its lifespan (user writes since the
    block's previous write, the prefill included) is below it; counted here from the trace alone."""
    writes, times = _timed_zipf(2 * CAP, "heavy")
    for thr in (64, 4096):
        sim = _adapt_sim(ghost=False, demote=False, aggregate=False, threshold=thr)
        sim.prefill(int(times[0]))
        sim.feed(writes, times=times)
        last = np.arange(CAP, dtype=np.int64)  # the prefill wrote block b at time b
        hot = 0
        for n, lba in enumerate(writes):
            hot += CAP + n - last[lba] < thr
            last[lba] = CAP + n
        assert int(sim.state.group_user[0]) == hot > 0
        assert sim.result()["adapt_threshold"] == thr


def test_adapt_without_chunk_layer_runs_untimed():
    writes, _ = _timed_zipf(2 * CAP, "heavy")
    r = Simulator(make_policy("adapt"), SimConfig(segment_blocks=64, op_ratio=0.15, victim="greedy"), CAP).run(writes)
    assert r["waf"] > 1 and "padding_blocks" not in r and r["adapt_shadow_appends"] == 0


def test_bad_parameters_are_explained():
    with pytest.raises(ValueError, match="exactly 6 groups"):
        make_policy("adapt", 5)
    with pytest.raises(ValueError, match="unknown parameter"):
        make_policy("adapt", None, bogus=1)
    with pytest.raises(ValueError, match="policy adapt: base must be one of code, paper .*got 'papr'"):
        make_policy("adapt", None, base="papr")
    with pytest.raises(ValueError, match="gc_into_cold .* only with gc_aggregate: true"):
        make_policy("adapt", None, gc_into_cold=True)
    with pytest.raises(ValueError, match="fixed threshold would be moved by the ghost sets"):
        make_policy("adapt", None, threshold=512)
    with pytest.raises(ValueError, match="threshold must be a number of user writes >= 1 or null, got 0"):
        make_policy("adapt", None, ghost=False, threshold=0)
    with pytest.raises(ValueError, match="ghost_gc_groups .* ghost: false turns off"):
        make_policy("adapt", None, ghost=False, ghost_gc_groups=True)
    with pytest.raises(ValueError, match="demote_coldest / demote_hot .* demote: false turns off"):
        make_policy("adapt", None, demote=False, demote_coldest=True)


def test_report_tables_and_reductions(tmp_path):
    from dogi_ml.report_adapt import reductions, write_adapt

    def res(scheme, waf, pad, arrival="light"):
        return {
            "policy": scheme,
            "scheme": scheme,
            "victim": "greedy",
            "waf": waf,
            "user_writes": 100,
            "gc_writes": int((waf - 1) * 100) - pad,
            "padding_blocks": pad,
            "shadow_blocks": 0,
            "padding_traffic_ratio": pad / (waf * 100),
            "workload": "ycsb_a",
            "config": {"arrival": arrival},
            "workload_config": {"source": "generator", "params": {"zipf_theta": 0.9}},
        }

    results = [res("sepbit", 3.0, 50), res("adapt", 2.0, 20), res("sepgc", 4.0, 10)]
    summary = write_adapt(results, tmp_path / "fig11", "fig11", title="t")
    red = reductions(summary)["ycsb_a light a=0.9"]["greedy"]
    assert red["lowest"] == "adapt"
    assert red["vs"]["sepbit"]["waf"] == pytest.approx(-100 / 3)
    assert red["vs"]["sepbit"]["extra"] == pytest.approx(-50)
    assert red["vs"]["sepbit"]["padding"] == pytest.approx(-60)
    md = (tmp_path / "fig11.md").read_text()
    assert "| ycsb_a light a=0.9 | greedy | 4.000 | 3.000 | **2.000** | adapt |" in md
    assert "Paper (fig11)" in md and (tmp_path / "fig11.png").stat().st_size > 0
    # ADAPT rerun alone: the baselines' rows come from the earlier summary, ADAPT's from the rerun
    again = write_adapt([res("adapt", 1.5, 10)], tmp_path / "again", "fig11", reuse=summary)["ycsb_a light a=0.9"]
    assert set(again["greedy"]) == {"sepbit", "adapt", "sepgc"} and again["greedy"]["adapt"]["waf"] == 1.5
    assert again["greedy"]["sepbit"] == summary["ycsb_a light a=0.9"]["greedy"]["sepbit"]
    # a setting run alone joins the earlier ones, in light -> heavy order, and keeps them whole
    joined = write_adapt([res("adapt", 1.2, 5, arrival="heavy")], tmp_path / "joined", "fig11", reuse=summary)
    assert list(joined) == ["ycsb_a light a=0.9", "ycsb_a heavy a=0.9"]
    assert joined["ycsb_a light a=0.9"] == summary["ycsb_a light a=0.9"]
    assert set(joined["ycsb_a heavy a=0.9"]["greedy"]) == {"adapt"}
    # the extended ADAPT is ranked among the five baselines in a column of its own, without plain ADAPT
    from dogi_ml.report_adapt import ADAPT_EXT

    ext = write_adapt(results + [res(ADAPT_EXT, 2.5, 15)], tmp_path / "ext", "fig11")
    md = (tmp_path / "ext.md").read_text()
    assert f"| lowest | lowest of the six | lowest of the six (ADAPT = {ADAPT_EXT}) |" in md
    assert md.count("| **2.000** | 2.500 | adapt | adapt | adapt[+gcagg+gccold+ghostgc+dcold] |") == 1
    red_ext = reductions(ext, ADAPT_EXT)["ycsb_a light a=0.9"]["greedy"]
    assert red_ext["vs"]["sepbit"]["waf"] == pytest.approx(-50 / 3) and red_ext["vs"]["adapt"]["waf"] == 25
    assert json.loads((tmp_path / "ext.json").read_text())["reductions_ext"] == json.loads(
        json.dumps(reductions(ext, ADAPT_EXT))
    )
    # --reuse reads the earlier PREFIX.json's summary; another file is refused with what to pass
    from dogi_ml.report_adapt import _earlier_summary

    assert _earlier_summary(tmp_path / "fig11.json") == json.loads(json.dumps(summary))
    (tmp_path / "other.json").write_text('{"results": []}')
    for bad in ("other.json", "fig11.md", "missing.json"):
        with pytest.raises(SystemExit, match="pass (an|the) .*PREFIX.json"):
            _earlier_summary(tmp_path / bad)


ADAPT_REPORTS = sorted(p.stem for p in (REPO / "docs/results").glob("adapt_*.json"))


@pytest.mark.parametrize("name", ADAPT_REPORTS)
def test_docs_results_figures_and_tables_are_their_json(name):
    """Each docs/results/NAME.json report_adapt wrote has its NAME.md and NAME.png drawn from it:
    the markdown is the one the JSON gives (title from NAME.md, figure from the JSON's paper text),
    and the figure carries the digest of the JSON's summary (``python -m dogi_ml.report_adapt
    --redraw docs/results/NAME`` redraws both)."""
    from dogi_ml.report_adapt import figure_of, read_report, report_markdown, title_of

    stem = REPO / "docs/results" / name
    data = read_report(stem)
    figure = figure_of(data)
    assert figure is not None, f"{stem}.json's paper text is none of report_adapt.PAPER's"
    md = stem.with_suffix(".md")
    assert report_markdown(data["summary"], figure, title_of(md, figure)) == md.read_text()
    assert figure_source(stem.with_suffix(".png")) == data_digest(data["summary"]), f"redraw {stem}.png"


def test_report_redraw_draws_from_the_json_alone(tmp_path, capsys):
    """--redraw: PREFIX.md and PREFIX.png anew from PREFIX.json, the figure told by its paper text
    (or --figure) and the title kept from PREFIX.md; a missing JSON, one whose reductions are not
    its summary's and sweeps given beside --redraw are refused."""
    from dogi_ml.report_adapt import ADAPT_EXT, main, reductions, write_adapt

    def res(scheme, waf):
        return {"policy": scheme, "scheme": scheme, "victim": "greedy", "waf": waf, "user_writes": 100,
                "gc_writes": int((waf - 1) * 100), "workload": "zipf"}  # fmt: skip

    out = tmp_path / "t"
    write_adapt([res("sepbit", 3.0), res("adapt", 2.0)], out, "fig11")
    first = figure_source(out.with_suffix(".png"))
    data = json.loads(out.with_suffix(".json").read_text())
    assert first == data_digest(data["summary"])

    # ADAPT's WA changed in the JSON (and the reductions made anew), then redrawn
    data["summary"]["zipf"]["greedy"]["adapt"]["waf"] = 1.8
    data["reductions"] = json.loads(json.dumps(reductions(data["summary"])))
    data["reductions_ext"] = json.loads(json.dumps(reductions(data["summary"], ADAPT_EXT)))
    out.with_suffix(".json").write_text(json.dumps(data))
    main(["--redraw", str(out)])
    md = out.with_suffix(".md").read_text()
    assert md.startswith("# ADAPT fig11\n") and "| zipf | greedy | 3.000 | **1.800** | adapt | adapt |" in md
    assert "Paper (fig11)" in md
    assert figure_source(out.with_suffix(".png")) == data_digest(data["summary"]) != first

    # a paper text the report no longer has: the figure must be given
    out.with_suffix(".json").write_text(json.dumps({**data, "paper": "an older text"}))
    with pytest.raises(SystemExit, match="its figure is unknown; give --figure"):
        main(["--redraw", str(out)])
    main(["--redraw", str(out), "--figure", "fig11"])
    assert out.with_suffix(".md").read_text() == md

    data["summary"]["zipf"]["greedy"]["adapt"]["waf"] = 1.7  # the stored reductions are no longer the summary's
    out.with_suffix(".json").write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="reductions is not the one its summary gives"):
        main(["--redraw", str(out)])
    with pytest.raises(SystemExit, match="^error: --redraw .*: no .*missing.json to draw from"):
        main(["--redraw", str(tmp_path / "missing")])
    with pytest.raises(SystemExit):
        main(["--redraw", str(out), str(tmp_path)])
    assert "give no sweep directory" in capsys.readouterr().err


def test_sampling_rate_floors():
    pol = make_policy("adapt")
    assert pol.effective_rate(1 << 30, 512) == pytest.approx(max(0.001, 4096 / (1 << 30), 2 / 512))
    assert pol.effective_rate(CAP, 64) == pytest.approx(4096 / CAP)
    assert make_policy("adapt", None, rate=0.5).effective_rate(1 << 30, 512) == 0.5
    with pytest.raises(ValueError, match="demote_score"):
        make_policy("adapt", None, demote_score=5)
