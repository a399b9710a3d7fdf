"""Sequence inputs and online training shared by the sequence-model schemes (PHFTL, ML-DT).

A sequence model sees, for a user write, the feature rows of its LBA's last ``history`` writes
up to and including it (oldest first, left-padded with zeros), exactly as the ``train``
pipeline builds its sequence datasets (:func:`dogi_ml.features.extract.lba_sequences`). The windows are
produced chunk by chunk in time order (:class:`SequenceStream`): causal features from a
:class:`dogi_ml.features.extract.FeatureStream`, and per LBA the rows of its previous ``history - 1``
writes, so memory is bounded by the capacity and the chunk, not by the trace (a paper-scale
trace's feature matrix would not fit; the per-LBA rows take ``capacity x (history - 1) x F``
float32, 5.6 GB at 128 GiB with 8 x 6).

Count- and time-like columns are log-transformed once per row (``log2(1 + x)``, as the models'
input scaler would do per window), so the model's scaler only standardises: the same model,
several times cheaper at inference.

:class:`SequencePolicy` is the common skeleton: windows and batched inference before a chunk,
the sampling ring (a sampled write's window is copied into it, so training never looks back into
the trace), retraining between chunks, timing. Subclasses supply labels, the model's output
mapping and their Numba placement functions.

Two threads: the windows come from the trace alone, so the next chunk's are built on a second
thread while the loop applies this one (PHFTL, ML-DT; the sampled windows are copied to the ring
before the loop instead of by it), and a chunk's inference runs in pieces, each split between the
threads (by rows of whole batches, or by LBA for per-LBA states: PHFTL cached, Shiro). Every split
keeps each batch's rows and each LBA's order: the predictions, and so the runs, are those of one
thread.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from dogi_ml.features.extract import FEATURES, FeatureConfig, FeatureStream, take_columns
from dogi_ml.intrinsics import prefetch_span
from dogi_ml.sim.policy_api import PlacementPolicy, SimContext, record, scalar_fields

from ._online import SampleRing, log_columns, ring_record

PAPER_CAPACITY = 33_554_432  # 128 GiB in 4 KiB blocks: the paper's parameters scale from it
#: rows per forward pass at inference (a policy's ``INFER_BATCH`` may differ): small batches
#: keep the activations in cache (measured ~1.5x faster than 8192 for the GRU on one core)
INFER_BATCH = 1024
#: block writes per chunk at most: the chunk's windows stay in memory (192 MiB at 8 x 6)
MAX_CHUNK = 1 << 20
#: with a model deployed, a chunk's windows are built in pieces of this many writes, the next
#: piece's on a second thread while the model infers this one's (0: one after the other)
PIPELINE_ROWS = 1 << 16
#: LBA shares (``lba % SHARES``) that split a piece's per-LBA inference between the two threads
#: (:meth:`SequencePolicy._infer_share`); the main thread starts with two thirds of them
SHARES = 64


def log_features(X: np.ndarray, names: list[str]) -> np.ndarray:
    """``sign(x) * log2(1 + |x|)`` on the columns the models' scaler logs (float32 copy)."""
    return log_features_by_column(X, names).T.copy()


def log_features_by_column(X: np.ndarray, names: list[str], columns: list[int] | None = None) -> np.ndarray:
    """:func:`log_features` transposed (float32 ``[F, n]``, one contiguous row per feature:
    the ufuncs then run over contiguous memory, several times faster than down columns) of
    ``X[:, columns]`` (all columns by default; picking them here spares numpy's slow
    column gather)."""
    X = np.asarray(X)
    columns = np.arange(X.shape[1]) if columns is None else np.asarray(columns, np.int64)
    out = np.empty((len(columns), X.shape[0]), np.float32)
    take_columns(X, columns, out.T)
    logs = set(log_columns(names))
    for c in range(len(columns)):
        col = out[c]
        if c in logs:
            neg = col < 0
            np.abs(col, out=col)
            col += np.float32(1.0)
            np.log2(col, out=col)
            np.negative(col, out=col, where=neg)
    return out


#: writes ahead whose per-LBA rows :func:`_advance_windows` hints into cache
WINDOW_PREFETCH = 8


@nb.njit(cache=True, nogil=True)
def _advance_windows(lbas, rows_t, hist, out):
    """Windows of consecutive block writes: ``out[i]`` is the LBA's previous rows (``hist[lba]``,
    oldest first, zeros where it had fewer writes) then row ``i`` (``rows_t[:, i]``), which then
    joins them."""
    H = out.shape[1]
    F = out.shape[2]
    row_floats = (H - 1) * F
    n = lbas.shape[0]
    for i in range(n):
        if i + WINDOW_PREFETCH < n:
            # the LBA's rows (168 bytes at 8 x 6: three cache lines) for the write 8 ahead
            prefetch_span(hist, lbas[i + WINDOW_PREFETCH] * row_floats, row_floats)
        lba = lbas[i]
        h = hist[lba]
        for j in range(H - 1):
            for f in range(F):
                out[i, j, f] = h[j, f]
        for f in range(F):
            out[i, H - 1, f] = rows_t[f, i]
        if H > 1:
            for j in range(H - 2):
                for f in range(F):
                    h[j, f] = h[j + 1, f]
            for f in range(F):
                h[H - 2, f] = rows_t[f, i]


class SequenceStream:
    """Per-LBA windows of a trace's block writes, chunk by chunk in time order::

    stream = SequenceStream(trace, capacity, names, history, max_rows)
    w = stream.next(n)     # float32 [n, history, F]: block writes 0 .. n-1 (a view of a buffer)
    """

    def __init__(
        self,
        trace,
        capacity: int,
        names: list[str],
        history: int,
        max_rows: int,
        log: bool = True,
        overrides: dict | None = None,
    ):
        """``log``: log-transform the count-like columns (:func:`log_features`); False keeps the
        raw values (as float32). ``overrides``: ``{feature name: per-block-write array}``
        replacing that column's values (a scheme's own definition of a feature)."""
        if int(history) < 1:
            raise ValueError(f"history must be >= 1, got {history}")
        unknown = [f for f in names if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature(s) {unknown}; known: {', '.join(FEATURES)}")
        self.log = bool(log)
        self.overrides = {}
        for name, values in (overrides or {}).items():
            if name not in names:
                raise ValueError(f"override of feature {name!r}, which is not among {names}")
            if len(values) != trace.block_writes.size:
                raise ValueError(f"override of {name!r} has {len(values)} rows, the trace {trace.block_writes.size}")
            self.overrides[names.index(name)] = np.asarray(values)  # as given (int8 flags: 1 GB at 1e9 writes)
        self.names = list(names)
        self.columns = np.array([FEATURES.index(f) for f in names], np.int64)
        self.features = FeatureStream(trace, FeatureConfig(capacity_blocks=int(capacity)))
        lbas = trace.block_writes
        if lbas.size and int(lbas.max()) >= int(capacity):
            # the engine runs such a trace on its written LBAs compacted in order
            # (pipeline.simulate.simulation_writes); the per-LBA rows must use the same numbers
            # (indexing ``hist`` with the sparse ones wrote past its end: a crash on file traces)
            uniq, dense = np.unique(lbas, return_inverse=True)
            if uniq.size > int(capacity):
                raise ValueError(f"the trace writes {uniq.size} distinct blocks, more than the capacity {capacity}")
            lbas = dense.astype(np.int64)
        self.lbas = lbas
        self.n_rows = int(trace.block_writes.size)
        self.history = int(history)
        self._allocate(int(capacity), int(max_rows), len(names))

    def _allocate(self, capacity: int, max_rows: int, F: int) -> None:
        """The per-LBA rows and the windows buffer (a subclass may keep them otherwise)."""
        self.hist = np.zeros((capacity, self.history - 1, F), np.float32)
        self.buffer = np.zeros((max_rows, self.history, F), np.float32)

    @property
    def position(self) -> int:
        """The next block write (row) the stream produces."""
        return self.features.position

    def next(self, n: int, offset: int = 0) -> np.ndarray:
        """Windows of the next ``n`` block writes, written to ``buffer[offset:offset + n]``."""
        if offset + n > self.buffer.shape[0]:
            raise ValueError(f"{n} windows at offset {offset} exceed the buffer of {self.buffer.shape[0]}")
        lo = self.position
        # only this stream's columns, straight from the feature kernel (no full feature matrix)
        raw = np.empty((n, len(self.columns)), np.int64)
        raw = raw[: self.features.next_into(raw, self.columns)]
        if self.log:
            rows_t = log_features_by_column(raw, self.names)
        else:
            rows_t = np.ascontiguousarray(raw.T, dtype=np.float32)
        for c, values in self.overrides.items():
            rows_t[c] = values[lo : lo + raw.shape[0]]
        out = self.buffer[offset : offset + n]
        self._advance(np.ascontiguousarray(self.lbas[lo : lo + n], dtype=np.int64), rows_t, out, offset)
        return out

    def _advance(self, lbas: np.ndarray, rows_t: np.ndarray, out: np.ndarray, offset: int) -> None:
        """Write the windows of ``lbas`` (their rows ``rows_t``, feature-major) to ``out`` and
        append the rows to their LBAs' (``offset``: where ``out`` starts in the buffer)."""
        _advance_windows(lbas, rows_t, self.hist, out)


def sequence_scalars(**extra) -> np.dtype:
    """A sequence scheme's scalars record: the fields :class:`SequencePolicy` and
    :func:`count_and_sample` use, then the scheme's own (``name=numpy type``)."""
    return scalar_fields(
        chunk_start=np.int64,  # logical time of the current chunk's first write (windows index)
        prefill=np.int64,  # prefill writes (not placed by the model, not sampled)
        sample_every=np.int64,  # one in this many user writes becomes a training sample
        counted_writes=np.int64,  # user writes counted for sampling so far
        mode=np.int64,  # 1 once a model is deployed, 0 before
        copy_windows=np.int64,  # 1: a sampled write's window is copied by the loop, 0: before it
        **extra,
    )


@nb.njit(cache=True, inline="always")
def count_and_sample(st, ring, ring_windows, windows, lba, now, pred):
    """Count a user write; every ``st.sample_every``-th becomes a training sample: the ring
    records it and keeps its window (``windows[now - st.chunk_start]``, this chunk's, unless
    the policy copied it already: ``copy_windows``). ``st`` is the scheme's scalars record
    (:func:`sequence_scalars`)."""
    st.counted_writes += 1
    if st.counted_writes % st.sample_every == 0:
        slot = ring_record(ring, lba, now - st.prefill, now, pred)
        if st.copy_windows:  # else the policy copied it before the loop (windows ahead)
            k = now - st.chunk_start
            for j in range(windows.shape[1]):  # element by element: the loop runs without NRT
                for f in range(windows.shape[2]):
                    ring_windows[slot, j, f] = windows[k, j, f]


def fit_sequence_model(
    name: str, params: dict, X: np.ndarray, y: np.ndarray, n_out: int, seed: int, val_fraction: float = 0.2
):
    """Train a sequence model on time-ordered windows, the latest ``val_fraction`` held out
    (early stopping, validation metrics). Inputs are pre-logged (:func:`log_features`), so the
    scaler only standardises. Returns ``(model, val_slice, seconds)``."""
    from dogi_ml.models import make_model

    model = make_model(name, n_out, X.shape[-1], seed=seed, **params)
    if not getattr(model, "sequence", False):
        raise ValueError(f"model {name} is not a sequence model (gru, tcn); it cannot take per-LBA histories")
    model.scaler.log_columns = []
    cut = int(len(X) * (1.0 - val_fraction))
    t0 = time.perf_counter()
    model.fit(X[:cut], y[:cut], X[cut:], y[cut:])
    return model, slice(cut, len(X)), time.perf_counter() - t0


def cdf_knee(lifetimes: np.ndarray) -> int:
    """Shiro's initial threshold (Algorithm 1, first window): on the curve of sorted lifetimes
    ``(L_i, i)`` (both axes normalised), the sample farthest from the chord joining its ends."""
    L = np.sort(np.asarray(lifetimes, np.float64))
    if L.size < 2 or L[-1] <= L[0]:
        return int(L[-1]) if L.size else 1
    x = (L - L[0]) / (L[-1] - L[0])
    y = np.arange(L.size) / (L.size - 1)
    return max(1, int(L[int(np.argmax(np.abs(y - x)))]))


def scaled(value: float, capacity: int, floor: int = 1) -> int:
    """A paper value at 128 GiB, scaled to ``capacity`` blocks."""
    return max(floor, int(round(value * capacity / PAPER_CAPACITY)))


def _pieces(n: int) -> list[tuple[int, int]]:
    """``(first row, rows)`` of the pieces of ``PIPELINE_ROWS`` writes a chunk of ``n`` is built
    and inferred in (one piece without the pipeline); windows built ahead follow the same cut."""
    step = PIPELINE_ROWS or n
    return [(s, min(step, n - s)) for s in range(0, n, step)]


def _share_row(n: int, share: int, batch: int) -> int:
    """The first row of share ``share`` when a piece of ``n`` rows is split by rows (a model
    without per-LBA state), rounded to whole inference batches of ``batch`` rows."""
    if share >= SHARES:
        return n
    return min(n, round(n * share / SHARES / batch) * batch)


class SequencePolicy(PlacementPolicy):
    """Skeleton of an online-trained sequence-model placement scheme.

    Subclasses set ``name``, ``DEFAULTS`` (merged over :attr:`COMMON`), the Numba functions,
    and implement :meth:`_bind_state`, :meth:`_train` and :meth:`_deploy_predictions`.
    Conventions of the policy state (a namedtuple): a ``scalars`` field whose record has the
    :func:`sequence_scalars` fields, and the fields of :meth:`_sampling_arrays` (``ring``,
    ``ring_windows``, ``windows``).
    """

    COMMON = {
        "model_params": {},  # merged over the scheme's model defaults
        "features": [],
        "history": 8,  # writes per LBA window (as conf/model/gru.yaml)
        "sample_every": 10,  # one in N user writes becomes a training sample
        "max_samples": 100_000,  # ring size; x sample_every should exceed the longest label bound
        "max_train": 16_000,  # latest labelled samples used per retraining
        "min_samples": 2_000,  # labelled samples needed before the first model
        "retrain_every": None,  # user writes between retrainings; None = 100 GiB (26M blocks) scaled
        "seed": 0,
    }
    DEFAULTS: dict = {}
    MODEL: str = ""
    MODEL_DEFAULTS: dict = {}
    #: the stream log-transforms count-like features (False: raw values, e.g. Shiro's digits)
    LOG_INPUTS = True
    #: each piece's inference is split between the two threads (:meth:`_infer_share`): by rows
    #: for a model without per-LBA state, by LBA for one with (PHFTL cached, Shiro)
    SPLIT_INFERENCE = False
    #: with split inference, the next chunk's windows are built during this chunk's loop; off
    #: for a scheme whose per-LBA rows must stand at the chunk's end when it retrains (Shiro
    #: builds its first states from them)
    WINDOWS_AHEAD = True
    OUTPUT_DTYPE = np.float32  # the model's output per write (the split's output buffer)
    INFER_BATCH: int | None = None  # rows per forward pass (None: the module's INFER_BATCH)
    victim = "cost_benefit"  # policy.victim: DOGI §5.1, PHFTL, SepBIT and ML-DT use cost-benefit

    def __init__(self, n_groups: int, **params):
        accepted = {**self.COMMON, **self.DEFAULTS}
        unknown = set(params) - set(accepted)
        if unknown:
            raise ValueError(
                f"policy {self.name}: unknown parameter(s) {sorted(unknown)}; accepted: {sorted(accepted)}"
            )
        cfg = {**accepted, **params}
        cfg["model_params"] = {**self.MODEL_DEFAULTS, **dict(cfg["model_params"] or {})}
        for key in ("history", "sample_every", "max_samples", "max_train", "min_samples"):
            if int(cfg[key]) < 1:
                raise ValueError(f"policy {self.name}: {key} must be >= 1, got {cfg[key]}")
        if cfg["retrain_every"] is not None and int(cfg["retrain_every"]) < 1:
            raise ValueError(f"policy {self.name}: retrain_every must be >= 1 user writes, got {cfg['retrain_every']}")
        if not cfg["features"]:
            raise ValueError(f"policy {self.name}: params.features is empty")
        bad = [f for f in cfg["features"] if f not in FEATURES]
        if bad:
            raise ValueError(f"policy {self.name}: unknown feature(s) {bad}; known: {', '.join(FEATURES)}")
        from dogi_ml.models import make_model

        # unknown model parameters fail here rather than at the first retraining
        make_model(self.MODEL, 2, len(cfg["features"]), **cfg["model_params"])
        self.cfg = cfg
        self._windows_pool = None  # the windows thread (_window_thread), started on first use
        self.main_shares = SHARES * 2 // 3  # the main thread's inference shares (split inference)
        self.states_rebuilt = 0  # per-LBA states rebuilt from windows (PHFTL cached)
        self._ahead = None  # the next chunk's windows, building on the second thread: (lo, n, futures)
        self.ahead_chunks = 0  # chunks whose windows were built during the previous chunk's loop
        super().__init__(n_groups)

    # -- setup -----------------------------------------------------------------------------
    def bind(self, ctx: SimContext) -> tuple:
        c = self.cfg
        if ctx.trace is None:
            raise ValueError(
                f"policy {self.name} needs the trace (its features) to run its model: "
                "use the simulate command or pass trace= to the Simulator"
            )
        self.capacity = cap = ctx.capacity
        self.prefill = ctx.prefill_blocks
        self.retrain_every = int(c["retrain_every"] or scaled(26_000_000, cap, 1000))
        self.max_chunk_blocks = min(self.retrain_every, MAX_CHUNK)  # retraining happens between chunks
        self.stream = self._make_stream(ctx)
        self.ring = SampleRing(cap, int(c["max_samples"]), pending=self._ring_pending(cap))
        self.ring_windows = np.zeros((int(c["max_samples"]), int(c["history"]), len(c["features"])), np.float32)
        self.window_s = 0.0
        self.model = None
        self.last_train = 0
        self.history: list[dict] = []
        self.infer_s = 0.0
        self.infer_blocks = 0
        self.train_s = 0.0
        self.state = self._bind_state(ctx)
        st = record(self.state.scalars)
        st.prefill = self.prefill
        st.sample_every = int(c["sample_every"])
        st.mode = 0
        # windows ahead: the next chunk's are built on the second thread during the loop, so
        # the loop does not copy sampled windows (_copy_samples does, before it runs)
        self._ahead = None
        st.copy_windows = int(not (self.SPLIT_INFERENCE and PIPELINE_ROWS))
        return self.state

    def _make_stream(self, ctx: SimContext) -> SequenceStream:
        """The windows of the trace's block writes (bound ``capacity`` and chunk size)."""
        c = self.cfg
        return SequenceStream(
            ctx.trace,
            self.capacity,
            list(c["features"]),
            int(c["history"]),
            self.max_chunk_blocks,
            log=self.LOG_INPUTS,
            overrides=self._feature_overrides(ctx),
        )

    def _bind_state(self, ctx: SimContext) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    def _feature_overrides(self, ctx: SimContext) -> dict | None:
        """Per-block-write columns replacing features of the stream (default none)."""
        return None

    # -- between chunks --------------------------------------------------------------------
    def before_chunk(self, sim, start: int, n_writes: int) -> None:
        st = record(self.state.scalars)
        st.chunk_start = start
        a = start - self.prefill  # feature row of the chunk's first write
        lo, hi = max(a, 0), min(a + n_writes, self.stream.n_rows)
        self._clear_predictions(n_writes)  # writes beyond the trace's features: no prediction
        ahead, self._ahead = self._ahead, None
        if hi > lo:
            n = hi - lo
            if ahead is not None and ahead[:2] != (lo, n):
                raise RuntimeError(
                    f"policy {self.name}: windows prepared for writes {ahead[:2]}, the chunk has {(lo, n)}"
                )
            if ahead is None and self.stream.position != lo:
                raise RuntimeError(f"policy {self.name}: windows at write {self.stream.position}, chunk starts at {lo}")
            futures = ahead[2] if ahead is not None else None
            self.ahead_chunks += futures is not None
            if self.model is None or st.mode == 0:  # windows only: sampled writes keep their window
                if futures is None:
                    self.window_s += self._timed_windows(n, lo - a)[1]
                for f in futures or ():
                    self.window_s += f.result()[1]
            else:
                self._windows_and_inference(lo, a, n, futures)
                self.infer_blocks += n
        if not st.copy_windows:
            self._copy_samples(st, start, n_writes)
            if self.WINDOWS_AHEAD:
                self._prepare_next(sim.next_chunk(start, n_writes))

    def _windows_and_inference(self, lo: int, a: int, n: int, futures: list | None) -> None:
        """Windows (the stream's per-LBA rows, in order) and inference (in order: a cached state
        follows the previous piece's), in pieces of ``PIPELINE_ROWS`` writes. Both release the
        GIL: the second thread builds the next piece's windows while this one infers (or took
        them all ahead, ``futures``, while the loop applied the previous chunk), and each piece's
        inference is split between the threads once the second is free (:meth:`_infer_share`).
        Same windows and predictions as one after the other."""
        pieces = _pieces(n)
        split = bool(PIPELINE_ROWS) and self.SPLIT_INFERENCE
        pending = None  # the next piece's windows, building on the second thread
        for k, (s, m) in enumerate(pieces):
            if futures is not None:
                X, secs = futures[k].result()
            else:
                X, secs = pending.result() if pending is not None else self._timed_windows(m, lo - a + s)
            self.window_s += secs
            pending = None
            # while the second thread still builds this chunk's windows, a share given to it
            # would wait behind them: this thread infers the piece alone
            share = split and (futures is None or futures[-1].done())
            if share:
                out = self._new_output(m)
                cut = self.main_shares
                other = self._window_thread().submit(self._timed_share, X, lo + s, out, cut, SHARES)
            if futures is None and PIPELINE_ROWS and k + 1 < len(pieces):
                s1, m1 = pieces[k + 1]
                pending = self._window_thread().submit(self._timed_windows, m1, lo - a + s1)
            t0 = time.perf_counter()
            if share:
                self.states_rebuilt += self._infer_share(X, lo + s, out, 0, cut)
                mine = time.perf_counter() - t0
                rebuilt, theirs = other.result()
                self.states_rebuilt += rebuilt
                self.infer_s += mine + theirs  # inference seconds on both threads
                self._balance_shares(mine, theirs, secs if pending is not None else 0.0)
            else:
                out = self._infer_chunk(X, lo + s)
                self.infer_s += time.perf_counter() - t0
            self._deploy_predictions(out, lo - a + s)

    def _copy_samples(self, st, start: int, n_writes: int) -> None:
        """Windows ahead (``copy_windows`` off): the loop will sample every ``sample_every``-th
        counted user write of the chunk (:func:`count_and_sample`); their windows go now to the
        ring slots it will give them, so the loop never reads the windows buffer and the second
        thread may fill it with the next chunk's meanwhile."""
        ks = self._sampled_writes(st, start, n_writes)
        size = self.ring_windows.shape[0]
        slots = (int(self.state.ring.count[0]) + np.arange(len(ks))) % size
        # more samples than slots: the later ones take the slots, as in the loop
        self.ring_windows[slots[-size:]] = self._sampled_windows(ks, min(size, len(ks)))

    def _sampled_writes(self, st, start: int, n_writes: int) -> np.ndarray:
        """The writes of the chunk (indices from its first) the loop will sample: every
        ``sample_every``-th user write counted by :func:`count_and_sample`."""
        every = int(st.sample_every)
        k0 = max(0, self.prefill - start)  # the prefill's writes are not counted
        return np.arange(k0 + (-(int(st.counted_writes) + 1)) % every, n_writes, every)

    def _sampled_windows(self, ks: np.ndarray, keep: int) -> np.ndarray:
        """The windows of the last ``keep`` of the chunk's sampled writes ``ks``
        (:meth:`_sampled_writes`)."""
        return self.stream.buffer[ks[len(ks) - keep :]]

    def _prepare_next(self, nxt: tuple[int, int] | None) -> None:
        """Start the next chunk's windows on the second thread, in pieces, while the loop
        applies this one (windows come from the trace alone: no result of the loop is needed)."""
        if nxt is None:
            return
        a = nxt[0] - self.prefill
        lo, hi = max(a, 0), min(a + nxt[1], self.stream.n_rows)
        if hi <= lo:
            return
        n = hi - lo
        pool = self._window_thread()
        futures = [pool.submit(self._timed_windows, m, lo - a + s) for s, m in _pieces(n)]
        self._ahead = (lo, n, futures)

    def _balance_shares(self, mine: float, theirs: float, windows: float) -> None:
        """Move the split so both threads finish a piece together: the second thread also
        builds the next piece's windows (about ``windows`` seconds), so the main thread takes
        ``SHARES / 2 + windows / (2 g)`` shares, ``g`` the inference seconds per share. Only the
        timing depends on it: each LBA stays on one thread per piece, in order."""
        g = (mine + theirs) / SHARES
        if g <= 0:
            return
        target = min(SHARES - 1, max(SHARES // 2, SHARES / 2 + windows / (2 * g)))
        self.main_shares = int(round((self.main_shares + target) / 2))

    def _new_output(self, n: int) -> np.ndarray:
        return np.empty(n, self.OUTPUT_DTYPE)

    def _infer_share(self, X: np.ndarray, row: int, out: np.ndarray, lo: int, hi: int) -> int:
        """Model outputs into ``out`` for share ``lo .. hi-1`` of the piece ``X`` (writes ``row ..``);
        returns the states rebuilt. Here (a model without per-LBA state) share ``s`` starts at
        row ``s / SHARES`` of the piece, rounded to whole inference batches, so every batch holds
        the rows it holds without the split and gives the same outputs."""
        batch = self._infer_batch()
        a, b = _share_row(len(X), lo, batch), _share_row(len(X), hi, batch)
        if b > a:
            out[a:b] = self._infer_chunk(X[a:b], row + a)
        return 0

    def _timed_share(self, X: np.ndarray, row: int, out: np.ndarray, lo: int, hi: int) -> tuple:
        t0 = time.perf_counter()
        return self._infer_share(X, row, out, lo, hi), time.perf_counter() - t0

    def _timed_windows(self, n: int, offset: int) -> tuple:
        """The next ``n`` windows (into the buffer at ``offset``) and the seconds they took."""
        t0 = time.perf_counter()
        return self.stream.next(n, offset=offset), time.perf_counter() - t0

    def _window_thread(self):
        if self._windows_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._windows_pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-windows")
        return self._windows_pool

    def _infer_batch(self) -> int:
        return self.INFER_BATCH or INFER_BATCH

    def _infer_chunk(self, X: np.ndarray, row: int) -> np.ndarray:
        """The model's output for the windows ``X`` of block writes ``row ..`` (batched)."""
        batch = self._infer_batch()
        return np.concatenate([self._model_output(X[i : i + batch]) for i in range(0, len(X), batch)])

    def _model_output(self, X: np.ndarray) -> np.ndarray:
        return self.model.predict(X)

    def _clear_predictions(self, n: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _deploy_predictions(self, out: np.ndarray, offset: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def between_chunks(self, sim) -> None:
        user = sim.user_writes
        if user - self.last_train < self.retrain_every:
            return
        self.last_train = user
        now = int(sim.state.ctr[0])
        entry = {"user_writes": user}
        if self._train(now, entry):
            record(self.state.scalars).mode = 1
        self.history.append(entry)

    def _train(self, now: int, entry: dict) -> bool:  # pragma: no cover - abstract
        """Retrain from the ring; fill ``entry``; return True if a model is deployed."""
        raise NotImplementedError

    def _latest(self, data: dict) -> np.ndarray:
        """Indices of the latest ``max_train`` labelled samples (time order)."""
        n = len(data["row"])
        return np.arange(max(0, n - int(self.cfg["max_train"])), n)

    def _windows(self, data: dict, idx: np.ndarray) -> np.ndarray:
        """The windows the ring kept for the samples ``idx`` of a :meth:`SampleRing.collect`."""
        return self.ring_windows[data["slot"][idx]]

    def _ring_pending(self, capacity: int) -> np.ndarray | None:
        """The sample ring's per-LBA ``pending`` slots: None for an array of its own, or an int32
        view (a field of the scheme's per-LBA rows, so a write touches one line for both)."""
        return None

    def _sampling_arrays(self) -> dict:
        """The state's fields for :func:`count_and_sample`: ``ring`` (the sample ring),
        ``ring_windows`` (each sample's window) and ``windows`` (this chunk's windows)."""
        return {"ring": self.ring.arrays(), "ring_windows": self.ring_windows, "windows": self.stream.buffer}

    def common_summary(self) -> dict:
        return {
            "retrains": sum(1 for h in self.history if "train_seconds" in h),
            "train_seconds": self.train_s,
            # CPU seconds of inference per block, both threads' shares summed when split
            "inference_ns_per_block": 1e9 * self.infer_s / self.infer_blocks if self.infer_blocks else None,
            # the main thread's part of each piece's inference at the end (split inference)
            "inference_main_share": self.main_shares / SHARES if self.SPLIT_INFERENCE and PIPELINE_ROWS else None,
            "windows_ahead_chunks": self.ahead_chunks,
            "window_ns_per_block": 1e9 * self.window_s / self.stream.position if self.stream.position else None,
            "inferred_blocks": self.infer_blocks,
            "mode": "model" if record(self.state.scalars).mode else "fallback (no model yet)",
            "training_history": self.history,
        }
