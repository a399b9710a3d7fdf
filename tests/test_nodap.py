"""NoDaP oracle: ordering against the other schemes, its victim rule, the offline search."""

import json

import numba as nb
import pytest
from helpers import hotcold_writes, run_cli, zipf_writes

from dogi_ml.oracles.nodap import NoDaP, search
from dogi_ml.policies import make_policy
from dogi_ml.sim import SimConfig, SimulationError, Simulator
from dogi_ml.sim.state import P_NSEG, SEG_SEALED
from dogi_ml.sim.victims import register_victim

CAP, SEG = 8192, 64


def run(name, writes, **params):
    pol = make_policy(name, **params)
    sim = Simulator(
        pol,
        SimConfig(segment_blocks=SEG, debug_invariants=True, chunk_blocks=8192),
        CAP,
        stream=writes if pol.needs_future else None,
    )
    return sim, sim.run(writes)


@pytest.mark.parametrize("make", [lambda: zipf_writes(CAP, 8 * CAP, seed=11), lambda: hotcold_writes(CAP, 8 * CAP)])
def test_nodap_is_lowest(make):
    writes = make()
    res = search(writes, CAP, SimConfig(segment_blocks=SEG), max_groups=6, progress=False)
    waf = {p: run(p, writes)[1]["waf"] for p in ("nosep", "sepbit", "fk")}
    _, r = run("nodap", writes, bounds=res["bounds"], sizes=res["sizes"])
    assert r["waf"] == pytest.approx(res["waf"])
    assert r["waf"] < waf["fk"] and r["waf"] < waf["sepbit"] < waf["nosep"], (r["waf"], waf)


def test_search_grows_groups_until_gain_is_small():
    writes = zipf_writes(CAP, 8 * CAP, seed=11)
    res = search(writes, CAP, SimConfig(segment_blocks=SEG), max_groups=8, progress=False)
    hist = res["history"]
    wafs = [h["waf"] for h in hist]
    assert [h["n_groups"] for h in hist] == list(range(2, 2 + len(wafs)))
    # N grows until a group more gains < 5% (and the greedy chain has stopped) or at the cap
    assert len(wafs) == 7 or wafs[-1] > min(wafs[:-1]) * 0.95
    assert res["waf"] == min(wafs + [res["greedy"]["waf"]]) and len(res["bounds"]) == res["n_groups"] - 1
    for h in hist:  # each N's choice is at least as good as its own start and its shared pool
        assert h["waf"] <= h["shared_pool_waf"] and len(h["bounds"]) == h["n_groups"] - 1


def greedy_power_of_two(writes, cfg, max_groups, min_gain=0.05):
    """The earlier search: add the power-of-two bound that lowers WAF most until < 5% gain."""
    grid = [SEG * 2**k for k in range(20) if SEG * 2**k <= 4 * CAP]
    best, best_waf = [], float("inf")
    while len(best) + 1 < max_groups:
        w, b = min((waf_of(writes, cfg, sorted(best + [c])), sorted(best + [c])) for c in grid if c not in best)
        if best and w > best_waf * (1 - min_gain):
            best_waf = min(best_waf, w)
            break
        best, best_waf = b, w
    return best_waf


def waf_of(writes, cfg, bounds, sizes=None):
    return Simulator(NoDaP(bounds=bounds, sizes=sizes), cfg, CAP, stream=writes).run(writes)["waf"]


@pytest.mark.parametrize("make", [lambda: zipf_writes(CAP, 6 * CAP, seed=5), lambda: hotcold_writes(CAP, 6 * CAP)])
def test_search_beats_greedy_and_the_two_group_grid(make):
    writes = make()
    cfg = SimConfig(segment_blocks=SEG)
    res = search(writes, CAP, cfg, max_groups=5, progress=False)
    assert res["waf"] <= greedy_power_of_two(writes, cfg, 5) + 1e-12
    # N = 2 covers every single bound on a grid finer than powers of two (both pool modes)
    grid = sorted({int(SEG * 2 ** (k / 2)) for k in range(0, 19)})
    two = res["history"][0]
    assert two["n_groups"] == 2
    for b in grid:
        assert two["waf"] <= waf_of(writes, cfg, [b]) + 1e-12, b
    # a rerun of the chosen configuration reproduces the reported WAF
    assert waf_of(writes, cfg, res["bounds"], res["sizes"]) == pytest.approx(res["waf"], abs=1e-12)


def test_search_is_deterministic_and_shared_mode_uses_no_sizes():
    writes = hotcold_writes(CAP, 6 * CAP)
    cfg = SimConfig(segment_blocks=SEG)
    a = search(writes, CAP, cfg, max_groups=4, progress=False)
    b = search(writes, CAP, cfg, max_groups=4, progress=False)
    a.pop("seconds"), b.pop("seconds")
    assert a == b
    shared = search(writes, CAP, cfg, max_groups=4, group_sizes="shared", progress=False)
    assert shared["sizes"] is None and all(h["sizes"] is None for h in shared["history"])
    assert a["waf"] <= shared["waf"]  # the size search starts from the shared pool


def test_explored_prefix_is_verified_on_the_whole_trace():
    writes = zipf_writes(CAP, 8 * CAP, seed=11)
    cfg = SimConfig(segment_blocks=SEG)
    res = search(writes, CAP, cfg, max_groups=4, explore_fraction=0.5, progress=False)
    assert res["waf"] == pytest.approx(waf_of(writes, cfg, res["bounds"], res["sizes"]), abs=1e-12)
    assert res["waf"] == min([h["waf"] for h in res["history"]] + [res["greedy"]["waf"]])


def test_fixed_group_size_caps_the_group():
    writes = zipf_writes(CAP, 8 * CAP, seed=11)
    _, free = run("nodap", writes, bounds=[512, 4096, 16384])
    _, capped = run("nodap", writes, bounds=[512, 4096, 16384], sizes=[0, 6, 0])
    # the shared pool lets G2 grow to ~12 segments; capped, GC takes G2's segments once no segment
    # has expired (expired ones go first, and G2's relocated blocks return to it, so a soft cap)
    assert free["nodap_mean_segments"][1] > 11 and capped["nodap_sizes"] == [0, 6, 0]
    assert capped["nodap_mean_segments"][1] < free["nodap_mean_segments"][1] - 3
    assert capped["groups"][1]["reclaimed_segments"] > free["groups"][1]["reclaimed_segments"]


def test_bad_search_parameters():
    writes = zipf_writes(CAP, 2 * CAP, seed=1)
    cfg = SimConfig(segment_blocks=SEG)
    for kwargs, msg in [
        ({"max_groups": 1}, "max_groups must be >= 2"),
        ({"min_gain": 1.5}, "min_gain is a fraction"),
        ({"group_sizes": "fixed"}, "group_sizes must be 'search'"),
        ({"steps": [0.5, 1]}, "decreasing"),
        ({"max_evals_per_n": 0}, "max_evals_per_n must be >= 1"),
        ({"explore_fraction": 0}, "explore_fraction"),
        ({"candidates": [0, 64]}, "candidates must be positive"),
    ]:
        with pytest.raises(ValueError, match=msg):
            search(writes, CAP, cfg, progress=False, **kwargs)
    with pytest.raises(ValueError, match="LBAs must lie in"):
        search(writes, CAP // 2, cfg, progress=False)
    with pytest.raises(ValueError, match="params.sizes must be 2 segment counts"):
        make_policy("nodap", bounds=[100, 200], sizes=[4])


def test_expired_segments_are_taken_first():
    writes = zipf_writes(CAP, 8 * CAP, seed=11)
    sim, r = run("nodap", writes, bounds=[256, 1024, 4096])
    # short-BIR groups are reclaimed when expired, so their victims hold little valid data
    g0 = r["groups"][0]
    assert g0["reclaimed_segments"] > 0 and g0["victim_valid_ratio"] < 0.2


def test_bad_bounds():
    with pytest.raises(ValueError, match="needs params.bounds"):
        make_policy("nodap")
    with pytest.raises(ValueError, match="increasing"):
        make_policy("nodap", bounds=[100, 50])
    with pytest.raises(ValueError, match="make 3 groups"):
        make_policy("nodap", 5, bounds=[100, 200])


@nb.njit(cache=True)
def most_valid(s, p, now):
    best, most = -1, -1
    for seg in range(s.prm[P_NSEG]):
        if s.seg_state[seg] == SEG_SEALED and s.seg_valid[seg] > most:
            best, most = seg, s.seg_valid[seg]
    return best


register_victim("most_valid_for_test", most_valid)


def test_engine_stops_a_gc_that_makes_no_progress():
    writes = zipf_writes(CAP, 4 * CAP, seed=2)
    pol = make_policy("nosep")
    pol.victim_rules = ("most_valid_for_test",)  # a test-only selector: no scheme accepts it by default
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, victim="most_valid_for_test"), CAP)
    with pytest.raises(SimulationError, match="garbage collection made no progress"):
        sim.run(writes)


def test_search_knobs_with_explicit_bounds_are_refused_not_ignored():
    """policy.params.max_groups / min_gain steer only the offline search: set beside explicit
    bounds they used to be dropped without a word."""
    from dogi_ml.errors import ConfigError
    from dogi_ml.pipeline.simulate import check_nodap_search_knobs

    check_nodap_search_knobs({"bounds": "search", "max_groups": 4, "min_gain": 0.01})
    check_nodap_search_knobs({"bounds": [8192], "max_groups": None, "min_gain": None})
    with pytest.raises(ConfigError) as err:
        check_nodap_search_knobs({"bounds": [8192, 65536], "max_groups": 4, "min_gain": None})
    assert str(err.value) == (
        "policy.params.max_groups=4 steers NoDaP's offline search, which explicit policy.params.bounds "
        "skip -- drop policy.params.max_groups (or set policy.params.bounds=search)"
    )


def test_nodap_command_refuses_a_search_knob_beside_explicit_bounds(tmp_path):
    args = ["simulate", "+workload=zipf", "workload.capacity_blocks=16384", "policy=nodap",
            "policy.params.bounds=[2048]", "policy.n_groups=2", "policy.params.min_gain=0.1",
            "plot=false", "mlflow=false"]  # fmt: skip
    res = run_cli(args, tmp_path, check=False)
    assert res.returncode == 2, res.stderr
    assert "policy.params.min_gain=0.1 steers NoDaP's offline search" in res.stderr


def test_a_stopped_search_resumes_from_its_journal(tmp_path):
    """search(journal=FILE) writes every simulation's result as it is made; run again it reads
    them back and takes the same path to the same result without simulating them again; a journal
    cut short (a stop in the middle of a line) resumes from its last whole line; a journal of
    another trace is refused, naming the file."""
    writes = hotcold_writes(CAP, 6 * CAP)
    cfg = SimConfig(segment_blocks=SEG)
    journal = tmp_path / "nodap" / "search.jsonl"
    plain = search(writes, CAP, cfg, max_groups=4, progress=False)
    first = search(writes, CAP, cfg, max_groups=4, progress=False, journal=journal)
    lines = journal.read_text().splitlines()
    # one line per simulation: a setting stopped early and later needed exactly has two
    settings = {(tuple(r["bounds"]), str(r["sizes"]), r["n"]) for r in map(json.loads, lines[1:])}
    assert len(settings) == first["simulations"] and first["simulations_read_back"] == 0
    assert sum('"pruned": true' in line for line in lines) >= first["simulations_pruned"] > 0
    again = search(writes, CAP, cfg, max_groups=4, progress=False, journal=journal)
    assert again["simulations"] == first["simulations"] == again["simulations_read_back"]
    # stopped after 10 simulations, the 11th line half written
    journal.write_text("\n".join(lines[:11]) + "\n" + lines[11][: len(lines[11]) // 2])
    resumed = search(writes, CAP, cfg, max_groups=4, progress=False, journal=journal)
    assert resumed["simulations_read_back"] == 10
    for r in (first, again, resumed):
        for k in ("bounds", "sizes", "waf", "n_groups", "history", "greedy", "simulations", "simulations_pruned"):
            assert r[k] == plain[k], k
    other = hotcold_writes(CAP, 6 * CAP, seed=9)
    with pytest.raises(ValueError, match=r"the journal .*search.jsonl belongs to another trace, setting or code"):
        search(other, CAP, cfg, max_groups=4, progress=False, journal=journal)


def test_pruned_simulations_leave_the_search_unchanged(monkeypatch):
    """A search's simulation stops once its GC writes so far make a WAF above the one it must beat
    (oracles.nodap.PRUNE_SLICES slices); the search takes the same path to the same result as with
    every simulation run to the end (one slice: no stop possible), and says how many it stopped."""
    import dogi_ml.oracles.nodap as nodap

    writes = zipf_writes(CAP, 8 * CAP, seed=11)
    cfg = SimConfig(segment_blocks=SEG)
    pruned = search(writes, CAP, cfg, max_groups=6, progress=False)
    monkeypatch.setattr(nodap, "PRUNE_SLICES", 1)
    whole = search(writes, CAP, cfg, max_groups=6, progress=False)
    for k in ("bounds", "sizes", "waf", "n_groups", "history", "greedy", "simulations"):
        assert pruned[k] == whole[k], k
    assert whole["simulations_pruned"] == 0 < pruned["simulations_pruned"] < pruned["simulations"]


def test_a_stopped_simulation_is_a_lower_bound_and_runs_again_when_needed():
    """ev(..., above=x) of a setting worse than x returns a WAF > x that is at most its real one;
    asked again without a bar (or with one above that figure) it runs to the end, and then gives
    exactly what one uninterrupted Simulator.run gives: feeding in slices changes nothing."""
    from dogi_ml.oracles.nodap import _Evaluator

    writes = zipf_writes(CAP, 8 * CAP, seed=11)
    cfg = SimConfig(segment_blocks=SEG)
    ev = _Evaluator(writes, CAP, cfg, None)
    bounds, sizes = [4096], [2]  # G1 capped far below its need: it copies many times its writes
    _, exact = run("nodap", writes, bounds=bounds, sizes=sizes)
    stopped = ev(bounds, sizes, above=1.5)
    assert stopped["pruned"] and 1.5 < stopped["waf"] <= exact["waf"]
    assert ev(bounds, sizes, above=stopped["waf"] + 100) == {
        "waf": exact["waf"],
        "mean_segments": exact["nodap_mean_segments"],
    }
    assert ev.runs == 2 and ev.evaluated == 1


def test_the_journal_fingerprint_covers_the_simulation_code_only():
    """A NoDaP search's journal is keyed by the sources its simulations run (the engine, the
    kernels and their loop template, NoDaP, the annotation), not by every project file: editing a
    report or another policy keeps a long search resumable."""
    from dogi_ml.oracles.nodap import simulation_code_version
    from dogi_ml.sim.checkpoint import _PACKAGE_ROOT, import_closure

    files = {str(p.relative_to(_PACKAGE_ROOT)) for p in import_closure("dogi_ml.oracles.nodap")}
    for needed in ("dogi_ml/sim/engine.py", "dogi_ml/sim/kernels.py", "dogi_ml/sim/state.py",
                   "dogi_ml/sim/victims.py", "dogi_ml/sim/policy_api.py", "dogi_ml/intrinsics.py",
                   "oracles/nodap.py", "oracles/annotate.py"):  # fmt: skip
        assert needed in files, needed
    assert not any(f.startswith(("dogi_ml/pipeline", "dogi_ml/policies", "dogi_ml/report", "export/")) for f in files)
    assert len(simulation_code_version()) == 16
