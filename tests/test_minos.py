"""MINOS: P² quantiles, ID-Vector bookkeeping, clustering (adjacent vs full search), the policy's
per-write rules, determinism and bad parameters."""

import warnings

import numpy as np
import pytest
from helpers import CAP, SEG, zipf_writes

from dogi_ml.errors import ConfigError
from dogi_ml.policies import _minos_cluster as mc
from dogi_ml.policies import make_policy, policy_names
from dogi_ml.policies.minos import (
    bench_clustering,
    bench_distance_floor,
    block_ids,
    distance_passes,
    entries,
    metadata_mib_per_tib,
)
from dogi_ml.sim import SimConfig, Simulator
from dogi_ml.sim.policy_api import record

# -- P² ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dist", ["uniform", "exponential", "lognormal"])
@pytest.mark.parametrize("cells", [4, 11])
def test_p2_quantiles_match_numpy(dist, cells):
    rng = np.random.default_rng(5)
    x = {
        "uniform": lambda: rng.uniform(0, 1000, 200_000),
        "exponential": lambda: rng.exponential(50.0, 200_000),
        "lognormal": lambda: rng.lognormal(3.0, 1.5, 200_000),
    }[dist]()
    q, n, count = mc.p2_new(cells)
    for v in x:
        mc.p2_update(q, n, count, v)
    est = mc.p2_quantiles(q, count)
    probs = np.arange(1, cells) / cells
    exact = np.quantile(x, probs)
    # within 2% in probability: the estimate's empirical CDF is close to the target level
    levels = np.searchsorted(np.sort(x), est) / x.size
    np.testing.assert_allclose(levels, probs, atol=0.02)
    np.testing.assert_allclose(est, exact, rtol=0.08)
    # markers stay ordered and inside the data's range; the query agrees with them
    assert np.all(np.diff(q) >= 0) and q[0] == x.min() and q[-1] == x.max()
    cell = np.array([mc.p2_query(q, count, v) for v in x[:5000]])
    np.testing.assert_array_equal(cell, np.searchsorted(est, x[:5000], side="left"))
    assert cell.min() == 0 and cell.max() == cells - 1


def _p2_reference(xs, cells):
    """Jain & Chlamtac's P² as written in the paper (search for the cell, then increment the
    positions above it), in plain Python: the kernel's branch-free form must match it exactly."""
    m = cells + 1
    q, n = sorted(xs[:m]), [float(i) for i in range(1, m + 1)]
    for c, x in enumerate(xs[m:], start=m + 1):
        if x < q[0]:
            q[0], k = x, 0
        elif x >= q[-1]:
            q[-1], k = x, m - 2
        else:
            k = 0
            while x >= q[k + 1]:
                k += 1
        for i in range(k + 1, m):
            n[i] += 1.0
        for i in range(1, m - 1):
            d = 1.0 + (c - 1.0) / cells * i - n[i]
            if (d >= 1.0 and n[i + 1] - n[i] > 1.0) or (d <= -1.0 and n[i - 1] - n[i] < -1.0):
                s = 1.0 if d > 0 else -1.0
                qp = q[i] + s / (n[i + 1] - n[i - 1]) * (
                    (n[i] - n[i - 1] + s) * (q[i + 1] - q[i]) / (n[i + 1] - n[i])
                    + (n[i + 1] - n[i] - s) * (q[i] - q[i - 1]) / (n[i] - n[i - 1])
                )
                if q[i - 1] < qp < q[i + 1]:
                    q[i] = qp
                else:
                    j = i + 1 if s > 0 else i - 1
                    q[i] = q[i] + s * (q[j] - q[i]) / (n[j] - n[i])
                n[i] += s
    return q, n


@pytest.mark.parametrize("cells", [4, 11])
def test_p2_matches_the_textbook_update_exactly(cells):
    # integers make ties (x equal to a marker) frequent: the cell search's >= must be kept
    xs = [float(v) for v in np.random.default_rng(2).geometric(0.01, 6000)]
    q, n, count = mc.p2_new(cells)
    for v in xs:
        mc.p2_update(q, n, count, v)
    rq, rn = _p2_reference(xs, cells)
    assert q.tolist() == rq and n.tolist() == rn


def test_p2_warm_up_and_bad_cells():
    q, n, count = mc.p2_new(4)
    assert mc.p2_query(q, count, 3.0) == 0  # nothing seen yet
    for v in (5.0, 1.0, 3.0):
        mc.p2_update(q, n, count, v)
    assert list(q[:3]) == [1.0, 3.0, 5.0] and np.isnan(mc.p2_quantiles(q, count)).all()
    assert mc.p2_query(q, count, 0.5) == 0 and mc.p2_query(q, count, 9.0) == 3
    with pytest.raises(ValueError, match="at least 1 cell"):
        mc.p2_new(0)


# -- clustering --------------------------------------------------------------------------------


def _monotone_counters(n, L, seed=0, order=None):
    """Stream v invalidates its slot's writes at a rate falling with v: neighbours are closest."""
    rng = np.random.default_rng(seed)
    W = np.zeros((2 * n, L), np.float32)
    I = np.zeros((2 * n, L), np.float32)
    age = np.arange(L)[::-1]
    rates = 2.0 ** np.arange(n) if order is None else 2.0 ** np.asarray(order)
    for v in range(n):
        w = rng.poisson(40, L).astype(np.float32)
        W[v] = w
        I[v] = np.floor(w * (1.0 - np.exp(-age / rates[v])))
    return W, I


def _run(fn, W, I, n, k, L, **kw):
    wt = np.empty(L, np.float32)
    mc.slot_weights(mc.decay_table(L), L - 1, wt)
    out = np.empty(n, np.int64)
    if fn == "adjacent":
        m = mc.cluster_adjacent(
            W, I, n, k, wt, out, *(np.empty(n, np.int64) for _ in range(3)), np.empty(n, np.float32)
        )
    else:
        m = mc.cluster_full(
            W, I, n, k, wt, out, np.empty(n, np.int64), np.empty(n, np.int64), np.empty((n, n), np.float32)
        )
    return m, out


@pytest.mark.parametrize("k", [2, 6, 15])
def test_adjacent_equals_full_search_when_optimum_is_adjacent(k):
    n, L = 16, 300
    W, I = _monotone_counters(n, L)
    ma, adj = _run("adjacent", W.copy(), I.copy(), n, k, L)
    mf, full = _run("full", W.copy(), I.copy(), n, k, L)
    assert ma == mf == k
    np.testing.assert_array_equal(adj, full)
    assert np.all(np.diff(adj) >= 0) and set(adj) == set(range(k))


def test_full_search_merges_non_adjacent_streams():
    # streams alternate between two behaviours: the closest pairs are two apart
    n, L = 8, 200
    W, I = _monotone_counters(n, L, order=[0, 6, 0.1, 6.1, 0.2, 6.2, 0.3, 6.3])
    _, full = _run("full", W.copy(), I.copy(), n, 2, L)
    np.testing.assert_array_equal(full, [0, 1, 0, 1, 0, 1, 0, 1])
    _, adj = _run("adjacent", W.copy(), I.copy(), n, 2, L)
    assert np.all(np.diff(adj) >= 0)  # adjacent clusters are runs of virtual streams


def test_adjacent_clustering_equals_the_plain_twin_on_recorded_rings():
    # ID-Vector rings recorded from a run (the policy's padded layout), clustered by the kernel
    # and by tests/naive.py's float64 twin that recomputes every distance after each merge
    import naive

    writes = zipf_writes(CAP, 3 * CAP, theta=1.01, seed=11)
    sim = Simulator(make_policy("minos"), SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit"), CAP)
    sim.compile()
    sim.prefill()
    p = sim.pstate
    n, L = 16, int(record(p.scalars).ring_len)
    wt = np.empty(L, np.float32)
    checked = 0
    for chunk in np.array_split(writes, 3):
        sim.feed(chunk)
        W, I = mc.id_vectors(2 * n, L)
        W[:n] = p.id_w[:n]
        I[:n] = p.id_i[:n]
        mc.slot_weights(p.inv_decay, record(p.scalars).pos, wt)
        for k in (2, 6):
            out = np.empty(n, np.int64)
            scratch = (np.empty(n, np.int64) for _ in range(3))
            mc.cluster_adjacent(W, I, n, k, wt, out, *scratch, np.empty(n, np.float32))
            assert out.tolist() == naive.minos_cluster_adjacent(W[:n, :L], I[:n, :L], k, wt)
            checked += 1
    # the kernel left the live rows alone (sums go to the spare rows)
    np.testing.assert_array_equal(W[:n], p.id_w[:n])
    assert checked == 6


@pytest.mark.parametrize("n", [2, 5, 7, 16])
def test_adjacent_clustering_equals_the_plain_twin_for_every_k(n):
    # sparse random rings (zero slots, some I > W as Agg8 metadata makes): every k from n down to
    # 1 exercises the three-pair initial passes and their remainder, dead spare-row reuse and the
    # last merge that only relinks
    import naive

    rng = np.random.default_rng(n)
    L = 61
    W, I = mc.id_vectors(2 * n, L)
    W[:n, :L] = rng.poisson(2.0, (n, L))
    I[:n, :L] = np.minimum(rng.poisson(W[:n, :L] * rng.uniform(0.1, 0.9, (n, 1))), W[:n, :L] + 1)
    wt = np.empty(L, np.float32)
    mc.slot_weights(mc.decay_table(L), 17, wt)
    live = (W[:n].copy(), I[:n].copy())
    for k in range(n, 0, -1):
        out = np.empty(n, np.int64)
        scratch = (np.empty(n, np.int64) for _ in range(3))
        assert mc.cluster_adjacent(W, I, n, k, wt, out, *scratch, np.empty(n, np.float32)) == k
        assert out.tolist() == naive.minos_cluster_adjacent(W[:n, :L], I[:n, :L], k, wt)
    np.testing.assert_array_equal(W[:n], live[0])
    np.testing.assert_array_equal(I[:n], live[1])


def test_op_distance_matches_equations():
    rng = np.random.default_rng(1)
    L = 50
    W = rng.integers(0, 30, (2, L)).astype(np.float32)
    I = np.floor(W * rng.random((2, L))).astype(np.float32)
    W[:, 7] = 0
    I[:, 7] = 0  # an empty slot contributes nothing
    wt = np.empty(L, np.float32)
    mc.slot_weights(mc.decay_table(L), 20, wt)
    alpha = 1 - 1 / L
    ages = (20 - np.arange(L)) % L
    np.testing.assert_allclose(wt, alpha**ages, rtol=1e-5)
    inew = (I[0] + I[1]) / np.maximum(W[0] + W[1], 1) * W[0]  # Eq. (1)
    expect = np.sum(np.abs(inew - I[0]) * alpha**ages)  # Eqs. (2), (3)
    assert mc.op_distance(W, I, 0, 1, wt) == pytest.approx(expect, rel=1e-4)
    assert mc.op_distance(W, I, 1, 0, wt) == pytest.approx(expect, rel=1e-4)


def test_avg_distance_clusters_by_mean_lifetime():
    out = np.empty(6, np.int64)
    sums = np.array([10, 12, 100, 105, 1000, 0.0])
    cnts = np.array([1, 1, 1, 1, 1, 0.0])
    mc.cluster_avg(sums, cnts, 6, 3, out, np.empty(6, np.int64), np.empty(6), np.empty(6))
    np.testing.assert_array_equal(out, [0, 0, 1, 1, 2, 2])


# -- the policy --------------------------------------------------------------------------------


def test_registered_and_defaults():
    assert "minos" in policy_names()
    pol = make_policy("minos")
    assert pol.n_groups == 6 and pol.n_user == 12 and pol.n_gc == 4 and pol.agg == 8
    assert pol.victim == "cost_benefit_sepbit" and pol.label() == "minos"
    assert make_policy("minos", agg=1, correlative=False).label() == "minos[agg1,noCP]"
    assert pol.p2_every == 8 and make_policy("minos", p2_every=1).label() == "minos[p2every1]"


def test_p2_learns_from_every_kth_lifetime():
    # agg = 1: every user write after the prefill overwrites a block, so the lifetimes offered to
    # the user P² number the same whatever the placement; the first m + 1 all update the markers
    writes = zipf_writes(CAP, 3 * CAP, seed=4)
    counts = {}
    for k in (1, 5):
        sim = Simulator(
            make_policy("minos", agg=1, p2_every=k), SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit"), CAP
        )
        sim.prefill()
        sim.feed(writes)
        counts[k] = int(sim.pstate.ucount[0])
    m = sim.pstate.uq.shape[0]
    assert counts[1] == writes.size
    assert counts[5] == m + 1 + (writes.size - m - 1) // 5


def _checked_run(pol, writes, chunk_blocks):
    """``writes`` through ``pol`` after prefill, CB victims, the engine's invariants checked."""
    cfg = SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit", debug_invariants=True, chunk_blocks=chunk_blocks)
    sim = Simulator(pol, cfg, CAP)
    sim.compile()
    sim.prefill()
    sim.feed(writes)
    return sim


def _live_per_stream(ids_user, ids_gc, n=16):
    """Valid blocks per virtual stream from decoded stream ids (-1 = none)."""
    return np.bincount(ids_user, minlength=n), np.bincount(ids_gc[ids_gc >= 0], minlength=n)


def test_id_vector_conservation_and_period():
    writes = zipf_writes(CAP, 6 * CAP, seed=3)
    sim = _checked_run(make_policy("minos", agg=1, ring_len=100_000), writes, 8192)
    p = sim.pstate
    n = 16
    r = sim.result()
    # every write counted once, in some stream
    assert p.tot_w.sum() == r["user_writes"] + r["gc_writes"] + CAP  # prefill is user writes too
    assert p.tot_w[:12].sum() == CAP + writes.size and p.tot_w[12:].sum() == r["gc_writes"]
    # writes = invalidations + live blocks (+ GC copies GC moved again) per virtual stream
    here = sim.state.l2p  # agg=1, physical entries: one per physical block
    e = entries(p)
    gvs = e["g_vs"][here]
    live_user, live_gc = _live_per_stream(e["u_vs"][here], gvs, n)
    np.testing.assert_array_equal(p.tot_w[:12], p.tot_i[:12] + live_user[:12])
    np.testing.assert_array_equal(p.tot_w[12:], p.tot_i[12:] + live_gc[12:] + p.gc_superseded[12:])
    assert live_user.sum() == CAP and (p.gc_superseded[12:] > 0).any()
    # the ring covers the whole run here: its counters are the totals
    np.testing.assert_array_equal(p.id_w[:n].sum(axis=1), p.tot_w)
    np.testing.assert_array_equal(p.id_i[:n].sum(axis=1), p.tot_i)
    # clustering ran every 8 slots of one segment
    st = record(p.scalars)
    assert st.reclusters == (st.clock // SEG) // 8 > 0
    assert st.slot == st.clock // SEG and st.pos == st.slot % 100_000 and st.slot_fill == st.clock % SEG
    assert set(p.vs_map.tolist()) == set(range(6))
    # GC writes went only to GC virtual streams, user writes only to user ones
    assert e["u_vs"].max() < 12 and (gvs[gvs >= 0] >= 12).all()
    # each live block's entry says where it went: its segment's group is its stream's group
    # at the time of writing (the mapping may have moved since, so check the latest slot only)
    assert (live_user >= 0).all()


def test_physical_and_logical_entries_agree_without_aggregation():
    # with one entry per block both spaces hold the same metadata: identical runs. A wrong guess
    # of where the engine appends would lose metadata and change the decisions.
    writes = zipf_writes(CAP, 5 * CAP, seed=4)
    out = []
    for space in ("physical", "logical"):
        pol = make_policy("minos", agg=1, agg_space=space)
        sim = Simulator(pol, SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit"), CAP)
        sim.compile()
        sim.prefill()
        sim.feed(writes)
        r = sim.result()
        p = sim.pstate
        e = entries(p)
        at = sim.state.l2p if space == "physical" else np.arange(CAP)
        view = [e[k][at].tolist() for k in ("u_vs", "u_slot", "g_vs", "g_slot")]
        out.append((r["waf"], r["gc_writes"], p.tot_w.tolist(), p.tot_i.tolist(), view))
    assert out[0] == out[1]


def test_mapping_log_keeps_the_latest_clusterings():
    writes = zipf_writes(CAP, 3 * CAP, seed=5)
    pol = make_policy("minos", mapping_log=4)
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit"), CAP)
    sim.compile()
    sim.prefill()
    sim.feed(writes)
    r = sim.result()
    log = r["minos_mapping_log"]
    done = r["minos_reclusters"]
    assert len(log) == 4 and [e["slot"] for e in log] == [8 * i - 1 for i in range(done - 3, done + 1)]
    assert log[-1]["mapping"] == r["minos_mapping"]
    # the user-write clock of each clustering: increasing, within the run (prefill included)
    times = [e["user_time"] for e in log]
    assert times == sorted(times) and 0 < times[0] and times[-1] < CAP + writes.size
    assert "minos_mapping_log" not in _plain_result()


def _plain_result():
    pol = make_policy("minos")
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, prefill=False), CAP)
    sim.compile()
    sim.feed(np.arange(100, dtype=np.int64))
    return sim.result()


@pytest.mark.parametrize("slot_clock", ["user", "all"])
def test_ring_forgets_old_slots(slot_clock):
    writes = zipf_writes(CAP, 6 * CAP, seed=3)
    pol = make_policy("minos", agg=1, ring_len=16, slot_clock=slot_clock)
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit"), CAP)
    sim.compile()
    sim.prefill()
    sim.feed(writes)
    p = sim.pstate
    r = sim.result()
    # the ring holds the last 16 slots: the completed ones full, the current one partial. A slot
    # is one segment of user writes (logical time, the default: the user streams' rows fill it,
    # GC writes count alongside) or of all writes (slot_clock=all)
    clock = record(p.scalars).clock
    slot = clock // SEG
    fill = slice(0, 12) if slot_clock == "user" else slice(0, 16)
    assert clock == (CAP + writes.size if slot_clock == "user" else CAP + writes.size + r["gc_writes"])
    assert p.id_w[fill].sum() == 15 * SEG + clock % SEG
    assert p.id_w[fill, slot % 16].sum() == clock % SEG
    if slot_clock == "user":
        assert p.id_w[12:16].sum() > 0  # GC writes inside the user-write slots
    assert (p.id_i[:16] <= p.id_w[:16]).all()


def _background(sim, rng):
    """The lower half of the space written three times over: update intervals of about CAP/2."""
    for _ in range(3):
        sim.feed(rng.permutation(CAP // 2).astype(np.int64))


def test_new_writes_and_correlative_steps():
    rng = np.random.default_rng(0)
    pol = make_policy("minos", agg=1)
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, prefill=False), CAP)
    sim.compile()
    _background(sim, rng)
    p = sim.pstate
    uvs = lambda sim, lba: int(entries(sim.pstate)["u_vs"][sim.state.l2p[lba]])  # noqa: E731
    assert (sim.state.l2p[CAP // 2 :] == -1).all()
    assert (entries(p)["u_vs"][sim.state.l2p[: CAP // 2]] < 11).all()
    seen = [uvs(sim, 7)]
    for _ in range(12):
        sim.feed(np.array([7], np.int64))  # interval 1: the hottest cell is the target
        seen.append(uvs(sim, 7))
    # one step at a time toward cell 0, then it stays
    expect = [max(seen[0] - i, 0) for i in range(len(seen))]
    assert seen == expect and seen[-1] == 0 and seen[0] >= 2
    # without correlative prediction the block jumps to the target cell at once
    pol2 = make_policy("minos", agg=1, correlative=False)
    sim2 = Simulator(pol2, SimConfig(segment_blocks=SEG, prefill=False), CAP)
    sim2.compile()
    _background(sim2, np.random.default_rng(0))
    sim2.feed(np.array([CAP - 1], np.int64))
    assert uvs(sim2, CAP - 1) == 11  # a first write
    sim2.feed(np.array([CAP - 1], np.int64))
    assert uvs(sim2, CAP - 1) == 0


def test_first_writes_go_to_the_last_user_stream_with_aggregation():
    pol = make_policy("minos", agg=8)
    sim = Simulator(pol, SimConfig(segment_blocks=SEG, prefill=False), CAP)
    sim.compile()
    sim.feed(np.arange(64, dtype=np.int64))
    p = sim.pstate
    assert p.tot_w[11] == 64 and p.tot_w.sum() == 64
    r = sim.result()  # no update seen yet: the quantiles are unknown, not NaN
    assert r["minos_user_quantiles"] == [None] * 10 and r["minos_gc_quantiles"] == [None] * 3
    assert p.meta.shape == (sim.n_segments * SEG // 8,)  # physical entries, one row each
    assert make_policy("minos", agg_space="logical").label() == "minos[lba]"


def test_aggregated_entry_owner():
    # 64 first writes fill 8 entries of one segment in order: with agg_owner=last an entry holds
    # its 8th block's write time, with median its 4th block's (offset agg/2 - 1), 4 writes earlier
    times = {}
    for owner in ("last", "median"):
        sim = Simulator(make_policy("minos", agg=8, agg_owner=owner), SimConfig(segment_blocks=SEG, prefill=False), CAP)
        sim.compile()
        sim.feed(np.arange(64, dtype=np.int64))
        t = entries(sim.pstate)["u_time"]
        times[owner] = t[t != 0]
    assert times["last"].size == 8 and np.all(np.diff(times["last"]) == 8)
    np.testing.assert_array_equal(times["last"] - times["median"], 4)
    assert make_policy("minos", agg_owner="median").label() == "minos[ownmedian]"
    # with one block per entry both owners are the same rule (the runs were identical to the last
    # byte), so median there is refused rather than run as last
    with pytest.raises(ConfigError, match=r"policy.params.agg_owner=median .* policy.params.agg=1 shares none"):
        make_policy("minos", agg=1, agg_owner="median")


def _runs_without_aggregation(param, values):
    """One zipf run at ``agg=1`` per value of ``param``: WAF, mapping, entries, ID-Vectors."""
    writes = zipf_writes(CAP, 3 * CAP, seed=4)
    runs = []
    for value in values:
        sim = Simulator(make_policy("minos", agg=1, **{param: value}), SimConfig(segment_blocks=SEG), CAP)
        sim.compile()
        sim.prefill()
        sim.feed(writes)
        r = sim.result()
        runs.append((r["waf"], r["minos_mapping"], sim.pstate.meta.tobytes(), sim.pstate.id_i.tobytes()))
    return runs


def test_block_ids_count_each_invalidation_for_its_own_stream():
    # agg=8 with the stream ids kept per physical block (agg_ids=block): an overwrite counts for
    # the streams that wrote that very block, so writes = invalidations + live blocks (+ GC copies
    # GC moved again) holds per virtual stream, as at agg=1; with the paper's one pair per entry
    # it does not, since an entry's 8 blocks come from several streams
    writes = zipf_writes(CAP, 6 * CAP, seed=3)
    balanced = {}
    for ids in ("block", "entry"):
        sim = _checked_run(make_policy("minos", agg=8, agg_ids=ids), writes, 8192)
        p = sim.pstate
        here = sim.state.l2p
        if ids == "block":
            assert p.blk_ids.shape == (sim.n_segments * SEG,)
            b = block_ids(p)
            u, g = b["u_vs"][here], b["g_vs"][here]
        else:
            assert p.blk_ids.shape == (1,)
            with pytest.raises(ValueError, match="keeps its stream ids per entry"):
                block_ids(p)
            e = entries(p)
            u, g = e["u_vs"][here >> 3], e["g_vs"][here >> 3]
        assert (u >= 0).all() and (u < 12).all() and ((g == -1) | (g >= 12)).all()
        live_user, live_gc = _live_per_stream(u, g)
        balanced[ids] = np.array_equal(p.tot_w[:12], p.tot_i[:12] + live_user[:12]) and np.array_equal(
            p.tot_w[12:], p.tot_i[12:] + live_gc[12:] + p.gc_superseded[12:]
        )
        r = sim.result()
        assert p.tot_w.sum() == r["user_writes"] + r["gc_writes"] + CAP
    assert balanced == {"block": True, "entry": False}


def test_block_ids_change_nothing_without_aggregation():
    # agg=1: the entry is the block, so keeping the ids beside it gives the same run
    runs = _runs_without_aggregation("agg_ids", ("entry", "block"))
    assert runs[0] == runs[1]
    assert make_policy("minos", agg_ids="block").label() == "minos[idsblock]"


@pytest.mark.parametrize("space", ["physical", "logical"])
def test_prefetch_hook_is_a_hint_only(space):
    # the engine's prefetch_lba hook reaches MINOS (the LBA 16 writes ahead, queued for the user
    # write 8 writes ahead), and a run without it is identical: the lookahead never decides
    from dogi_ml.policies.minos import Minos, minos_prefetch
    from dogi_ml.sim.policy_api import no_prefetch_hook

    class NoPrefetch(Minos):
        prefetch_lba = no_prefetch_hook

    assert Minos.prefetch_lba is minos_prefetch
    first = np.arange(100, dtype=np.int64) * 7 % CAP  # distinct LBAs, no GC yet
    writes = zipf_writes(CAP, 4 * CAP, seed=12)
    runs = []
    for cls in (Minos, NoPrefetch):
        sim = Simulator(cls(agg_space=space), SimConfig(segment_blocks=SEG, prefill=False, chunk_blocks=3000), CAP)
        sim.compile()
        sim.feed(first)
        p = sim.pstate
        hooked = cls is Minos
        # the hook saw the chunk's last LBA (it is not called for the last 16 writes) and every
        # user write since queued it (physical entries; logical ones are prefetched at once)
        assert record(p.scalars).hint == (first[-1] if hooked else -1)
        assert (p.ahead == (first[-1] if hooked and space == "physical" else -1)).all()
        sim.feed(writes)
        r = sim.result()
        runs.append(
            (r["waf"], r["gc_writes"], r["minos_mapping"], p.tot_w.tolist(), p.id_i.tobytes(), p.meta.tobytes())
        )
    assert runs[0] == runs[1] and runs[0][1] > 0


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"agg": 32, "search": "full"},
        {"distance": "avg", "correlative": False},
        {"p2_every": 1},
        {"agg_ids": "block"},
    ],
)
def test_deterministic_and_consistent(params):
    writes = zipf_writes(CAP, 4 * CAP, seed=9)
    results = []
    for _ in range(2):
        sim = _checked_run(make_policy("minos", **params), writes, 5000)
        r = sim.result()
        results.append((r["waf"], r["minos_mapping"], sim.pstate.tot_w.tolist(), sim.pstate.id_i.tobytes()))
    assert results[0] == results[1]
    assert results[0][0] > 1.0


def test_memory_table5():
    assert [metadata_mib_per_tib(a)["metadata_mib"] for a in (1, 8, 32)] == [2304, 288, 72]
    assert metadata_mib_per_tib(8)["id_vectors_mib"] == pytest.approx(16 * 2048 * 8 / 2**20)
    # agg_ids=block: the two 32-bit slots shared, two 4-bit ids per block (1 byte)
    assert [metadata_mib_per_tib(a, ids="block")["metadata_mib"] for a in (1, 8, 32)] == [2304, 512, 320]
    with pytest.raises(ValueError, match="ids must be one of entry, block"):
        metadata_mib_per_tib(8, ids="lba")


def test_bench_clustering_reports_microseconds():
    r = bench_clustering(segments=(64, 128), repeats=3)
    assert r["n"] == 16 and set(r["us"]) == {64, 128} and all(v > 0 for v in r["us"].values())


def test_distance_passes_count_algorithm_3s_full_length_distances():
    # N - 1 adjacent pairs, then two per merge pass; the last of the N - K merges only relinks
    assert distance_passes(16, 6) == 15 + 2 * 9
    assert distance_passes(16, 15) == 15  # one merge: the last, no pass
    assert distance_passes(16, 16) == 15  # no merge: the adjacent pairs are still measured


def test_distance_floor_scales_its_rate_by_the_terms_of_each_ring():
    r = bench_distance_floor(segments=(512, 8192), repeats=20)
    assert r["passes"] == 33 and r["ps_per_term"] > 0
    for L, us in r["floor_us"].items():
        assert us == pytest.approx(r["ps_per_term"] * 33 * L / 1e6)


def test_bench_prints_the_clustering_against_its_floor_and_the_target(capsys):
    from omegaconf import OmegaConf

    from dogi_ml.bench import bench_minos

    mcfg = OmegaConf.create(
        {"segments": [512, 8192], "n_virtual": 16, "target_us_at_8192": 20, "target_slowdown_vs_sepbit": 1.3}
    )
    res = bench_minos(mcfg, rows=[])
    out = capsys.readouterr().out
    assert set(res["floor"]["floor_us"]) == {512, 8192}
    need = 20 * 1e6 / (33 * 8192)  # 74 ps per term
    assert f"The target needs <= {need:.0f} ps per term" in out
    assert "OP-distance term with its rows in L1" in out and "L1 floor us" in out


def test_bench_compares_with_sepbit_under_the_same_victim_rule():
    from dogi_ml.bench import minos_vs_sepbit

    writes = zipf_writes(CAP, 2 * CAP, seed=12)
    r = minos_vs_sepbit(writes, CAP, SEG, 0.1, repeats=1)
    for name in ("sepbit", "minos"):
        sim = Simulator(make_policy(name), SimConfig(segment_blocks=SEG, victim="cost_benefit_sepbit"), CAP)
        sim.compile()
        sim.prefill()
        sim.feed(writes)
        assert r["waf"][name] == sim.result()["waf"]  # the runs it timed are ordinary runs
    aps = r["appends_per_cpu_second"]
    assert r["slowdown"] == aps["sepbit"] / aps["minos"] and min(aps.values()) > 0
    assert r["ns_per_append"]["minos"] == pytest.approx(1e9 / aps["minos"])


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_user": 1}, "n_user must be an integer >= 2"),
        ({"n_gc": 0}, "n_gc must be an integer >= 1"),
        ({"agg": 3}, "agg must be a power of two"),
        ({"search": "greedy"}, "search must be one of adjacent, full"),
        ({"distance": "kl"}, "distance must be one of op, avg"),
        ({"correlative": "yes"}, "correlative must be true or false"),
        ({"recluster_every": 0}, "recluster_every must be an integer >= 1"),
        ({"ring_len": 1}, "ring_len must be an integer >= 2"),
        ({"distance": "avg", "search": "full"}, "AvgDist"),
        ({"window": 3}, "unknown parameter"),
        ({"agg_space": "lbas"}, "agg_space must be physical"),
        ({"agg_owner": "first"}, "agg_owner must be last .* or median"),
        ({"agg_ids": "lba"}, "agg_ids must be entry .* or block"),
        ({"agg_ids": "block", "agg_space": "logical"}, "agg_ids=block .* needs agg_space=physical"),
        ({"mapping_log": -1}, "mapping_log must be an integer >= 0"),
        ({"p2_every": 0}, "p2_every must be an integer >= 1"),
        ({"slot_clock": "gc"}, "slot_clock must be all .* or user"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        make_policy("minos", **params)


def test_bad_group_counts():
    with pytest.raises(ValueError, match="must be in 2..16"):
        make_policy("minos", 17)
    with pytest.raises(ValueError, match="must be in 2..16"):
        make_policy("minos", 1)
    with pytest.raises(ValueError, match="exceeds 255"):
        make_policy("minos", n_user=200, n_gc=60)


def test_sparse_time_slots_warn_with_the_density_and_the_fix():
    # 32-block segments over 16 virtual streams: 2 writes per stream per slot, where MINOS trailed
    # SepBIT (docs/minos.md, "Slot density"); 64 blocks (4 per stream) is quiet
    with pytest.warns(
        UserWarning, match=r"32 blocks\) holds 2\.0 writes per virtual stream \(16 streams\).*>= 64 blocks"
    ):
        Simulator(make_policy("minos"), SimConfig(segment_blocks=32), CAP)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Simulator(make_policy("minos"), SimConfig(segment_blocks=64), CAP)
        # fewer virtual streams make the same segments dense enough: 32 / 8 = 4 per stream
        Simulator(make_policy("minos", 4, n_user=6, n_gc=2), SimConfig(segment_blocks=32), CAP)
