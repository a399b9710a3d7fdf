"""Synthetic workloads: determinism, exact sizes, the shapes each model promises, bad params."""

import time
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from dogi_ml.traces.generators import (
    GENERATORS,
    ZipfSampler,
    accepted_params,
    default_params,
    generate,
    hotcold_hot_set,
)
from dogi_ml.traces.trace import OP_READ, OP_TRIM, OP_WRITE

CAP = 16384
CONF = Path(__file__).resolve().parents[1] / "conf" / "workload"


def _region(t, key):
    base, size = t.meta[key]
    return base, base + size


def _reuse_distance(w):
    """For each block write, writes until the same LBA is written again (-1: never)."""
    order = np.lexsort((np.arange(w.size), w))
    nxt = np.full(w.size, -1, np.int64)
    same = w[order[1:]] == w[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return np.where(nxt >= 0, nxt - np.arange(w.size), -1)


# -- every generator ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_deterministic_exact_and_in_range(kind):
    n = 3 * CAP + 7
    a = generate(kind, capacity_blocks=CAP, n_writes=n, seed=5)
    b = generate(kind, capacity_blocks=CAP, n_writes=n, seed=5)
    c = generate(kind, capacity_blocks=CAP, n_writes=n, seed=6)
    for name in ("ts_us", "lba", "nblocks", "op", "volume"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.block_writes, c.block_writes)
    assert a.block_writes.size == n
    assert int(a.nblocks[a.op == OP_WRITE].sum()) == n
    assert a.lba.min() >= 0 and a.max_lba < CAP
    assert (a.nblocks >= 1).all()
    assert (np.diff(a.ts_us) > 0).all()
    assert a.name == kind
    assert a.meta["capacity_blocks"] == CAP and a.meta["generator"] == kind and a.meta["seed"] == 5
    assert set(a.meta["params"]) == set(accepted_params(kind))


@pytest.mark.parametrize("kind", ["ycsb_a", "ycsb_f", "varmail", "zipf", "phase_shift"])
def test_a_shorter_run_is_a_prefix_of_a_longer_one(kind):
    short = generate(kind, capacity_blocks=CAP, n_writes=CAP + 3, seed=2).block_writes
    long = generate(kind, capacity_blocks=CAP, n_writes=3 * CAP, seed=2).block_writes
    np.testing.assert_array_equal(short, long[: short.size])


def test_tiny_runs_are_exact():
    for kind in sorted(GENERATORS):
        t = generate(kind, capacity_blocks=4096, n_writes=1, seed=0)
        assert t.block_writes.size == 1, kind


# -- Zipf ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["alias", "rejection"])
@pytest.mark.parametrize("theta", [0.0, 0.8, 0.99, 1.0, 1.2])
def test_zipf_rank_frequencies_follow_theory(theta, method):
    n, k = 1000, 400_000
    s = ZipfSampler(n, theta, seed=1, scramble=False, method=method)
    counts = np.bincount(s.sample(k), minlength=n)
    p = s.probabilities()
    np.testing.assert_allclose(p, np.arange(1, n + 1) ** -theta / (np.arange(1, n + 1) ** -theta).sum())
    for rank in (0, 1, 9, 99):
        expected = p[rank] * k
        assert abs(counts[rank] - expected) < 5 * np.sqrt(expected) + 5, (rank, counts[rank], expected)
    if p[0] * k > 5000:  # a 3% check needs a large count (uniform: 400 per rank, covered above)
        assert counts[0] / k == pytest.approx(p[0], rel=0.03)
    assert counts[:10].sum() / k == pytest.approx(p[:10].sum(), abs=0.01)
    # chi-square over log-spaced rank buckets
    edges = np.unique(np.geomspace(1, n, 20).astype(int)) - 1
    edges = np.append(edges, n)
    obs = np.add.reduceat(counts, edges[:-1])
    exp = np.add.reduceat(p, edges[:-1]) * k
    chi2 = ((obs - exp) ** 2 / exp).sum()
    assert chi2 < 3 * len(obs) + 30, chi2


def test_zipf_ranks_are_scrambled_over_addresses():
    s = ZipfSampler(10_000, 1.0, seed=3)
    hottest = s.perm[:100]
    assert hottest.max() - hottest.min() > 5000  # spread, not a contiguous hot range
    assert np.array_equal(np.sort(s.perm), np.arange(10_000))
    w = s.sample(200_000)
    assert w.min() >= 0 and w.max() < 10_000
    # the hottest address is the image of rank 0
    assert np.bincount(w).argmax() == s.perm[0]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 1000, 4097, 65536])
def test_zipf_rejection_scramble_is_a_bijection(n):
    s = ZipfSampler(n, 1.0, seed=n, method="rejection")
    addr = s.address_of_rank(np.arange(n))
    np.testing.assert_array_equal(np.sort(addr), np.arange(n))
    if n >= 1000:
        assert addr[:100].max() - addr[:100].min() > n // 2  # hot ranks are spread
        w = s.sample(50_000)
        assert np.bincount(w).argmax() == addr[0]


def test_zipf_stream_does_not_depend_on_chunking():
    whole = ZipfSampler(5000, 0.9, seed=7).sample(10_000)
    s = ZipfSampler(5000, 0.9, seed=7)
    s.CHUNK = 777
    parts = np.concatenate([s.sample(3000), s.sample(1), s.sample(6999)])
    np.testing.assert_array_equal(whole, parts)
    whole = ZipfSampler(5000, 0.9, seed=7, method="rejection").sample(10_000)
    s = ZipfSampler(5000, 0.9, seed=7, method="rejection")
    np.testing.assert_array_equal(whole, np.concatenate([s.sample(3000), s.sample(7000)]))


def test_zipf_generator_request_blocks_and_working_set():
    t = generate("zipf", capacity_blocks=CAP, n_writes=10_001, seed=1, request_blocks=4, wss_fraction=0.5)
    assert t.block_writes.size == 10_001
    assert (t.lba % 4 == 0).all() and (t.nblocks[:-1] == 4).all() and t.nblocks[-1] == 1
    assert t.max_lba < CAP // 2


def test_uniform_working_set():
    t = generate("uniform", capacity_blocks=CAP, n_writes=50_000, seed=1, wss_fraction=0.25)
    assert t.max_lba < CAP // 4
    counts = np.bincount(t.block_writes, minlength=CAP // 4)
    assert counts.min() > 0 and counts.max() < 40


def test_hotcold_split():
    t = generate("hotcold", capacity_blocks=CAP, n_writes=200_000, seed=1, hot_traffic=0.9, hot_fraction=0.1)
    hot = hotcold_hot_set(CAP, seed=1, hot_fraction=0.1)
    assert hot.size == t.meta["hot_blocks"] == round(CAP * 0.1)
    share = np.isin(t.block_writes, hot).mean()
    assert share == pytest.approx(0.9, abs=0.005)
    assert hot.max() - hot.min() > CAP // 2  # scattered
    counts = np.bincount(t.block_writes, minlength=CAP)
    top = np.sort(counts)[::-1][: CAP // 10].sum() / counts.sum()
    assert top == pytest.approx(0.9, abs=0.02)


# -- YCSB ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ycsb_a():
    return generate("ycsb_a", capacity_blocks=CAP, n_writes=8 * CAP, seed=0)


@pytest.fixture(scope="module")
def ycsb_f():
    return generate("ycsb_f", capacity_blocks=CAP, n_writes=8 * CAP, seed=0)


def test_ycsb_layout_fits_and_regions_tile_the_space(ycsb_a):
    d0, d1 = _region(ycsb_a, "layout_doublewrite")
    r0, r1 = _region(ycsb_a, "layout_redo")
    p0, p1 = _region(ycsb_a, "layout_table")
    assert d0 == 0 and d1 == r0 and r1 == p0 and p1 <= CAP and CAP - p1 < 4
    assert (p1 - p0) > 0.9 * CAP  # the tablespace is most of the space


def test_ycsb_redo_log_is_sequential_and_wraps(ycsb_a):
    w = ycsb_a.block_writes
    r0, r1 = _region(ycsb_a, "layout_redo")
    redo = w[(w >= r0) & (w < r1)]
    steps = np.diff(redo)
    # each commit rewrites the current log block; the log advances one block at a time and wraps
    assert set(np.unique(steps)) <= {0, 1, -(r1 - r0 - 1)}
    assert (steps < 0).sum() >= 2
    assert np.unique(redo).size == r1 - r0  # the whole ring is used
    # redo writes are single blocks
    redo_req = (ycsb_a.op == OP_WRITE) & (ycsb_a.lba >= r0) & (ycsb_a.lba < r1)
    assert (ycsb_a.nblocks[redo_req] == 1).all()


def test_ycsb_doublewrite_precedes_its_page_writes(ycsb_a):
    t = ycsb_a
    d0, d1 = _region(t, "layout_doublewrite")
    p0, _ = _region(t, "layout_table")
    batch_blocks = (d1 - d0) - 8 * 4  # 120 batch pages + 8 single-page slots
    pending = 0
    n_batches = n_single = 0
    writes = np.flatnonzero(t.op == OP_WRITE)
    for i in writes[:-1]:  # the last request may be cut
        lba, nb = int(t.lba[i]), int(t.nblocks[i])
        if d0 <= lba < d1:
            assert pending == 0, "a doublewrite batch before the previous one was written in place"
            if lba == d0:
                assert nb % 4 == 0 and 0 < nb <= batch_blocks
                pending = nb // 4
                n_batches += 1
            else:
                assert lba >= d0 + batch_blocks and (lba - d0) % 4 == 0 and nb == 4
                pending = 1
                n_single += 1
        elif lba >= p0:
            assert pending > 0, f"page write at request {i} without its doublewrite copy"
            pending -= 1
    assert n_batches > 10 and n_single > 10


def test_ycsb_pages_are_16k_aligned_and_reads_are_page_misses(ycsb_a):
    t = ycsb_a
    p0, p1 = _region(t, "layout_table")
    is_w = t.op == OP_WRITE
    page = is_w & (t.lba >= p0)
    page[-1] = False  # the last request is cut to make exactly n_writes blocks
    assert (t.nblocks[page] == 4).all() and ((t.lba[page] - p0) % 4 == 0).all()
    reads = t.op == OP_READ
    assert reads.sum() == t.meta["page_reads"] or reads.sum() == t.meta["page_reads"] - 1
    assert (t.lba[reads] >= p0).all() and ((t.lba[reads] - p0) % 4 == 0).all() and (t.nblocks[reads] == 4).all()
    assert t.meta["lru_flushes"] > 0 and t.meta["cleaner_flushes"] > 0


def test_ycsb_writes_are_skewed(ycsb_a):
    t = ycsb_a
    w = t.block_writes
    counts = np.sort(np.bincount(w, minlength=CAP))[::-1]
    assert counts[: CAP // 10].sum() / w.size > 0.5  # top 10% of blocks take most writes
    p0, _ = _region(t, "layout_table")
    pages = (w[w >= p0] - p0) // 4
    pc = np.sort(np.bincount(pages, minlength=t.meta["table_pages"]))[::-1]
    assert pc[: pc.size // 10].sum() / pc.sum() > 0.3  # and the hot pages are a small set


def test_ycsb_f_reads_before_each_update(ycsb_a, ycsb_f):
    a, f = ycsb_a.meta, ycsb_f.meta
    assert a["read_modify_write"] is False and f["read_modify_write"] is True
    # A: 50% reads / 50% blind updates; F: 50% reads / 50% read-then-update
    assert a["record_reads"] / a["updates"] == pytest.approx(1.0, abs=0.05)
    assert f["record_reads"] / f["updates"] == pytest.approx(2.0, abs=0.08)
    assert a["db_statements"] / a["updates"] == pytest.approx(2.0, abs=0.1)
    assert f["db_statements"] / f["updates"] == pytest.approx(3.0, abs=0.15)
    # F spends more statements, hence more time, per written block
    span_a = ycsb_a.ts_us[-1] - ycsb_a.ts_us[0]
    span_f = ycsb_f.ts_us[-1] - ycsb_f.ts_us[0]
    assert span_f > 1.3 * span_a
    assert (ycsb_f.op == OP_READ).any() and (ycsb_a.op == OP_READ).any()


def test_ycsb_buffer_pool_and_doublewrite_knobs():
    small = generate("ycsb_a", capacity_blocks=CAP, n_writes=4 * CAP, seed=0, pool_fraction=0.05)
    big = generate("ycsb_a", capacity_blocks=CAP, n_writes=4 * CAP, seed=0, pool_fraction=0.5)
    assert small.meta["page_reads"] / small.meta["db_statements"] > big.meta["page_reads"] / big.meta["db_statements"]
    nodw = generate("ycsb_a", capacity_blocks=CAP, n_writes=4 * CAP, seed=0, doublewrite_pages=0)
    assert nodw.meta["doublewrite_block_writes"] == 0 and nodw.meta["layout_doublewrite"][1] == 0
    # a tiny redo log forces synchronous checkpoint flushes
    sync = generate(
        "ycsb_a",
        capacity_blocks=CAP,
        n_writes=4 * CAP,
        seed=0,
        redo_fraction=0.0005,
        redo_records_per_block=1,
        flush_every=0,
    )
    assert sync.meta["sync_flushes"] > 0


# -- varmail ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def varmail():
    return generate("varmail", capacity_blocks=CAP, n_writes=8 * CAP, seed=0)


def test_varmail_journal_ring_is_sequential(varmail):
    t = varmail
    j0, j1 = _region(t, "layout_journal")
    ring0, ring_n = j0 + 1, j1 - j0 - 1  # block j0 is the journal superblock
    jr = np.flatnonzero((t.op == OP_WRITE) & (t.lba >= ring0) & (t.lba < j1))[:-1]
    start = t.lba[jr] - ring0
    end = (start + t.nblocks[jr]) % ring_n
    assert (start[1:] == end[:-1]).all()  # each transaction starts where the previous ended
    assert (t.lba[jr] + t.nblocks[jr] <= j1).all()
    w = t.block_writes
    ring = w[(w >= ring0) & (w < j1)]
    assert set(np.unique(np.diff(ring))) <= {1, -(ring_n - 1)} and (np.diff(ring) < 0).sum() >= 2


def test_varmail_metadata_is_hottest(varmail):
    t = varmail
    w = t.block_writes
    counts = np.bincount(w, minlength=CAP)
    _, meta_end = _region(t, "layout_metadata")
    j0, j1 = _region(t, "layout_journal")
    d0, d1 = _region(t, "layout_data")
    top = np.argsort(counts)[::-1][:20]
    assert ((top < meta_end) | (top == j0)).all()  # metadata blocks and the journal superblock
    g = t.meta["layout_gdt"][0]
    assert counts[g] == counts.max()
    i0, i1 = _region(t, "layout_inodes")
    assert counts[i0:i1].mean() > 3 * counts[d0:d1].mean()
    assert counts[:meta_end].mean() > counts[j0 + 1 : j1].mean() > counts[d0:d1][counts[d0:d1] > 0].mean() * 0.5
    # the counters cover the whole last iteration, which the trace cuts at exactly n_writes
    total = t.meta["journal_block_writes"] + t.meta["checkpoint_block_writes"] + t.meta["data_block_writes"]
    assert 0 <= total - w.size < 200


def test_varmail_data_blocks_are_short_lived(varmail):
    t = varmail
    w = t.block_writes
    d0, d1 = _region(t, "layout_data")
    dist = _reuse_distance(w)
    data = (w >= d0) & (w < d1) & (dist >= 0)
    u = generate("uniform", capacity_blocks=CAP, n_writes=8 * CAP, seed=0).block_writes
    du = _reuse_distance(u)
    assert np.median(dist[data]) < 0.5 * np.median(du[du >= 0])
    # reads of whole files are issued
    reads = t.op == OP_READ
    assert reads.any() and (t.lba[reads] >= d0).all()


def test_varmail_allocator_and_trims():
    ff = generate("varmail", capacity_blocks=CAP, n_writes=4 * CAP, seed=0)
    nf = generate("varmail", capacity_blocks=CAP, n_writes=4 * CAP, seed=0, allocator="next_fit")
    d0, _ = _region(ff, "layout_data")
    wss = [np.unique(x.block_writes[x.block_writes >= d0]).size for x in (ff, nf)]
    assert wss[1] > 1.5 * wss[0]  # next fit laps the data area, first fit reuses freed blocks
    tr = generate("varmail", capacity_blocks=CAP, n_writes=CAP, seed=0, emit_trims=True)
    trims = tr.op == OP_TRIM
    assert trims.any() and (tr.lba[trims] >= d0).all()
    assert tr.meta["trim_blocks"] >= tr.nblocks[trims].sum()
    # trims do not count as writes and do not change the written stream
    np.testing.assert_array_equal(
        tr.block_writes, generate("varmail", capacity_blocks=CAP, n_writes=CAP, seed=0).block_writes
    )


# -- phase shift -------------------------------------------------------------------------------------------
def test_phase_shift_moves_the_hot_set():
    t = generate("phase_shift", capacity_blocks=CAP, n_writes=4 * CAP, seed=0, phase_writes=CAP)
    assert t.meta["phase_starts"] == [0, CAP, 2 * CAP, 3 * CAP]
    assert t.meta["phase_thetas"] == [1.01, 0.8, 1.01, 0.8]
    w = t.block_writes
    top = [set(np.argsort(np.bincount(w[i * CAP : (i + 1) * CAP], minlength=CAP))[-50:]) for i in range(4)]
    assert len(top[0] & top[1]) < 10 and len(top[0] & top[2]) < 10 and len(top[1] & top[3]) < 10
    # skew differs between the phases: theta 1.01 concentrates more on the top ranks
    share = [np.sort(np.bincount(w[i * CAP : (i + 1) * CAP]))[::-1][:100].sum() / CAP for i in range(2)]
    assert share[0] > share[1] * 1.3
    # default phase length: 2 x capacity
    d = generate("phase_shift", capacity_blocks=4096, n_writes=5 * 4096, seed=0)
    assert d.meta["phase_starts"] == [0, 8192, 16384]


def test_phase_shift_without_reshuffle_keeps_the_hot_set():
    t = generate("phase_shift", capacity_blocks=CAP, n_writes=3 * CAP, seed=0, phase_writes=CAP, reshuffle=False)
    w = t.block_writes
    top = [set(np.argsort(np.bincount(w[i * CAP : (i + 1) * CAP], minlength=CAP))[-20:]) for i in range(3)]
    assert len(top[0] & top[2]) > 10 and len(top[0] & top[1]) > 10


# -- errors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind, params, match",
    [
        ("zipf", {"thta": 1.0}, r"generator 'zipf': unknown parameter\(s\) \['thta'\]; accepted: theta, wss_fraction"),
        ("zipf", {"theta": -1.0}, r"theta must be >= 0 \(and finite; 0 = uniform\), got -1.0"),
        ("zipf", {"theta": float("inf")}, "theta must be >= 0"),
        ("zipf", {"wss_fraction": 1.5}, r"wss_fraction must be in \(0, 1\]"),
        ("zipf", {"request_blocks": 0}, "request_blocks must be >= 1"),
        ("uniform", {"wss_fraction": 0}, r"wss_fraction must be in \(0, 1\]"),
        ("hotcold", {"hot_fraction": 1.5}, r"hot_fraction must be in \(0, 1\)"),
        ("hotcold", {"hot_fraction": 0.0}, r"hot_fraction must be in \(0, 1\)"),
        ("hotcold", {"hot_traffic": 1.2}, r"hot_traffic must be in \[0, 1\]"),
        ("ycsb_a", {"read_fraction": 1.0}, r"read_fraction must be in \[0, 1\)"),
        ("ycsb_f", {"pool_fraction": 0}, r"pool_fraction must be in \(0, 1\]"),
        ("ycsb_a", {"zipf_theta": 0}, "zipf_theta must be > 0"),
        ("ycsb_a", {"doublewrite_pages": 1}, "doublewrite_pages must be 0"),
        ("ycsb_a", {"records_per_page": 0.5}, "records_per_page must be an integer"),
        ("varmail", {"allocator": "best_fit"}, "allocator must be 'first_fit' or 'next_fit'"),
        ("varmail", {"n_files": 10**6}, "too small for 1000000 files"),
        ("varmail", {"journal_fraction": 0.7}, r"journal_fraction must be in \(0, 0.5\)"),
        ("phase_shift", {"phase_writes": 0}, "phase_writes must be >= 1"),
        ("phase_shift", {"theta_b": -0.5}, r"theta_b must be in \[0, inf\), got -0.5"),
    ],
)
def test_bad_parameters_are_explained(kind, params, match):
    with pytest.raises(ValueError, match=match):
        generate(kind, capacity_blocks=CAP, n_writes=10, **params)


def test_bad_kind_and_sizes_are_explained():
    with pytest.raises(ValueError, match="unknown generator 'nope'; known: .*zipf"):
        generate("nope", capacity_blocks=CAP, n_writes=10)
    with pytest.raises(ValueError, match="n_writes must be >= 1"):
        generate("zipf", capacity_blocks=CAP, n_writes=0)
    with pytest.raises(ValueError, match="capacity_blocks must be an integer"):
        generate("zipf", capacity_blocks=10.5, n_writes=10)
    with pytest.raises(ValueError, match="too small"):
        generate("ycsb_a", capacity_blocks=500, n_writes=10)
    with pytest.raises(ValueError, match="too small"):
        generate("varmail", capacity_blocks=100, n_writes=10)
    with pytest.raises(ValueError, match="Zipf needs at least one item"):
        ZipfSampler(0, 1.0)
    with pytest.raises(ValueError, match="method must be 'alias' or 'rejection'"):
        ZipfSampler(10, 1.0, method="gray")


# -- configs -------------------------------------------------------------------------------------------------
GENERATED_CONFIGS = sorted(p.stem for p in CONF.glob("*.yaml") if OmegaConf.load(p).get("source") == "generator")


def test_every_generator_has_a_config():
    assert set(GENERATORS) <= set(GENERATED_CONFIGS)


@pytest.mark.parametrize("name", GENERATED_CONFIGS)
def test_config_schema_and_defaults(name):
    path = CONF / f"{name}.yaml"
    text = path.read_text().splitlines()
    assert text[0] == "# @package workload" and text[1].startswith("# ")
    cfg = OmegaConf.to_container(OmegaConf.load(path))
    assert list(cfg) == ["name", "source", "generator", "capacity_blocks", "write_volume", "seed", "params"]
    assert cfg["name"] == name
    assert cfg["capacity_blocks"] == 262144 and cfg["write_volume"] == 16.0 and cfg["seed"] == 0
    defaults = default_params(cfg["generator"])
    if cfg["generator"] == name:
        assert cfg["params"] == defaults  # the generator's own config lists every parameter at its default
    else:
        # a preset of another generator (e.g. MINOS's zipf_h): every parameter listed, some changed
        assert list(cfg["params"]) == list(defaults) and cfg["params"] != defaults


@pytest.mark.parametrize("name", GENERATED_CONFIGS)
def test_every_generated_config_loads_at_small_scale(name):
    from dogi_ml.traces.workload import load_workload

    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    cfg.capacity_blocks = 4096
    cfg.write_volume = 2
    t = load_workload(cfg, cache_dir=None)
    assert t.block_writes.size == 2 * 4096
    assert t.max_lba < 4096 and t.meta["capacity_blocks"] == 4096 and t.meta["generator"] == cfg.generator


# -- speed -----------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_default_scale_is_fast(kind):
    cap = 262144
    generate(kind, capacity_blocks=4096, n_writes=4096, seed=0)  # compile
    t0 = time.perf_counter()
    t = generate(kind, capacity_blocks=cap, n_writes=16 * cap, seed=0)
    elapsed = time.perf_counter() - t0
    assert t.block_writes.size == 16 * cap
    assert elapsed < 6.0, f"{kind}: {elapsed:.1f} s for {16 * cap:,} writes"
