"""policy=hybrid_frozen (issue 40's deployment): a hybrid run's int8 MLP and final tables in a
bundle (replay mode=bundle policy=hybrid policy.params.deployed=int8), placed in the simulator
and, decision for decision, by the ZNS harness's C (dogi_ml/zns/hybrid_place.h)."""

from __future__ import annotations

import json
import re
import shutil

import naive
import numpy as np
import pytest
from helpers import FROZEN_CAP, FROZEN_EXPORT_SIM, FROZEN_HYBRID_PARAMS, export_keeping_policy, frozen_test_trace

from dogi_ml.errors import ConfigError
from dogi_ml.export.integer import ExportError
from dogi_ml.pipeline.replay import PARITY_KEYS, export_dogi_bundle, learned_headers, replay, trace_file
from dogi_ml.pipeline.simulate import simulate
from dogi_ml.policies import make_policy
from dogi_ml.policies._dogi_bundle import BundleError, check_deploy, load_bundle
from dogi_ml.traces.generators import generate
from dogi_ml.zns import harness as zh

CAP = FROZEN_CAP
#: the hybrid keeps 18 group slots open (DOGI's layout): 32-block segments; the frozen scheme
#: needs K + 2 <= 12 and runs the harness's 64-block zones too
EXPORT_SIM = FROZEN_EXPORT_SIM
SIM64 = {**EXPORT_SIM, "segment_blocks": 64}
PARAMS = FROZEN_HYBRID_PARAMS

# the harness is C: without a compiler every test here skips (fails under CI=true)
pytestmark = pytest.mark.usefixtures("c_compiler")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return frozen_test_trace(tmp_path_factory.mktemp("trace"))


@pytest.fixture(scope="module")
def exported(trace, tmp_path_factory):
    """(bundle directory, the command's result, the hybrid policy after its run): the bundle of a
    hybrid run (score=argmax) through replay's mode=bundle path."""
    out, r, policy = export_keeping_policy(trace, PARAMS, tmp_path_factory.mktemp("bundle") / "hybrid")
    assert r["scheme"] == "hybrid" and r["mode"] == "ml" and r["retrains"] == 5
    return out, r, policy


def _frozen(bundle) -> dict:
    return {"name": "hybrid_frozen", "n_groups": None, "params": {"bundle": str(bundle)}}


def test_bundle_holds_integer_tables(exported):
    """The bundle's configuration: the planner's K groups folded onto the classes, increasing
    integer bounds, a relocation table that uses the estimates, and a deploy.h without floating
    point (the placement is integer-only)."""
    bundle, r, policy = exported
    b = load_bundle(bundle, "hybrid")
    d = b.deploy
    assert d["class_groups_from"] == "opmodel" and d["n_intermediate"] == r["configuration"]["groups"] == 8
    assert d["group_hi"][1:8] == r["configuration"]["bounds"][:-1] and d["mu"] == r["mu"] == 31
    dest = np.asarray(d["reloc_dest"])
    assert dest.shape == (10, len(d["age_grid"])) and (dest > 0).any() and (dest == -1).any()
    header = (bundle / "deploy.h").read_text()
    assert "#define DL_HYBRID 1" in header and '#define HL_RULE "cost_benefit"' in header
    assert not re.search(r"\d\.\d|\bdouble\b|\bfloat\b|\d[eE][-+]?\d", header)
    assert "float" not in (bundle / "dogi_model.h").read_text().replace("floating", "")


def test_relocation_table_is_the_hybrids_rule():
    """Table lookup then the floor (hybrid_frozen_gc) against the hybrid's own loop (hybrid_gc:
    the first group at or above the source, up to G(K-1), whose bound covers the remaining
    lifetime, else GK) on every cell, source group and estimate, unknown (-1) included."""
    from dogi_ml.policies.hybrid_frozen import relocation_table

    rng = np.random.default_rng(0)
    k = 6
    hi = np.array([31, 31, 64, 200, 900, 5000, 1 << 58, 1 << 58], np.int64)  # G_hot, G1..G6, G_frzn
    rem = rng.integers(-1, 8000, size=(10, 40))
    rem[0, :5] = [-1, 0, 31, 32, 5000]
    dest = relocation_table(rem, hi, k)
    for (c, j), r in np.ndenumerate(rem):
        for vg in range(0, k + 2):
            lo = vg if 1 <= vg <= k else 1
            want = next((g for g in range(lo, k) if r <= hi[g]), k)
            got = dest[c, j]
            if r < 0:
                assert got == -1
                continue
            if 1 <= vg <= k and got < vg:
                got = vg
            assert got == want, (c, j, vg, r)


def test_frozen_places_as_the_hybrid_decides(trace, exported):
    """On every write of the export trace, the bundle's group (its class -> group table of the int8
    class) equals the float hybrid's (its final plan's bucket -> group map of its score=argmax
    lifetime) wherever the int8 and the float argmax classes agree; they agree on > 99%."""
    from dogi_ml.features.extract import FEATURES, FeatureConfig, extract_features

    bundle, _, policy = exported
    b = load_bundle(bundle, "hybrid")
    cols = [FEATURES.index(f) for f in b.deploy["features"]]
    X = extract_features(trace, FeatureConfig(capacity_blocks=CAP))[:, cols]
    proba = policy.model.predict_proba(X)
    float_group = policy.state.bucket2group[policy._buckets_of(proba)]
    int8_class = b.qmodel.predict(X)
    same = int8_class == proba.argmax(axis=1)
    bundle_group = np.asarray(b.deploy["cat2group"])[int8_class]
    assert np.array_equal(bundle_group[same], float_group[same])
    assert same.mean() > 0.99 and len(np.unique(bundle_group)) >= 4
    src = json.loads((bundle / "manifest.json").read_text())["source"]
    assert src["class_agreement"] == pytest.approx(same.mean())
    assert src["group_agreement"] == pytest.approx(np.mean(bundle_group == float_group))


def test_frozen_against_the_hybrid_run_that_exported_it(trace, exported):
    """The same trace, the same geometry: the hybrid learned online (its plan from the third
    retraining) 2.4552; the frozen bundle places with the final plan from the first write and
    copies fewer blocks (golden: 33138 GC writes, WAF 2.3484)."""
    _, r, _ = exported
    fr = simulate(trace, _frozen(exported[0]), EXPORT_SIM, progress=False)
    assert r["waf"] == pytest.approx(2.4552001953125, abs=1e-12)
    assert fr["gc_writes"] == 33138 and fr["user_writes"] == 6 * CAP
    assert fr["waf"] == pytest.approx(2.348388671875, abs=1e-12)
    learned = fr["learned"]
    assert learned["hot_writes"] + sum(learned["class_writes"]) == 6 * CAP
    assert learned["table_gc_writes"] > 0 and learned["frozen_gc_writes"] > 0 and learned["expired_victims"] > 0


def test_harness_counts_equal_the_simulator(trace, exported, tmp_path):
    """The C harness (features, the exported MLP, the class -> group table, the relocation table,
    the Frozen Filter, expiry-first victims with the cost-benefit rule) and the Numba simulator's
    hybrid_frozen on 64-block zones: the same user, GC, reset and placement counts; every block
    reads back."""
    # durability=none: no device flushes (tests/test_zns.py covers durability); the placement is the point here
    zns = {"verify": True, "compare_sim": True, "progress_every": 0, "durability": "none"}
    dev = "file:" + str(tmp_path / "dev.zns")
    r = replay(trace, _frozen(exported[0]), SIM64, dev, zns, progress=False, cache_dir=tmp_path)
    assert r["parity"]["ok"], r["parity"]
    for k in (*PARITY_KEYS, "learned"):
        assert r[k] == r["simulator"][k]
    assert r["policy"] == "hybrid_frozen" and r["victim"] == "hybrid"
    assert r["gc_writes"] == 48877 and r["zone_resets"] == r["reclaimed_segments"] > 0
    learned = r["learned"]
    assert learned["table_gc_writes"] > 0 and learned["frozen_gc_writes"] > 0 and learned["expired_victims"] > 0
    assert r["verify"]["ok"] and r["verify"]["lost"] == r["verify"]["corrupt"] == 0


def test_bad_bundles_are_refused(trace, exported, tmp_path):
    """Another capacity (simulator and harness), another scheme, a missing one, an altered one,
    incomplete or inconsistent tables, and a hybrid run with nothing to deploy: one-line errors
    naming the fix."""
    bundle = exported[0]
    with pytest.raises(BundleError, match="exported for a capacity of 4096 blocks.*this run has 8192; export a bundle"):
        simulate(trace, _frozen(bundle), {**SIM64, "capacity_blocks": 2 * CAP}, progress=False)
    exe = zh.build(learned=learned_headers(_frozen(bundle)))
    path = trace_file(trace, tmp_path)
    nseg = zh.segment_count(2 * CAP, 0.25, 64)
    args = zh.harness_args(path, f"file:{tmp_path / 'd.zns'}", capacity=2 * CAP, policy="hybrid_frozen", op_ratio=0.25)
    with pytest.raises(zh.HarnessError, match="exported for a capacity of 4096 blocks.*this replay has 8192"):
        zh.run(args + [f"--create={nseg},128,64,14,14"], exe)
    # a harness built with the hybrid's bundle refuses DOGI's frozen scheme, and the policies the other's bundle
    args = zh.harness_args(path, f"file:{tmp_path / 'e.zns'}", capacity=CAP, policy="dogi_frozen", op_ratio=0.25)
    with pytest.raises(zh.HarnessError, match="built with a hybrid bundle .* policy=dogi_frozen policy.params.bundle"):
        zh.run(args + [f"--create={zh.segment_count(CAP, 0.25, 64)},128,64,14,14"], exe)
    with pytest.raises(BundleError, match="a hybrid bundle, not a dogi one: .*write one with: .*policy=dogi "):
        make_policy("dogi_frozen", bundle=str(bundle))
    with pytest.raises(
        BundleError, match=r"hybrid bundle not found: .*policy=hybrid \+\+policy.params.deployed=int8 bundle=DIR\)$"
    ):
        make_policy("hybrid_frozen", bundle=str(tmp_path / "none"))
    with pytest.raises(ConfigError, match="policy=hybrid_frozen needs its deployment bundle"):
        learned_headers({"name": "hybrid_frozen", "params": {}})
    bad = tmp_path / "bad"
    shutil.copytree(bundle, bad)
    with open(bad / "deploy.h", "a") as fh:
        fh.write("/* edited */\n")
    with pytest.raises(ExportError, match="corrupted artefact: .*deploy.h"):
        make_policy("hybrid_frozen", bundle=str(bad))
    d = json.loads((bundle / "deploy.json").read_text())
    cases = (
        ({k: v for k, v in d.items() if k != "reloc_dest"}, "lacks reloc_dest .*re-export it"),
        ({**d, "reloc_dest": d["reloc_dest"][:9]}, "reloc_dest needs 10 rows"),
        (
            {**d, "group_hi": [31, 64, 31, 128, 256, 2048, 4096, 16384, None, None]},
            "group_hi of G1..G7 must be increasing",
        ),
        ({**d, "victim_rule": "lru"}, "victim_rule 'lru' is not one of"),
        ({**d, "scheme": "x"}, "scheme 'x' is not one of dogi, hybrid"),
    )
    for bad_d, match in cases:
        with pytest.raises(BundleError, match=match):
            check_deploy(bad_d)
    # mode=bundle: a hybrid without deployed=int8, and one without a model to deploy
    with pytest.raises(ConfigError, match="exports the deployed int8 model .* policy.params.deployed=int8"):
        export_dogi_bundle(trace, {"name": "hybrid", "params": {}}, EXPORT_SIM, tmp_path / "b")
    oracle = {"name": "hybrid", "params": {"deployed": "int8", "lifetimes": "oracle", "retrain_every": 4096}}
    with pytest.raises(BundleError, match="lifetimes=oracle trains none; run lifetimes=select .* or lifetimes=model$"):
        export_dogi_bundle(trace, oracle, EXPORT_SIM, tmp_path / "b")


# -- the count bundle: a lifetimes=select run whose last plan placed by the write counts ------------

SELECT = {**PARAMS, "lifetimes": "select", "hot_filter": "auto"}


@pytest.fixture(scope="module")
def count_export(trace, tmp_path_factory):
    """(bundle directory, the command's result, the select hybrid after its run)."""
    return export_keeping_policy(trace, SELECT, tmp_path_factory.mktemp("bundle") / "counts")


def test_count_arithmetic_against_closed_forms():
    """count_decay is 2^(-dt/half) to within the tables' rounding (exact at whole half-lives);
    the decayed writes so far, total_inf - decay(total_inf, t), are the geometric sum
    (1 - 2^(-t/H)) / (1 - 2^(-1/H)) (1% at the first write, 0.1% from the hundredth: the sum is a
    difference of two large numbers); bucket_highs puts every lifetime in lifetime_bucket's bucket."""
    from dogi_ml.policies.hybrid import lifetime_bucket
    from dogi_ml.policies.hybrid_frozen import (
        COUNT_ONE,
        bucket_highs,
        count_decay,
        count_pow_table,
        count_total_inf,
    )

    pow_table = np.asarray(count_pow_table(), np.int64)
    assert pow_table[0] == pow_table[256] == COUNT_ONE and (np.diff(pow_table[:256]) < 0).all()
    assert (np.diff(pow_table[256:]) <= 0).all() and pow_table[511] >= pow_table[1]
    half, x = 2048, 1000 * COUNT_ONE
    for dt in (0, 1, 7, 1000, 2047, 2048, 3 * 2048, 5000, 40000, 48 * 2048):
        got = int(count_decay(np.int64(x), np.int64(dt), np.int64(half), pow_table))
        assert got == naive.count_decay(x, dt, half, list(pow_table))
        want = x * 2.0 ** (-dt / half)
        assert got == pytest.approx(want, rel=2e-5, abs=2), dt  # (each shift and product rounds down)
        if dt % half == 0:
            assert got == x >> (dt // half)
    assert int(count_decay(np.int64(x), np.int64(10**9), np.int64(0), pow_table)) == x  # no half-life: no decay
    total_inf = count_total_inf(half)
    for t in (1, 100, 2048, 10000, 10**6):
        total = total_inf - int(count_decay(np.int64(total_inf), np.int64(t), np.int64(half), pow_table))
        want = COUNT_ONE * -np.expm1(-t * np.log(2) / half) / -np.expm1(-np.log(2) / half)
        assert total == pytest.approx(want, rel=1e-2 if t == 1 else 1e-3), t
    highs = np.asarray(bucket_highs(), np.int64)
    t = np.unique(np.concatenate([np.arange(1, 200000), 2 ** np.arange(1, 40), 2 ** np.arange(1, 40) + 1]))
    np.testing.assert_array_equal(np.searchsorted(highs, t, side="left"), lifetime_bucket(t))


def test_count_bundle_places_by_the_integer_counts(trace, count_export):
    """A select/auto hybrid whose last plan chose the counts (no half-life) exports a count
    bundle: the plan's bucket -> group map, no Frozen Filter, no floor, integer tables only. The
    integer counts give the float counts' group on every write of the trace; the frozen run
    places by them (golden: 23324 GC writes, WAF 1.9491 against the online run's 2.1357), and its
    final counts are a plain-Python replay of the trace's writes."""
    from dogi_ml.pipeline.simulate import build_simulator
    from dogi_ml.policies.hybrid_frozen import COUNT_ONE

    bundle, r, policy = count_export
    assert policy.plan.source == "frequency" and r["waf"] == pytest.approx(2.1357421875, abs=1e-12)
    d = load_bundle(bundle, "hybrid").deploy
    assert d["lifetimes"] == "counts" and d["count_halflife_blocks"] is None and d["count_total_inf"] is None
    assert d["frozen_filter"] == d["reloc_floor"] == 0 and d["relocation"] == "predicted"
    assert d["bucket2group"] == [int(g) for g in policy.state.bucket2group]
    assert (np.asarray(d["reloc_dest"]) == -1).all()
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["source"]["count_group_agreement"] == 1.0 and "group_agreement" not in manifest["source"]
    header = (bundle / "deploy.h").read_text()
    assert not re.search(r"\d\.\d|\bdouble\b|\bfloat\b|\d[eE][-+]?\d", header)
    sim, writes = build_simulator(trace, _frozen(bundle), EXPORT_SIM)
    sim.prefill()
    sim.feed(writes)
    fr = sim.result()
    assert fr["gc_writes"] == 23324 and fr["waf"] == pytest.approx(1.9490559895833333, abs=1e-12)
    learned = fr["learned"]
    assert learned["frozen_gc_writes"] == 0 and learned["table_gc_writes"] > 0 and learned["expired_victims"] > 0
    assert learned["hot_writes"] + sum(learned["class_writes"]) == 6 * CAP
    # the final counts: each LBA's number of trace writes (no half-life), at its last write's time
    p = sim.policy.state
    prefill = sim.policy.prefill
    raw = np.asarray(trace.block_writes, np.int64)
    last = {int(a): i for i, a in enumerate(raw)}
    counts = {}
    for a in raw:
        counts[int(a)] = counts.get(int(a), 0) + COUNT_ONE
    by_time = dict(zip(p.count_at.tolist(), p.count.tolist()))
    assert len(by_time) == len(last) + (0 in by_time and all(t != prefill for t in last.values()))
    for a, i in last.items():
        assert by_time[prefill + i] == counts[a]


def test_count_bundle_with_a_half_life_tracks_the_float_counts(trace, tmp_path):
    """With the half-life of 0.5 capacities as the only count source: the bundle's half-life is
    2048 writes, its integer groups equal the float counts' on >= 99.9% of the trace's writes,
    and its final counts are a plain-Python replay with the same integer decay."""
    from dogi_ml.pipeline.simulate import build_simulator
    from dogi_ml.policies.hybrid_frozen import COUNT_ONE

    params = {**SELECT, "select_halflives": [0.5]}
    r = export_dogi_bundle(trace, {"name": "hybrid", "params": params}, EXPORT_SIM, tmp_path / "b")
    d = load_bundle(tmp_path / "b", "hybrid").deploy
    assert d["lifetimes"] == "counts" and d["count_halflife_blocks"] == CAP // 2, r
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["source"]["count_group_agreement"] >= 0.999
    sim, writes = build_simulator(trace, _frozen(tmp_path / "b"), EXPORT_SIM)
    sim.prefill()
    sim.feed(writes)
    p, prefill, half, pw = sim.policy.state, sim.policy.prefill, CAP // 2, d["count_pow"]
    count, at = {}, {}
    for i, a in enumerate(np.asarray(trace.block_writes, np.int64).tolist()):
        count[a] = naive.count_decay(count.get(a, 0), i - at.get(a, -prefill), half, pw) + COUNT_ONE
        at[a] = i
    by_time = dict(zip(p.count_at.tolist(), p.count.tolist()))
    for a, i in at.items():
        assert by_time[prefill + i] == count[a]


def test_count_bundles_refused_where_they_cannot_deploy(trace, tmp_path):
    """lifetimes=frequency trains no model for the bundle to hold; a count source with
    relocation=censored has no integer form: one-line errors naming the fix."""
    freq = {"name": "hybrid", "params": {**PARAMS, "lifetimes": "frequency"}}
    with pytest.raises(BundleError, match="lifetimes=frequency trains none; run lifetimes=select"):
        export_dogi_bundle(trace, freq, EXPORT_SIM, tmp_path / "f")
    censored = {"name": "hybrid", "params": {**SELECT, "relocation": "censored"}}
    with pytest.raises(BundleError, match="relocation=censored has no integer form; run relocation=predicted or age"):
        export_dogi_bundle(trace, censored, EXPORT_SIM, tmp_path / "c")


# -- the bundles of one seed deployed on another (python -m dogi_ml.pipeline.frozen_seeds) --------------

#: the tiny scale of the out-of-sample test: the trace fixture's geometry, through the commands' configs
SEEDS_OVERRIDES = [
    "workload.capacity_blocks=4096",
    "workload.write_volume=6",
    "sim.segment_blocks=32",
    "sim.op_ratio=0.25",
]
SEEDS_HYBRID = [f"++policy.params.{k}={v}" for k, v in PARAMS.items() if k not in ("deployed", "model_params")]
SEEDS_HYBRID.append("++policy.params.model_params={epochs:4,patience:2}")


def test_frozen_seeds_deploys_one_seeds_bundle_on_another(tmp_path):
    """The hybrid's bundle of seed 0 placed on seed 1's trace (and on seed 0's):
    each deployed run equals ``simulate`` of ``hybrid_frozen`` with that bundle on that seed's
    generated trace, and the zipf control moves seed 1's ranks to seed 0's addresses."""
    from dogi_ml.pipeline.frozen_seeds import frozen_seeds, write_frozen_seeds, zipf_rank_map
    from dogi_ml.traces.generators import ZipfSampler

    table = frozen_seeds(
        ["zipf"], tmp_path / "runs", overrides=SEEDS_OVERRIDES, scheme_overrides={"hybrid": SEEDS_HYBRID},
        online=(), frozen=("hybrid_frozen",), log=lambda *a: None,
    )  # fmt: skip
    row = table["workloads"]["zipf"]
    bundle = row["bundles"]["hybrid_frozen"]
    assert bundle["seed"] == 0 and bundle["path"] == str(tmp_path / "runs" / "bundles" / "zipf" / "hybrid")
    sim = {**EXPORT_SIM, "victim": "cost_benefit", "victim_for": "followers"}
    for seed, key in ((1, "out_of_sample"), (0, "in_sample")):
        t = generate("zipf", capacity_blocks=CAP, n_writes=6 * CAP, seed=seed, theta=1.0)
        t.meta["capacity_blocks"] = CAP
        direct = simulate(t, _frozen(bundle["path"]), sim, progress=False)
        got = row["deployed"]["hybrid_frozen"][key]
        assert (got["waf"], got["gc_writes"]) == (direct["waf"], direct["gc_writes"]), key
        kept = json.loads((tmp_path / "runs" / "zipf" / f"hybrid_frozen_seed{seed}.json").read_text())
        assert kept["workload_seed"] == seed and kept["bundle"] == bundle["path"]
    a, b = row["deployed"]["hybrid_frozen"]["out_of_sample"], row["deployed"]["hybrid_frozen"]["in_sample"]
    assert a["gc_writes"] != b["gc_writes"]  # two different traces
    # seed 1's rank r goes where seed 0 puts rank r: seed 0's hot set again, with seed 1's draws
    m = zipf_rank_map(1, 0, CAP, 1.0)
    np.testing.assert_array_equal(m[ZipfSampler(CAP, 1.0, 1).perm], ZipfSampler(CAP, 1.0, 0).perm)
    assert "out_of_sample_learned_hot_set" in row["deployed"]["hybrid_frozen"]
    hot = row["hot_set"]
    assert hot["hot_sets_shared"] < 0.2 < hot["learn_hot_share_of_learn_writes"]  # the seed moves zipf's hot set
    files = write_frozen_seeds(tmp_path / "out", table)
    assert "| zipf | hybrid_frozen | " in files[1].read_text()


def test_frozen_seeds_refuses_nonsense(tmp_path):
    """One-line errors naming the fix: the same seed twice, a workload that is not generated, an
    unknown workload or frozen scheme; the command exits 2 with one ``error:`` line."""
    import subprocess
    import sys

    from dogi_ml.pipeline.frozen_seeds import frozen_seeds

    cases = (
        ({"workloads": ["zipf"], "learn_seed": 1, "deploy_seed": 1}, "both 1: .* -- give two different seeds"),
        ({"workloads": ["file"]}, "workload 'file' is a trace file, which has no seed to change -- name generated"),
        ({"workloads": ["zipff"]}, "unknown workload 'zipff' -- use one of: .*zipf"),
        ({"workloads": []}, "no workload named"),
        ({"workloads": ["zipf"], "frozen": ("hybrid",)}, "'hybrid' is not a frozen scheme -- use hybrid_frozen or"),
    )
    for kw, match in cases:
        with pytest.raises(ConfigError, match=match):
            frozen_seeds(runs_dir=tmp_path, **kw)
    assert not any(tmp_path.iterdir())  # refused before any run
    cmd = [
        sys.executable,
        "-m",
        "dogi_ml.pipeline.frozen_seeds",
        str(tmp_path / "t"),
        "zipf",
        "--deploy-seed",
        "0",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("error: --learn-seed and"), p.stderr
    bad = subprocess.run([*cmd[:5], "--scheme-set", "++policy.params.lifetimes"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith(
        "error: --scheme-set '++policy.params.lifetimes' names no policy and override -- write"
    )
