"""Future-knowledge annotation: invalidation and previous-write times."""

import helpers
import numpy as np
import pytest

from dogi_ml.oracles.annotate import NEVER, annotate, annotate_cached


def naive_annotate(writes):
    n = len(writes)
    inv = np.full(n, NEVER, np.int64)
    prev = np.full(n, -1, np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            if writes[j] == writes[i]:
                inv[i] = j - i
                break
        for j in range(i - 1, -1, -1):
            if writes[j] == writes[i]:
                prev[i] = j
                break
    return inv, prev


def test_small_example_by_hand():
    inv, prev = annotate(np.array([5, 3, 5, 5, 0, 3]))
    assert inv.tolist() == [2, 4, 1, NEVER, NEVER, NEVER]
    assert prev.tolist() == [-1, -1, 0, 2, -1, 1]


def test_matches_naive_reference():
    rng = np.random.default_rng(3)
    writes = rng.integers(0, 40, 600)
    inv, prev = annotate(writes)
    ref_inv, ref_prev = naive_annotate(writes)
    np.testing.assert_array_equal(inv, ref_inv)
    np.testing.assert_array_equal(prev, ref_prev)


@pytest.mark.parametrize("chunk", [1, 7, 64, 599, 600, 1 << 24])
def test_chunked_pass_equals_the_naive_reference(monkeypatch, chunk):
    """The pass runs in chunks carrying each LBA's last write (for its progress bar): any chunk
    size gives the same arrays, chunk boundaries included."""
    import importlib

    # the module itself (dogi_ml.oracles re-exports the function under the same name)
    monkeypatch.setattr(importlib.import_module("dogi_ml.oracles.annotate"), "CHUNK_WRITES", chunk)
    writes = np.random.default_rng(5).integers(0, 30, 600)
    inv, prev = annotate(writes)
    ref_inv, ref_prev = naive_annotate(writes)
    np.testing.assert_array_equal(inv, ref_inv)
    np.testing.assert_array_equal(prev, ref_prev)


def test_invariants_on_a_larger_stream():
    zipf_writes = helpers.zipf_writes(5000, 100_000)
    inv, prev = annotate(zipf_writes)
    n = zipf_writes.size
    idx = np.arange(n)
    live = inv != NEVER
    # the next write of the same LBA points back at this one
    np.testing.assert_array_equal(prev[idx[live] + inv[live]], idx[live])
    assert (inv > 0).all()
    # exactly one never-overwritten write per distinct LBA
    assert (~live).sum() == np.unique(zipf_writes).size


def test_empty_and_negative():
    inv, prev = annotate(np.array([], np.int64))
    assert inv.size == prev.size == 0
    with pytest.raises(ValueError, match="negative LBA"):
        annotate(np.array([1, -2]))


def test_cache_round_trip(tmp_path):
    writes = np.random.default_rng(0).integers(0, 100, 5000)
    a = annotate_cached(writes, tmp_path)
    assert len(list(tmp_path.glob("annot-*.npz"))) == 1
    b = annotate_cached(writes, tmp_path)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
