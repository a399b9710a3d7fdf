"""Future-knowledge annotation of a block-write stream.

For the block write at logical time ``i`` (the i-th user-written block):

- ``inv[i]``: its invalidation time, i.e. user-written blocks until the next write of the same
  LBA (``j - i`` for the next write at ``j``); :data:`NEVER` if the LBA is never written again.
- ``prev[i]``: the time of the previous write of the same LBA, ``-1`` if none.

One forward pass in Numba, O(max LBA) extra memory, in chunks that carry each LBA's last write
(so a long stream shows progress; the result does not depend on the chunking).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import numba as nb
import numpy as np

#: invalidation time of a block that is never overwritten; far below int64 overflow so that
#: ``now + NEVER`` stays positive.
NEVER = np.int64(1 << 60)


#: writes per chunk of the pass (about 0.1-0.5 s each)
CHUNK_WRITES = 1 << 24


@nb.njit(cache=True)
def _annotate(writes, start, stop, last, inv, prev):
    """Writes ``start .. stop - 1``; ``last[lba]`` is the LBA's latest write before ``start``."""
    for i in range(start, stop):
        lba = writes[i]
        p = last[lba]
        prev[i] = p
        if p >= 0:
            inv[p] = i - p
        last[lba] = i
        inv[i] = NEVER


def annotate(writes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(inv, prev)`` for a stream of block-write LBAs (see module docstring)."""
    writes = np.ascontiguousarray(writes, dtype=np.int64)
    n = writes.shape[0]
    inv = np.empty(n, np.int64)
    prev = np.empty(n, np.int64)
    if n:
        if writes.min() < 0:
            raise ValueError("annotate: negative LBA in the write stream")
        from dogi_ml.progress import bar

        last = np.full(int(writes.max()) + 1, -1, np.int64)
        # a bar only for streams long enough to take a second or more
        with bar(
            n, desc="annotate", unit="blk", requested=None if n > 2 * CHUNK_WRITES else False, unit_scale=True
        ) as progress:
            for start in range(0, n, CHUNK_WRITES):
                stop = min(n, start + CHUNK_WRITES)
                _annotate(writes, start, stop, last, inv, prev)
                progress.update(stop - start)
    return inv, prev


def stream_key(writes: np.ndarray) -> str:
    """Content hash of a write stream (for caching derived arrays)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(writes, dtype=np.int64).data)
    return h.hexdigest()


def annotate_cached(writes: np.ndarray, cache_dir: str | Path | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`annotate`, cached on disk under ``cache_dir`` by the stream's content hash."""
    if cache_dir is None:
        return annotate(writes)
    cache_dir = Path(cache_dir)
    path = cache_dir / f"annot-{stream_key(writes)}.npz"
    if path.exists():
        with np.load(path) as z:
            return z["inv"], z["prev"]
    inv, prev = annotate(writes)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # a name per writer: parallel sweep jobs may annotate the same stream at once
    tmp = path.with_name(f"{path.stem}.{os.getpid()}-{secrets.token_hex(4)}.tmp.npz")
    np.savez(tmp, inv=inv, prev=prev)
    tmp.replace(path)
    return inv, prev
