"""Synthetic workloads: determinism, exact sizes, the shapes each model promises, bad params."""
import numpy as np
import pytest

from dogi_ml.traces.generators import GENERATORS, ZipfSampler, generate
from dogi_ml.traces.trace import OP_READ, OP_TRIM, OP_WRITE

CAP = 16384


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_deterministic_exact_and_in_range(kind):
    a = generate(kind, capacity_blocks=CAP, n_writes=3 * CAP + 7, seed=5)
    b = generate(kind, capacity_blocks=CAP, n_writes=3 * CAP + 7, seed=5)
    c = generate(kind, capacity_blocks=CAP, n_writes=3 * CAP + 7, seed=6)
    np.testing.assert_array_equal(a.lba, b.lba)
    np.testing.assert_array_equal(a.op, b.op)
    assert not np.array_equal(a.block_writes, c.block_writes)
    assert a.block_writes.size == 3 * CAP + 7
    assert a.lba.min() >= 0 and a.max_lba < CAP
    assert (a.nblocks >= 1).all() and np.all(np.diff(a.ts_us) >= 0)
    assert a.meta["capacity_blocks"] == CAP and a.meta["generator"] == kind


@pytest.mark.parametrize("theta", [0.8, 1.0, 1.2])
def test_zipf_rank_frequencies_follow_theory(theta):
    n, k = 1000, 400_000
    s = ZipfSampler(n, theta, seed=1, scramble=False)
    counts = np.bincount(s.sample(k), minlength=n)
    p = np.arange(1, n + 1, dtype=float) ** -theta
    p /= p.sum()
    for rank in (0, 1, 9, 99):
        expected = p[rank] * k
        assert abs(counts[rank] - expected) < 5 * np.sqrt(expected) + 5, (rank, counts[rank], expected)
    assert counts[:10].sum() / k == pytest.approx(p[:10].sum(), abs=0.01)


def test_zipf_ranks_are_scrambled_over_addresses():
    s = ZipfSampler(10_000, 1.0, seed=3)
    hottest = s.perm[:100]
    assert hottest.max() - hottest.min() > 5000  # spread, not a contiguous hot range


def test_hotcold_split():
    t = generate("hotcold", capacity_blocks=CAP, n_writes=200_000, seed=1, hot_traffic=0.9, hot_fraction=0.1)
    counts = np.bincount(t.block_writes, minlength=CAP)
    top = np.sort(counts)[::-1][: CAP // 10].sum() / counts.sum()
    assert top == pytest.approx(0.9, abs=0.02)


def _region(t, key):
    base, size = t.meta[key]
    return base, base + size


def test_ycsb_layout_redo_doublewrite_and_pages():
    t = generate("ycsb_a", capacity_blocks=CAP, n_writes=8 * CAP, seed=0)
    writes = t.block_writes
    r0, r1 = _region(t, "layout_redo")
    d0, d1 = _region(t, "layout_doublewrite")
    p0, _ = _region(t, "layout_table")
    redo = writes[(writes >= r0) & (writes < r1)]
    steps = np.diff(redo)
    # the redo log advances by one block at a time (rewrites in between) and wraps to its start
    assert set(np.unique(steps)) <= {0, 1, -(r1 - r0 - 1)}
    assert (steps < 0).any()
    is_w = t.op == OP_WRITE
    page = is_w & (t.lba >= p0)
    page[-1] = False  # the last request is cut to make exactly n_writes blocks
    assert (t.nblocks[page] == 4).all() and ((t.lba[page] - p0) % 4 == 0).all()
    # every page flush is preceded by a doublewrite of the same batch
    dw = np.flatnonzero(is_w & (t.lba >= d0) & (t.lba < d1))
    first_page_write = np.flatnonzero(page)[0]
    assert dw.size and dw[0] < first_page_write
    # skew: the top 10% of pages take most page writes
    pages = t.lba[page]
    counts = np.sort(np.unique(pages, return_counts=True)[1])[::-1]
    assert counts[: max(1, counts.size // 10)].sum() / counts.sum() > 0.3
    assert (t.op == OP_READ).any()


def test_ycsb_f_reads_before_its_updates():
    a = generate("ycsb_a", capacity_blocks=CAP, n_writes=4 * CAP, seed=0)
    f = generate("ycsb_f", capacity_blocks=CAP, n_writes=4 * CAP, seed=0)
    # F's read-modify-writes touch more pages per update than A's blind updates miss... both read
    assert (f.op == OP_READ).sum() > 0 and (a.op == OP_READ).sum() > 0
    # per block written, F does more operations (each RMW adds a read)
    assert f.n_requests != a.n_requests


def test_varmail_journal_hot_metadata_and_short_lived_data():
    t = generate("varmail", capacity_blocks=CAP, n_writes=8 * CAP, seed=0)
    w = t.block_writes
    j0, j1 = _region(t, "layout_journal")
    journal = w[(w >= j0) & (w < j1)]
    steps = np.diff(journal)
    assert set(np.unique(steps)) <= {1, -(j1 - j0 - 1)}  # a sequential ring
    i0, i1 = _region(t, "layout_inodes")
    dat0, dat1 = _region(t, "layout_data")
    counts = np.bincount(w, minlength=CAP)
    assert counts[i0:i1].mean() > 3 * counts[dat0:dat1].mean()  # metadata is hot
    # data blocks are rewritten sooner than under uniform random writes
    from oracles.annotate import NEVER, annotate
    inv, _ = annotate(w)
    data = (w >= dat0) & (w < dat1) & (inv != NEVER)
    u = generate("uniform", capacity_blocks=CAP, n_writes=8 * CAP, seed=0).block_writes
    inv_u, _ = annotate(u)
    assert np.median(inv[data]) < np.median(inv_u[inv_u != NEVER])
    trims = generate("varmail", capacity_blocks=CAP, n_writes=CAP, seed=0, emit_trims=True)
    assert (trims.op == OP_TRIM).any()


def test_phase_shift_moves_the_hot_set():
    t = generate("phase_shift", capacity_blocks=CAP, n_writes=4 * CAP, seed=0, phase_writes=CAP)
    w = t.block_writes
    top = [set(np.argsort(np.bincount(w[i * CAP:(i + 1) * CAP], minlength=CAP))[-50:]) for i in range(4)]
    assert len(top[0] & top[1]) < 10 and len(top[0] & top[2]) < 10


def test_bad_parameters_are_explained():
    with pytest.raises(ValueError, match="unknown generator 'nope'; known: .*zipf"):
        generate("nope", capacity_blocks=CAP, n_writes=10)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['thta'\]; accepted: theta"):
        generate("zipf", capacity_blocks=CAP, n_writes=10, thta=1.0)
    with pytest.raises(ValueError, match="theta must be > 0"):
        generate("zipf", capacity_blocks=CAP, n_writes=10, theta=0)
    with pytest.raises(ValueError, match="hot_fraction must be in"):
        generate("hotcold", capacity_blocks=CAP, n_writes=10, hot_fraction=1.5)
    with pytest.raises(ValueError, match="too small|leaves"):
        generate("ycsb_a", capacity_blocks=500, n_writes=10)
