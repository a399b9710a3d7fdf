"""Causal features, labels and sampling."""

import numpy as np
import pytest

from dogi_ml.features import labels as L
from dogi_ml.features.extract import (
    F_CHUNK_FREQ,
    F_CHUNK_READS,
    F_FREQ,
    F_LATEST_INV,
    F_LBA,
    F_PREV_LBA,
    F_RECENCY,
    F_REQ_BLOCKS,
    F_SEQ,
    F_WRITE_COUNT,
    FEATURES,
    NO_PREVIOUS,
    FeatureConfig,
    extract_features,
    history_rows,
    lba_sequences,
)
from dogi_ml.oracles.annotate import NEVER, annotate
from dogi_ml.traces.trace import OP_READ, OP_WRITE, Trace


def tiny_trace():
    # requests: write 0-1, write 5, read 0-3, write 0, write 1 (sequential after 0), write 5
    lba = np.array([0, 5, 0, 0, 1, 5])
    nb = np.array([2, 1, 4, 1, 1, 1])
    op = np.array([OP_WRITE, OP_WRITE, OP_READ, OP_WRITE, OP_WRITE, OP_WRITE])
    return Trace(np.arange(6), lba, nb, op, np.zeros(6, np.int32))


def test_features_by_hand():
    X = extract_features(tiny_trace(), FeatureConfig(capacity_blocks=8, window_blocks=3, chunk_blocks=4))
    # block writes in order: 0, 1, 5, 0, 1, 5 (times 0..5)
    assert X[:, F_LBA].tolist() == [0, 1, 5, 0, 1, 5]
    assert X[:, F_PREV_LBA].tolist() == [-1, 0, 1, 5, 0, 1]
    assert X[:, F_LATEST_INV].tolist() == [NO_PREVIOUS, NO_PREVIOUS, NO_PREVIOUS, 3, 3, 3]
    assert X[:, F_WRITE_COUNT].tolist() == [0, 0, 0, 1, 1, 1]
    assert X[:, F_REQ_BLOCKS].tolist() == [2, 2, 1, 1, 1, 1]
    assert X[:, F_SEQ].tolist() == [0, 0, 0, 0, 1, 0]  # write 1 continues write 0
    assert X[:, F_CHUNK_FREQ].tolist() == [0, 1, 0, 2, 3, 1]  # chunks of 4 blocks: {0..3}, {4..7}
    assert X[:, F_CHUNK_READS].tolist() == [0, 0, 0, 4, 4, 0]  # the read of 0-3 came before
    # window of 3 writes: times 0-2 are window 0, 3-5 window 1; freq counts this window's writes
    assert X[:, F_FREQ].tolist() == [0, 0, 0, 0, 0, 0]
    # the bitmap shifts once per window: a write in the previous window shows as bit 6
    assert X[:, F_RECENCY].tolist() == [0, 0, 0, 64, 64, 64]


def test_causality_prefix_invariance(zipf_trace):
    """A row's features never depend on anything after it: a prefix gives the same rows."""
    full = extract_features(zipf_trace)
    half = zipf_trace.select(np.arange(zipf_trace.n_requests) < zipf_trace.n_requests // 2)
    part = extract_features(half, FeatureConfig(capacity_blocks=zipf_trace.meta["capacity_blocks"]))
    np.testing.assert_array_equal(full[: part.shape[0]], part)


@pytest.fixture(scope="module")
def zipf_trace():
    from dogi_ml.traces.generators import generate

    return generate("zipf", capacity_blocks=4096, n_writes=40_000, seed=1)


def test_sampled_rows_and_sequences_match_full(zipf_trace):
    full = extract_features(zipf_trace)
    rows = np.arange(3, full.shape[0], 11)
    np.testing.assert_array_equal(extract_features(zipf_trace, rows=rows), full[rows])
    inv, prev = annotate(zipf_trace.block_writes)
    t = np.arange(prev.size)
    np.testing.assert_array_equal(full[:, F_LATEST_INV], np.where(prev >= 0, t - prev, NO_PREVIOUS))
    seq, lengths = lba_sequences(full, prev, rows, history=4)
    # the newest step is the row itself, the one before is the LBA's previous write
    np.testing.assert_array_equal(seq[:, -1], full[rows])
    has = lengths >= 2
    np.testing.assert_array_equal(seq[has, -2], full[prev[rows[has]]])
    need = history_rows(prev, rows, 4)
    seq2, len2 = lba_sequences(extract_features(zipf_trace, rows=need), prev, rows, 4, feature_rows=need)
    np.testing.assert_array_equal(seq, seq2)
    np.testing.assert_array_equal(lengths, len2)
    with pytest.raises(ValueError, match="strictly increasing"):
        extract_features(zipf_trace, rows=np.array([5, 3]))


def test_category_bounds_scale_and_double():
    cap = 33_554_432
    b = L.category_bounds(cap)
    assert b[0] == 200_000 and b[1] == cap // 100 and all(b[i + 1] == 2 * b[i] for i in range(1, len(b) - 1))
    small = L.category_bounds(262_144)
    assert small[0] == round(200_000 / 128) and small[1] == 2621
    cls = L.dogi_classes(np.array([1, 1562, 1563, 2621, 2622, 5242, NEVER]), 262_144)
    assert cls.tolist() == [0, 0, 1, 1, 2, 2, 10]


def test_c1_never_collapses_when_the_hot_threshold_reaches_one_percent():
    """The rule: every bound is the paper's (1% of capacity, doubling) or 1.5x the one below it,
    whichever is larger. DOGI's hot threshold at its cap (1% - 1 block) used to leave c1 one block."""
    cap = 262_144
    one = cap // 100
    paper = L.category_bounds(cap)[1:].tolist()
    assert L.category_bounds(cap, 1747)[1:].tolist() == paper  # up to 2/3 of 1%: the paper's ladder
    assert L.category_bounds(cap, 1748)[1:].tolist() != paper
    b = L.category_bounds(cap, one - 1)  # the old cap: c1 was (2620, 2621]
    assert b[:4].tolist() == [2620, 3930, 5895, 4 * one]  # 1.5x, 1.5x, then the paper's 4% again
    assert b[4:].tolist() == [one << i for i in range(3, 9)]
    cls = L.dogi_classes(np.array([2620, 2621, 3930, 3931, 5895, 5896]), cap, one - 1)
    assert cls.tolist() == [0, 1, 1, 2, 2, 3]
    for mu in (1, 2620, 2621, 5000, 40_000, cap):  # far past the paper's bounds too
        b = L.category_bounds(cap, mu)
        assert b[0] == mu and np.all(b[1:] >= np.ceil(1.5 * b[:-1]))  # each category at least a third of its bound
    assert L.category_bounds(50).tolist() == [1, 2, 3, 5, 8, 12, 18, 27, 41, 62]  # no 1% bound below 100 blocks


def test_dogi_sampling_is_causal_one_in_ten_after_2x():
    cap = 1000
    n = 10_000
    prev = np.arange(n) - 2000  # every write's previous one 2000 blocks ago -> non-hot
    latest = np.arange(n) - prev
    rows = L.dogi_sample(latest, np.full(n, 5), cap, mu=100)
    assert rows[0] == 2 * cap and np.all(np.diff(rows) == 10)
    with pytest.raises(ValueError, match="no non-hot writes"):
        L.dogi_sample(latest, np.full(n, 5), cap, mu=5000)
    tr, va, te = L.time_split(np.arange(100))
    assert tr.max() < va.min() and va.max() < te.min()


def test_quantile_labels_use_training_edges():
    inv = np.arange(1000)
    edges = L.quantile_edges(inv[:700])
    cls = L.quantile_classes(inv, edges)
    assert cls[:700].min() == 0 and cls[:700].max() == 9
    assert np.all(cls[700:] == 9)  # later, longer lifetimes fall in the top bin
    assert len(FEATURES) == 12


@pytest.mark.parametrize("gen", ["varmail", "zipf"])
def test_feature_stream_matches_the_one_pass_extraction(gen):
    """Chunk by chunk (requests split across chunks included) = the whole trace at once."""
    import dogi_ml.traces.generators as G
    from dogi_ml.features.extract import FeatureStream

    trace = getattr(G, gen)(8192, 50_000, seed=3)
    full = extract_features(trace)
    stream = FeatureStream(trace)
    rng = np.random.default_rng(1)
    parts = []
    while stream.position < full.shape[0]:
        parts.append(stream.next(int(rng.integers(1, 4000))))
    assert np.array_equal(np.concatenate(parts), full)
    assert stream.next(10).shape == (0, full.shape[1])


def test_take_columns_equals_numpy_fancy_indexing():
    from dogi_ml.features.extract import take_columns

    X = np.arange(7 * 12, dtype=np.int64).reshape(7, 12) * 3 - 50
    cols = [5, 0, 11, 5]
    np.testing.assert_array_equal(take_columns(X, cols), X[:, cols])
    out = np.zeros((9, 4), np.int64)
    take_columns(X, cols, out[1:8])
    np.testing.assert_array_equal(out[1:8], X[:, cols])
    assert not out[0].any() and not out[8].any()
    with pytest.raises(ValueError, match=r"out has shape \(7, 3\), expected \(7, 4\)"):
        take_columns(X, cols, np.zeros((7, 3), np.int64))
