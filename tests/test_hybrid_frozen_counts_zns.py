"""A hybrid count bundle (deploy.json ``lifetimes: counts``, written from a hybrid run with
``lifetimes=select`` whose last plan chose a count source) in the ZNS harness's C (dogi_ml/zns/hybrid_place.h, dl_user's count hooks
in dogi_place.h): the per-LBA decayed write counts in Q16 integers place the non-hot user writes and
relocate the survivors, decision for decision as the simulator's hybrid_frozen."""

from __future__ import annotations

import json

import pytest
from helpers import FROZEN_CAP, FROZEN_EXPORT_SIM, FROZEN_HYBRID_PARAMS, frozen_test_trace

from dogi_ml.pipeline.replay import PARITY_KEYS, export_dogi_bundle, replay
from dogi_ml.policies._dogi_bundle import BundleError, check_deploy, deploy_header, load_bundle

# the harness is C: without a compiler every test here skips (fails under CI=true)
pytestmark = pytest.mark.usefixtures("c_compiler")

# tests/test_hybrid_frozen.py's scale (tests/helpers.py): 4K blocks written 6 times, exported on
# 32-block segments, deployed on the harness's 64-block zones
CAP = FROZEN_CAP
EXPORT_SIM = FROZEN_EXPORT_SIM
SIM64 = {**EXPORT_SIM, "segment_blocks": 64}
#: the hybrid choosing its lifetimes' source per plan (the model or the write counts): on this
#: trace its last plan places by the counts
SELECT_PARAMS = {**FROZEN_HYBRID_PARAMS, "lifetimes": "select"}
#: the count sources the select runs weigh: counts halved every half capacity of user writes (2048
#: blocks), and (the default's first) counts that never decay
HALFLIVES = {"decay": [0.5], "no_decay": [None]}


def _frozen(bundle) -> dict:
    return {"name": "hybrid_frozen", "n_groups": None, "params": {"bundle": str(bundle)}}


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return frozen_test_trace(tmp_path_factory.mktemp("trace"))


@pytest.fixture(scope="module")
def bundles(trace, tmp_path_factory):
    """``bundles(key)``: the count bundle of a lifetimes=select hybrid run with the count source
    ``HALFLIVES[key]``, through replay's mode=bundle path (each exported once)."""
    made = {}

    def get(key):
        if key not in made:
            out = tmp_path_factory.mktemp("bundle") / key
            params = {**SELECT_PARAMS, "select_halflives": HALFLIVES[key]}
            r = export_dogi_bundle(trace, {"name": "hybrid", "params": params}, EXPORT_SIM, out)
            assert r["scheme"] == "hybrid" and r["mode"] == "ml"
            made[key] = out
        return made[key]

    return get


@pytest.fixture(scope="module")
def counts_bundle(bundles):
    return bundles("decay")


def test_counts_header_holds_the_tables(counts_bundle, bundles):
    """deploy.h of a count bundle: HL_COUNTS, the decay constants, the Q16 power table (1.0 first),
    the buckets' bounds and groups; the same configuration as a model bundle emits HL_COUNTS 0 and
    otherwise the same lines."""
    d = load_bundle(counts_bundle, "hybrid").deploy
    assert d["lifetimes"] == "counts" and d["relocation"] == "predicted"
    half = d["count_halflife_blocks"]
    assert half == 2048 and d["count_total_inf"] >= 1
    header = (counts_bundle / "deploy.h").read_text()
    lines = header.splitlines()
    assert "#define HL_COUNTS 1" in lines and "#define HL_RELOC_AGE 0" in lines
    assert f"#define HL_COUNT_HALF INT64_C({half})" in lines
    assert f"#define HL_COUNT_TOTAL_INF INT64_C({d['count_total_inf']})" in lines
    pow_table = "static const int64_t hl_count_pow[512] = {INT64_C(65536), INT64_C(65359), "
    assert pow_table in header and ", INT64_C(65536), INT64_C(65535), " in header  # (the low byte's half)
    bucket_hi = "static const int64_t hl_bucket_hi[127] = {INT64_C(1), INT64_C(1), INT64_C(1), INT64_C(1), INT64_C(2), "
    assert bucket_hi in header and f"INT64_C({(1 << 58) - 1})}};" in header  # non-decreasing; the last: INF - 1
    b2g = "static const int hl_bucket2group[128] = {" + ", ".join(map(str, d["bucket2group"])) + "};"
    assert b2g in lines
    i, j = lines.index("#define HL_COUNTS 1"), lines.index("#endif")
    model = deploy_header({**d, "lifetimes": "model"}, 10).splitlines()
    assert model == [*lines[:i], "#define HL_COUNTS 0", *lines[j:]]
    # counts that never decay: null half-life and total, 0 in C
    lines = (bundles("no_decay") / "deploy.h").read_text().splitlines()
    assert "#define HL_COUNT_HALF INT64_C(0)" in lines and "#define HL_COUNT_TOTAL_INF INT64_C(0)" in lines


@pytest.mark.parametrize("key", HALFLIVES)
def test_harness_counts_equal_the_simulator(trace, bundles, key, tmp_path):
    """The C harness (the counts' integer decay, the estimate's bucket -> group for the non-hot
    user writes, the estimate against the groups' bounds for the survivors, no Frozen Filter) and
    the Numba simulator's hybrid_frozen on 64-block zones: the same user, GC, reset and placement
    counts; every block reads back."""
    zns = {"verify": True, "compare_sim": True, "progress_every": 0, "durability": "none"}
    dev = "file:" + str(tmp_path / "dev.zns")
    bundle = bundles(key)
    d = load_bundle(bundle, "hybrid").deploy
    assert d["lifetimes"] == "counts" and d["count_halflife_blocks"] == (2048 if key == "decay" else None)
    r = replay(trace, _frozen(bundle), SIM64, dev, zns, progress=False, cache_dir=tmp_path)
    assert r["parity"]["ok"], r["parity"]
    for k in (*PARITY_KEYS, "learned"):
        assert r[k] == r["simulator"][k], k
    assert r["policy"] == "hybrid_frozen" and r["victim"] == "hybrid"
    assert r["zone_resets"] == r["reclaimed_segments"] > 0
    learned = r["learned"]
    assert learned["table_gc_writes"] > 0 and learned["frozen_gc_writes"] == 0
    assert learned["hot_writes"] + sum(learned["class_writes"]) == r["user_writes"]
    assert r["verify"]["ok"] and r["verify"]["lost"] == r["verify"]["corrupt"] == 0


def test_bad_count_bundles_are_refused(counts_bundle):
    """A count bundle's keys are checked: one-line errors naming the key."""
    d = json.loads((counts_bundle / "deploy.json").read_text())
    check_deploy(d)
    b2g = [0, *d["bucket2group"][1:]]
    pw = d["count_pow"]
    cases = (
        ({**d, "bucket2group": b2g}, r"bucket2group must map the 128 buckets to groups 1\.\.\d+"),
        ({**d, "bucket2group": d["bucket2group"][:127]}, "bucket2group must be a list of 128 integers, got 127"),
        ({**d, "count_pow": pw[:256]}, "count_pow must be a list of 512 integers, got 256"),
        ({**d, "count_pow": [65535, *pw[1:]]}, "count_pow's two halves of 256 must each start at 65536"),
        ({**d, "count_pow": [*pw[:256], 65535, *pw[257:]]}, "count_pow's two halves of 256 must each start at 65536"),
        ({**d, "count_pow": [*pw[:10], pw[11], pw[10], *pw[12:]]}, "count_pow's .* and not increase"),
        ({**d, "bucket_hi": [2, *d["bucket_hi"][1:]]}, "bucket_hi must start at 1 and not decrease"),
        ({**d, "bucket_hi": [*d["bucket_hi"][:-1], 1]}, "bucket_hi must start at 1 and not decrease"),
        ({**d, "count_halflife_blocks": 0}, "count_halflife_blocks must be an integer >= 1 or null"),
        ({**d, "count_halflife_blocks": None}, "count_total_inf must be null when count_halflife_blocks is"),
        ({**d, "count_total_inf": None}, "count_total_inf must be an integer >= 1"),
        ({**d, "relocation": "dogi"}, "relocation 'dogi' is not one of predicted, age"),
        ({**d, "lifetimes": "oracle"}, "lifetimes 'oracle' is not one of model, counts"),
        ({k: v for k, v in d.items() if k != "bucket_hi"}, r"count bundle \(lifetimes counts\) lacks bucket_hi"),
    )
    for bad, match in cases:
        with pytest.raises(BundleError, match=match):
            check_deploy(bad)
    # a model bundle needs none of them
    model = {k: v for k, v in d.items() if not k.startswith(("count_", "bucket")) and k != "relocation"}
    check_deploy({**model, "lifetimes": "model"})
    check_deploy({k: v for k, v in model.items() if k != "lifetimes"})
