"""Synthetic block workloads, seeded and deterministic.

Every generator returns a :class:`Trace` with exactly ``n_writes`` user-written 4 KiB blocks
(the last request is shortened if needed) over ``[0, capacity_blocks)``; ``meta`` records the
generator, its parameters and ``capacity_blocks``. Hot loops (buffer pool, file system) are in
Numba; random draws come from ``numpy.random.Generator(PCG64(seed))``.

- ``uniform``: uniform random overwrites over a working set.
- ``zipf``: Zipf(theta) over a working set, ranks scrambled over the addresses, as fio's
  ``random_distribution=zipf:theta``.
- ``hotcold``: ``hot_traffic`` of the writes go to ``hot_fraction`` of the space.
- ``ycsb_a`` / ``ycsb_f``: YCSB on an InnoDB-style database, at the block level (see
  :func:`ycsb`).
- ``varmail``: a Filebench varmail-like mail server on a journaling file system (see
  :func:`varmail`).
- ``phase_shift``: Zipf 1.01 and Zipf 0.8 alternating every ``phase_writes`` writes.
"""
from __future__ import annotations

import inspect

import numba as nb
import numpy as np

from .trace import OP_READ, OP_TRIM, OP_WRITE, Trace

REQUEST_INTERVAL_US = 10  # synthetic clock: one request every 10 µs


@nb.njit(cache=True)
def _alias_tables(weights):
    """Vose's alias method: O(n) tables for O(1) sampling of a discrete distribution."""
    n = weights.shape[0]
    scaled = weights * (n / weights.sum())
    prob = np.ones(n, np.float64)
    alias = np.arange(n).astype(np.int32)
    small = np.empty(n, np.int32)
    large = np.empty(n, np.int32)
    ns = 0
    nl = 0
    for i in range(n):
        if scaled[i] < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        nl -= 1
        g = large[nl]
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        if scaled[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    # the leftovers keep probability 1 (their deficit is rounding error)
    return prob, alias


@nb.njit(cache=True)
def _alias_draw(u, prob, alias, out):
    n = prob.shape[0]
    for k in range(u.shape[0]):
        x = u[k] * n
        i = int(x)
        if i >= n:
            i = n - 1
        out[k] = i if (x - i) < prob[i] else alias[i]


class ZipfSampler:
    """Zipf(theta) over ``n`` items: P(rank i) ∝ 1 / i**theta (i = 1..n), any theta > 0.

    Ranks are scrambled over ``[0, n)`` by a seeded permutation, so hot items are spread over
    the address space as fio does. Sampling uses Walker/Vose alias tables: one uniform draw and
    one table lookup per sample (a binary search per draw costs ~1 µs at 33.5 M items).
    """

    def __init__(self, n: int, theta: float, seed: int = 0, scramble: bool = True):
        if n < 1:
            raise ValueError(f"Zipf needs at least one item, got n={n}")
        if not theta > 0:
            raise ValueError(f"Zipf theta must be > 0, got {theta}")
        self.n = int(n)
        self.theta = float(theta)
        self.rng = np.random.Generator(np.random.PCG64(seed))
        weights = np.arange(1, self.n + 1, dtype=np.float64) ** -self.theta
        self.prob, self.alias = _alias_tables(weights)
        self.perm = self.rng.permutation(self.n).astype(np.int64) if scramble else None

    def sample_ranks(self, k: int) -> np.ndarray:
        """0-based ranks (0 = most popular)."""
        out = np.empty(int(k), np.int64)
        _alias_draw(self.rng.random(int(k)), self.prob, self.alias, out)
        return out

    def sample(self, k: int) -> np.ndarray:
        """``k`` items in ``[0, n)`` (int64)."""
        r = self.sample_ranks(k)
        return self.perm[r] if self.perm is not None else r


# -- helpers --------------------------------------------------------------------------------------
def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _single_block_trace(lbas: np.ndarray, name: str) -> Trace:
    n = lbas.size
    return Trace(ts_us=np.arange(n, dtype=np.int64) * REQUEST_INTERVAL_US, lba=lbas,
                 nblocks=np.ones(n, np.int32), op=np.full(n, OP_WRITE, np.uint8),
                 volume=np.zeros(n, np.int32), name=name)


def _working_set(capacity: int, wss_fraction: float) -> int:
    if not 0 < wss_fraction <= 1:
        raise ValueError(f"wss_fraction must be in (0, 1], got {wss_fraction}")
    return max(1, int(capacity * wss_fraction))


def _trim_to_writes(lba, nblocks, op, n_writes):
    """Cut the request arrays right after the ``n_writes``-th written block."""
    w = np.where(op == OP_WRITE, nblocks.astype(np.int64), 0)
    cum = np.cumsum(w)
    last = int(np.searchsorted(cum, n_writes))  # first request reaching n_writes
    lba, nblocks, op = lba[:last + 1].copy(), nblocks[:last + 1].copy(), op[:last + 1].copy()
    excess = int(cum[last] - n_writes)
    if excess:
        nblocks[-1] -= excess
    return lba, nblocks, op


def _requests_trace(lba, nblocks, op, n_writes, name) -> Trace:
    lba, nblocks, op = _trim_to_writes(lba, nblocks, op, n_writes)
    n = lba.size
    return Trace(ts_us=np.arange(n, dtype=np.int64) * REQUEST_INTERVAL_US, lba=lba, nblocks=nblocks,
                 op=op, volume=np.zeros(n, np.int32), name=name)


# -- simple distributions ---------------------------------------------------------------------------
def uniform(capacity_blocks, n_writes, seed=0, wss_fraction=1.0):
    """Uniform random 4 KiB overwrites over the first ``wss_fraction`` of the space."""
    wss = _working_set(capacity_blocks, wss_fraction)
    return _single_block_trace(_rng(seed).integers(0, wss, n_writes, dtype=np.int64), "uniform")


def zipf(capacity_blocks, n_writes, seed=0, theta=1.0, wss_fraction=1.0, request_blocks=1):
    """Zipf(theta) writes of ``request_blocks`` blocks (aligned) over a working set."""
    wss = _working_set(capacity_blocks, wss_fraction)
    if request_blocks < 1 or request_blocks > wss:
        raise ValueError(f"request_blocks must be in [1, {wss}], got {request_blocks}")
    slots = wss // request_blocks
    n_req = -(-n_writes // request_blocks)
    lba = ZipfSampler(slots, theta, seed).sample(n_req) * request_blocks
    if request_blocks == 1:
        return _single_block_trace(lba, "zipf")
    nblocks = np.full(n_req, request_blocks, np.int32)
    return _requests_trace(lba, nblocks, np.full(n_req, OP_WRITE, np.uint8), n_writes, "zipf")


def hotcold(capacity_blocks, n_writes, seed=0, hot_traffic=0.8, hot_fraction=0.2):
    """``hot_traffic`` of the writes go uniformly to a hot set of ``hot_fraction`` of the
    space (scattered over the addresses), the rest uniformly to the cold set."""
    if not 0 < hot_fraction < 1:
        raise ValueError(f"hot_fraction must be in (0, 1), got {hot_fraction}")
    if not 0 <= hot_traffic <= 1:
        raise ValueError(f"hot_traffic must be in [0, 1], got {hot_traffic}")
    rng = _rng(seed)
    nhot = max(1, int(capacity_blocks * hot_fraction))
    perm = rng.permutation(capacity_blocks).astype(np.int64)
    is_hot = rng.random(n_writes) < hot_traffic
    idx = np.where(is_hot, rng.integers(0, nhot, n_writes), rng.integers(nhot, capacity_blocks, n_writes))
    return _single_block_trace(perm[idx], "hotcold")


def phase_shift(capacity_blocks, n_writes, seed=0, theta_a=1.01, theta_b=0.8, phase_writes=None,
                reshuffle=True):
    """Zipf ``theta_a`` and Zipf ``theta_b`` alternating every ``phase_writes`` writes (default
    2 x capacity). With ``reshuffle`` each phase scrambles ranks anew, so the hot set moves."""
    phase = int(phase_writes or 2 * capacity_blocks)
    if phase < 1:
        raise ValueError(f"phase_writes must be >= 1, got {phase_writes}")
    samplers = [ZipfSampler(capacity_blocks, theta_a, seed), ZipfSampler(capacity_blocks, theta_b, seed + 1)]
    rng = _rng(seed + 2)
    out = np.empty(n_writes, np.int64)
    k = 0
    for start in range(0, n_writes, phase):
        s = samplers[k % 2]
        ranks = s.sample_ranks(min(phase, n_writes - start))
        perm = rng.permutation(capacity_blocks).astype(np.int64) if reshuffle else s.perm
        out[start:start + ranks.size] = perm[ranks]
        k += 1
    return _single_block_trace(out, "phase_shift")


# -- YCSB on an InnoDB-style database ---------------------------------------------------------------
PAGE_BLOCKS = 4  # 16 KiB InnoDB pages


@nb.njit(cache=True)
def _ycsb_kernel(ops, pages, n_pages, pool_pages, table_base, redo_base, redo_blocks, dw_base,
                 dw_pages, redo_per_block, flush_every, flush_batch, n_writes,
                 out_lba, out_nb, out_op):
    # buffer pool: CLOCK over frames; page -> frame map; dirty bits; a FIFO flush list of dirty
    # pages in the order they became dirty (InnoDB's flush list is ordered by oldest LSN)
    frame_page = np.full(pool_pages, -1, np.int64)
    frame_ref = np.zeros(pool_pages, np.uint8)
    page_frame = np.full(n_pages, -1, np.int64)
    dirty = np.zeros(n_pages, np.uint8)
    flush_list = np.empty(n_pages + 1, np.int64)
    fl_head = 0
    fl_tail = 0
    fl_cap = n_pages + 1
    hand = 0
    used = 0
    redo_pos = 0
    redo_fill = 0
    written = 0
    k = 0
    batch = np.empty(flush_batch, np.int64)
    for i in range(ops.shape[0]):
        if written >= n_writes:
            break
        page = pages[i]
        # -- fetch the page into the pool (a read request on a miss)
        if page_frame[page] < 0:
            out_lba[k] = table_base + page * PAGE_BLOCKS
            out_nb[k] = PAGE_BLOCKS
            out_op[k] = 0
            k += 1
            if used < pool_pages:
                f = used
                used += 1
            else:
                while True:  # CLOCK: skip recently referenced frames
                    if frame_ref[hand] == 0:
                        break
                    frame_ref[hand] = 0
                    hand = (hand + 1) % pool_pages
                f = hand
                hand = (hand + 1) % pool_pages
                victim = frame_page[f]
                page_frame[victim] = -1
                if dirty[victim] == 1:
                    # single-page flush on eviction: doublewrite slot, then in place
                    out_lba[k] = dw_base
                    out_nb[k] = PAGE_BLOCKS
                    out_op[k] = 1
                    k += 1
                    out_lba[k] = table_base + victim * PAGE_BLOCKS
                    out_nb[k] = PAGE_BLOCKS
                    out_op[k] = 1
                    k += 1
                    written += 2 * PAGE_BLOCKS
                    dirty[victim] = 2  # flushed; still queued in the flush list (skipped later)
            frame_page[f] = page
            page_frame[page] = f
        frame_ref[page_frame[page]] = 1
        if ops[i] == 0:
            continue
        # -- update: dirty the page, commit a redo record (the current log block is rewritten
        # at every commit until it is full, then the log moves on, wrapping around)
        if dirty[page] != 1:
            if dirty[page] == 0:
                flush_list[fl_tail] = page
                fl_tail = (fl_tail + 1) % fl_cap
            dirty[page] = 1
        out_lba[k] = redo_base + redo_pos
        out_nb[k] = 1
        out_op[k] = 1
        k += 1
        written += 1
        redo_fill += 1
        if redo_fill == redo_per_block:
            redo_fill = 0
            redo_pos = (redo_pos + 1) % redo_blocks
        # -- page cleaner: every flush_every updates, flush the oldest dirty pages as one batch
        if flush_every > 0 and i % flush_every == flush_every - 1:
            nbatch = 0
            while fl_head != fl_tail and nbatch < flush_batch:
                p = flush_list[fl_head]
                fl_head = (fl_head + 1) % fl_cap
                if dirty[p] == 1:
                    batch[nbatch] = p
                    nbatch += 1
                dirty[p] = 0
            if nbatch > 0:
                # the whole batch goes to the doublewrite area first (sequential), then in place
                n_dw = min(nbatch, dw_pages)
                out_lba[k] = dw_base
                out_nb[k] = n_dw * PAGE_BLOCKS
                out_op[k] = 1
                k += 1
                written += n_dw * PAGE_BLOCKS
                for b in range(nbatch):
                    out_lba[k] = table_base + batch[b] * PAGE_BLOCKS
                    out_nb[k] = PAGE_BLOCKS
                    out_op[k] = 1
                    k += 1
                    written += PAGE_BLOCKS
    return k, written


def ycsb(capacity_blocks, n_writes, seed=0, read_fraction=0.5, read_modify_write=False,
         zipf_theta=0.99, records_per_page=16, pool_fraction=0.1, redo_fraction=0.02,
         doublewrite_pages=128, redo_records_per_block=16, flush_every=64, flush_batch=32,
         name="ycsb"):
    """YCSB at the block level of an InnoDB-style database.

    The model: records keyed 0..R-1, ``records_per_page`` per 16 KiB page in a tablespace that
    fills the space left by a circular redo log (``redo_fraction``) and a doublewrite area
    (``doublewrite_pages`` pages). Operations pick records with YCSB's scrambled zipfian
    (``zipf_theta`` = 0.99). A read touches the record's page; an update dirties it and commits
    a redo record, rewriting the current 4 KiB log block (``redo_records_per_block`` commits per
    block, then the log advances and wraps). YCSB-A mixes reads and updates; YCSB-F replaces
    updates by read-modify-writes (a read, then an update of the same record). Pages live in a
    CLOCK buffer pool of ``pool_fraction`` of the table; a miss reads the page. Dirty pages
    are written back by a page cleaner every ``flush_every`` operations (the ``flush_batch``
    oldest dirty pages: first sequentially into the doublewrite area, then each in place) and
    on eviction (doublewrite slot, then in place).

    Simplified away: B-tree splits and secondary indexes, undo logs and purge, checkpoint age
    limits, adaptive flushing, and log-block padding.
    """
    if not 0 <= read_fraction < 1:
        raise ValueError(f"read_fraction must be in [0, 1), got {read_fraction}")
    if not 0 < pool_fraction <= 1:
        raise ValueError(f"pool_fraction must be in (0, 1], got {pool_fraction}")
    if not 0 < redo_fraction < 0.5:
        raise ValueError(f"redo_fraction must be in (0, 0.5), got {redo_fraction}")
    for pname, v in (("records_per_page", records_per_page), ("doublewrite_pages", doublewrite_pages),
                     ("redo_records_per_block", redo_records_per_block), ("flush_batch", flush_batch)):
        if int(v) < 1:
            raise ValueError(f"{pname} must be >= 1, got {v}")
    redo_blocks = max(1, int(capacity_blocks * redo_fraction))
    dw_blocks = doublewrite_pages * PAGE_BLOCKS
    table_blocks = capacity_blocks - redo_blocks - dw_blocks
    n_pages = table_blocks // PAGE_BLOCKS
    if n_pages < 16:
        raise ValueError(f"capacity_blocks={capacity_blocks} leaves {n_pages} table pages after the redo log "
                         f"({redo_blocks} blocks) and doublewrite area ({dw_blocks} blocks); give at least "
                         f"{redo_blocks + dw_blocks + 64} blocks or shrink doublewrite_pages")
    pool_pages = max(1, int(n_pages * pool_fraction))
    # layout: [doublewrite | redo log | tablespace]
    dw_base, redo_base, table_base = 0, dw_blocks, dw_blocks + redo_blocks
    n_records = n_pages * records_per_page
    sampler = ZipfSampler(n_records, zipf_theta, seed)
    rng = _rng(seed + 1)
    out_lba, out_nb, out_op = [], [], []
    written = 0
    # operations come in rounds; each round writes at most ~1.3 blocks per op, so a few rounds
    # reach n_writes; the buffer pool state must carry over, so we simulate in one call per
    # round on a growing op stream
    n_ops = int(n_writes * 2.5) + 1024
    while True:
        keys = sampler.sample(n_ops)
        is_update = rng.random(n_ops) >= read_fraction
        if read_modify_write:
            # F: an RMW is a read of the record followed by its update
            reps = np.where(is_update, 2, 1)
            starts = np.cumsum(reps) - reps
            keys = np.repeat(keys, reps)
            ops = np.repeat(is_update.astype(np.uint8), reps)
            ops[starts[is_update]] = 0
        else:
            ops = is_update.astype(np.uint8)
        pages = keys // records_per_page
        cap = 4 * ops.size + 16
        lba = np.empty(cap, np.int64)
        nbk = np.empty(cap, np.int32)
        op = np.empty(cap, np.uint8)
        k, written = _ycsb_kernel(ops, pages, n_pages, pool_pages, table_base, redo_base, redo_blocks,
                                  dw_base, doublewrite_pages, int(redo_records_per_block),
                                  int(flush_every), int(flush_batch), int(n_writes), lba, nbk, op)
        if written >= n_writes:
            out_lba, out_nb, out_op = lba[:k], nbk[:k], op[:k]
            break
        n_ops *= 2  # not enough operations (read-heavy mix): retry with a longer stream
    op_codes = np.where(out_op == 1, OP_WRITE, OP_READ).astype(np.uint8)
    trace = _requests_trace(out_lba, out_nb, op_codes, n_writes, name)
    trace.meta.update({"layout_doublewrite": [dw_base, dw_blocks], "layout_redo": [redo_base, redo_blocks],
                       "layout_table": [table_base, n_pages * PAGE_BLOCKS]})
    return trace


def ycsb_a(capacity_blocks, n_writes, seed=0, **params):
    """YCSB-A (50% reads, 50% updates) on the InnoDB model of :func:`ycsb`."""
    params.setdefault("read_fraction", 0.5)
    return ycsb(capacity_blocks, n_writes, seed, read_modify_write=False, name="ycsb_a", **params)


def ycsb_f(capacity_blocks, n_writes, seed=0, **params):
    """YCSB-F (50% reads, 50% read-modify-writes) on the InnoDB model of :func:`ycsb`."""
    params.setdefault("read_fraction", 0.5)
    return ycsb(capacity_blocks, n_writes, seed, read_modify_write=True, name="ycsb_f", **params)


# -- varmail-like mail server on a journaling file system ------------------------------------------
@nb.njit(cache=True)
def _varmail_kernel(actions, file_pick, sizes, n_files, data_base, data_blocks, journal_base,
                    journal_blocks, inode_base, inodes_per_block, bitmap_base, dir_base, dir_blocks,
                    checkpoint_every, emit_trims, n_writes, out_lba, out_nb, out_op):
    max_file = 64
    file_blocks = np.full((n_files, max_file), -1, np.int64)
    file_len = np.zeros(n_files, np.int64)
    used = np.zeros(data_blocks, np.uint8)
    cursor = 0  # lowest possibly-free data block (first-fit hint)
    jpos = 0
    n_meta = inode_base + (n_files + inodes_per_block - 1) // inodes_per_block
    meta_dirty = np.zeros(n_meta + dir_blocks + data_blocks // 32768 + 2, np.uint8)
    dirty_list = np.empty(meta_dirty.shape[0], np.int64)
    n_dirty = 0
    since_ckpt = 0
    written = 0
    k = 0
    for i in range(actions.shape[0]):
        if written >= n_writes:
            break
        f = file_pick[i]
        a = actions[i]
        if a == 3:
            # read the whole file
            for b in range(file_len[f]):
                out_lba[k] = data_base + file_blocks[f, b]
                out_nb[k] = 1
                out_op[k] = 0
                k += 1
            continue
        if a == 0:
            # delete: free the file's blocks (optionally trimmed)
            for b in range(file_len[f]):
                d = file_blocks[f, b]
                used[d] = 0
                cursor = min(cursor, d)
                if emit_trims:
                    out_lba[k] = data_base + d
                    out_nb[k] = 1
                    out_op[k] = 2
                    k += 1
                file_blocks[f, b] = -1
            file_len[f] = 0
            add = 0
        elif a == 1:
            # create (replace the slot's file with a new one) and write it
            for b in range(file_len[f]):
                used[file_blocks[f, b]] = 0
                cursor = min(cursor, file_blocks[f, b])
                file_blocks[f, b] = -1
            file_len[f] = 0
            add = sizes[i]
        else:
            add = sizes[i]  # append
        add = min(add, max_file - file_len[f])
        # first-fit allocation of `add` data blocks (freed blocks are reused first, as a
        # file system allocating near its goal does), written as runs of contiguous blocks
        run_start = -1
        run_len = 0
        for _ in range(add):
            while cursor < data_blocks and used[cursor] == 1:
                cursor += 1
            if cursor == data_blocks:
                break  # full: the append is cut short
            d = cursor
            used[d] = 1
            cursor += 1
            file_blocks[f, file_len[f]] = d
            file_len[f] += 1
            if run_len > 0 and d == run_start + run_len:
                run_len += 1
            else:
                if run_len > 0:
                    out_lba[k] = data_base + run_start
                    out_nb[k] = run_len
                    out_op[k] = 1
                    k += 1
                    written += run_len
                run_start = d
                run_len = 1
            # the data bitmap block of d becomes dirty
            bm = bitmap_base + d // 32768
            if meta_dirty[bm] == 0:
                meta_dirty[bm] = 1
                dirty_list[n_dirty] = bm
                n_dirty += 1
        if run_len > 0:
            out_lba[k] = data_base + run_start
            out_nb[k] = run_len
            out_op[k] = 1
            k += 1
            written += run_len
        # metadata: the inode block, and the directory block on create/delete
        ib = inode_base + f // inodes_per_block
        if meta_dirty[ib] == 0:
            meta_dirty[ib] = 1
            dirty_list[n_dirty] = ib
            n_dirty += 1
        nmeta = 1
        if a != 2:
            db = dir_base + (f * 2654435761) % dir_blocks
            if meta_dirty[db] == 0:
                meta_dirty[db] = 1
                dirty_list[n_dirty] = db
                n_dirty += 1
            nmeta = 2
        # fsync: a journal transaction (descriptor + metadata copies + commit) in the ring
        jlen = nmeta + 2
        for _ in range(jlen):
            out_lba[k] = journal_base + jpos
            out_nb[k] = 1
            out_op[k] = 1
            k += 1
            jpos = (jpos + 1) % journal_blocks
        written += jlen
        since_ckpt += jlen
        # checkpoint: write the dirty metadata blocks in place
        if since_ckpt >= checkpoint_every:
            since_ckpt = 0
            for j in range(n_dirty):
                out_lba[k] = dirty_list[j]
                out_nb[k] = 1
                out_op[k] = 1
                k += 1
                meta_dirty[dirty_list[j]] = 0
            written += n_dirty
            n_dirty = 0
    return k, written


def varmail(capacity_blocks, n_writes, seed=0, n_files=None, mean_file_blocks=4,
            journal_fraction=0.02, checkpoint_every=256, emit_trims=False):
    """A Filebench varmail-like mail server on a journaling file system.

    Layout: ``[journal ring | inode table | data bitmaps | directory blocks | data]``. The
    flow repeats varmail's: delete a file; create a file and append (mean
    ``mean_file_blocks``), fsync; append to a file, fsync; read a whole file. Each fsync
    commits a journal transaction (descriptor, metadata copies, commit block) sequentially in
    the ring; dirty metadata (inode, bitmap and directory blocks: the hot blocks) is written in
    place at checkpoints every ``checkpoint_every`` journal blocks. Data blocks come from a
    first-fit allocator, so the blocks of deleted mails are reused soon: short lifetimes.
    ``n_files`` defaults to a file set that fills about half of the data area.

    Simplified away: extents and indirect blocks, delayed allocation, the page cache for reads.
    """
    if mean_file_blocks < 1:
        raise ValueError(f"mean_file_blocks must be >= 1, got {mean_file_blocks}")
    if not 0 < journal_fraction < 0.5:
        raise ValueError(f"journal_fraction must be in (0, 0.5), got {journal_fraction}")
    journal_blocks = max(8, int(capacity_blocks * journal_fraction))
    inodes_per_block = 16
    dir_blocks = max(1, capacity_blocks // 4096)
    guess_data = capacity_blocks - journal_blocks
    nf = int(n_files) if n_files else max(16, guess_data // (4 * mean_file_blocks))
    inode_blocks = (nf + inodes_per_block - 1) // inodes_per_block
    bitmap_blocks = guess_data // 32768 + 1
    inode_base = journal_blocks
    bitmap_base = inode_base + inode_blocks
    dir_base = bitmap_base + bitmap_blocks
    data_base = dir_base + dir_blocks
    data_blocks = capacity_blocks - data_base
    if data_blocks < 64 * 4 or nf * mean_file_blocks * 2 > data_blocks * 2:
        raise ValueError(f"capacity_blocks={capacity_blocks} is too small for {nf} files of "
                         f"{mean_file_blocks} blocks (data area {data_blocks} blocks); lower n_files")
    rng = _rng(seed)
    n_ops = n_writes + 1024
    while True:
        # varmail's flow: delete, create+append+fsync, append+fsync, read (one of each in turn)
        actions = np.tile(np.array([0, 1, 2, 3], np.uint8), n_ops // 4 + 1)[:n_ops]
        file_pick = rng.integers(0, nf, n_ops).astype(np.int64)
        sizes = np.maximum(1, rng.geometric(1.0 / mean_file_blocks, n_ops)).astype(np.int64)
        cap = n_ops * 80 + 64
        lba = np.empty(cap, np.int64)
        nbk = np.empty(cap, np.int32)
        op = np.empty(cap, np.uint8)
        k, written = _varmail_kernel(actions, file_pick, sizes, nf, data_base, data_blocks, 0,
                                     journal_blocks, inode_base, inodes_per_block, bitmap_base,
                                     dir_base, dir_blocks, int(checkpoint_every), bool(emit_trims),
                                     int(n_writes), lba, nbk, op)
        if written >= n_writes:
            break
        n_ops *= 2
    op_codes = np.select([op[:k] == 1, op[:k] == 2], [OP_WRITE, OP_TRIM], OP_READ).astype(np.uint8)
    trace = _requests_trace(lba[:k], nbk[:k], op_codes, n_writes, "varmail")
    trace.meta.update({"layout_journal": [0, journal_blocks], "layout_inodes": [inode_base, inode_blocks],
                       "layout_bitmaps": [bitmap_base, bitmap_blocks], "layout_dirs": [dir_base, dir_blocks],
                       "layout_data": [data_base, data_blocks], "n_files": nf})
    return trace


GENERATORS = {
    "uniform": uniform,
    "zipf": zipf,
    "hotcold": hotcold,
    "ycsb_a": ycsb_a,
    "ycsb_f": ycsb_f,
    "varmail": varmail,
    "phase_shift": phase_shift,
}

_YCSB_PARAMS = ("read_fraction", "zipf_theta", "records_per_page", "pool_fraction", "redo_fraction",
                "doublewrite_pages", "redo_records_per_block", "flush_every", "flush_batch")


def accepted_params(kind: str) -> tuple[str, ...]:
    """The parameters a generator accepts (besides capacity, n_writes and seed)."""
    fn = GENERATORS[kind]
    if kind in ("ycsb_a", "ycsb_f"):
        return _YCSB_PARAMS
    return tuple(p for p in inspect.signature(fn).parameters if p not in ("capacity_blocks", "n_writes", "seed"))


def generate(kind: str, *, capacity_blocks: int, n_writes: int, seed: int = 0, **params) -> Trace:
    """Run generator ``kind``; see the module docstring for the list."""
    if kind not in GENERATORS:
        raise ValueError(f"unknown generator {kind!r}; known: {', '.join(sorted(GENERATORS))}")
    unknown = sorted(set(params) - set(accepted_params(kind)))
    if unknown:
        raise ValueError(f"generator {kind}: unknown parameter(s) {unknown}; accepted: "
                         f"{', '.join(accepted_params(kind))}")
    capacity_blocks, n_writes = int(capacity_blocks), int(n_writes)
    if capacity_blocks < 1:
        raise ValueError(f"capacity_blocks must be >= 1, got {capacity_blocks}")
    if n_writes < 1:
        raise ValueError(f"the workload must write at least one block, got n_writes={n_writes}")
    trace = GENERATORS[kind](capacity_blocks, n_writes, int(seed), **params)
    trace.name = kind
    trace.meta.update({"generator": kind, "capacity_blocks": capacity_blocks, "seed": int(seed),
                       **{f"param_{k}": v for k, v in params.items() if isinstance(v, (int, float, str))}})
    return trace
