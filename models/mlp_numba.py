"""The DOGI MLP's training loop in Numba: ReLU layers with dropout, softmax cross-entropy, Adam
with PyTorch's semantics (L2 weight decay added to the gradient, bias correction).

PyTorch spends ~1 ms per mini-batch of 128 on dispatch for a 1.6K-parameter network; this loop
does the same arithmetic (float32 matrix products through BLAS) in ~30 µs, so 300K samples x
10 epochs train in about a second on one core. :func:`one_step_reference` exposes a single
step for the parity test against PyTorch autograd.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _forward(x, Ws, bs, masks, keep, train):
    """Activations of every layer (input first); the last is the logits."""
    acts = [x]
    h = x
    n_layers = len(Ws)
    for i in range(n_layers):
        z = h @ Ws[i] + bs[i]
        if i < n_layers - 1:
            z = np.maximum(z, np.float32(0.0))
            if train and keep < 1.0:
                z = z * masks[i]
        acts.append(z)
        h = z
    return acts


@nb.njit(cache=True)
def _step(xb, yb, Ws, bs, mW, vW, mb, vb, t, lr, wd, beta1, beta2, eps, keep, train_dropout):
    n = xb.shape[0]
    n_layers = len(Ws)
    masks = []
    for i in range(n_layers - 1):
        m = (np.random.random((n, Ws[i].shape[1])) < keep).astype(np.float32) / np.float32(keep)
        masks.append(m)
    acts = _forward(xb, Ws, bs, masks, keep, train_dropout)
    logits = acts[n_layers]
    # softmax cross-entropy, mean over the batch
    mx = np.empty(n, np.float32)
    for r in range(n):
        mx[r] = logits[r].max()
    e = np.exp(logits - mx.reshape(-1, 1))
    s = e.sum(axis=1).reshape(-1, 1)
    p = e / s
    loss = 0.0
    for r in range(n):
        loss -= np.log(max(p[r, yb[r]], 1e-30))
    loss /= n
    g = p.copy()
    for r in range(n):
        g[r, yb[r]] -= 1.0
    g /= np.float32(n)
    beta1_t = 1.0 - beta1**t
    beta2_t = 1.0 - beta2**t
    for i in range(n_layers - 1, -1, -1):
        a = acts[i]
        gW = a.T @ g
        gb = g.sum(axis=0)
        if i > 0:
            g = g @ Ws[i].T
            # through dropout and ReLU of layer i-1's output
            if train_dropout and keep < 1.0:
                g = g * masks[i - 1]
            g = g * (acts[i] > 0)
        # Adam (PyTorch: weight decay joins the gradient; biases decay too)
        gW = gW + np.float32(wd) * Ws[i]
        gb = gb + np.float32(wd) * bs[i]
        mW[i][:] = beta1 * mW[i] + (1 - beta1) * gW
        vW[i][:] = beta2 * vW[i] + (1 - beta2) * gW * gW
        mb[i][:] = beta1 * mb[i] + (1 - beta1) * gb
        vb[i][:] = beta2 * vb[i] + (1 - beta2) * gb * gb
        Ws[i][:] = Ws[i] - lr * (mW[i] / beta1_t) / (np.sqrt(vW[i] / beta2_t) + eps)
        bs[i][:] = bs[i] - lr * (mb[i] / beta1_t) / (np.sqrt(vb[i] / beta2_t) + eps)
    return loss


@nb.njit(cache=True)
def _epoch(X, y, order, batch, Ws, bs, mW, vW, mb, vb, t0, lr, wd, keep, seed):
    np.random.seed(seed)
    total = 0.0
    t = t0
    n = order.shape[0]
    for start in range(0, n, batch):
        idx = order[start : start + batch]
        xb = np.empty((idx.shape[0], X.shape[1]), np.float32)
        yb = np.empty(idx.shape[0], np.int64)
        for k in range(idx.shape[0]):
            xb[k] = X[idx[k]]
            yb[k] = y[idx[k]]
        t += 1
        total += _step(xb, yb, Ws, bs, mW, vW, mb, vb, t, lr, wd, 0.9, 0.999, 1e-8, keep, True) * idx.shape[0]
    return total / n, t


@nb.njit(cache=True)
def _logits(X, Ws, bs):
    h = X
    for i in range(len(Ws)):
        h = h @ Ws[i] + bs[i]
        if i < len(Ws) - 1:
            h = np.maximum(h, np.float32(0.0))
    return h


def init_weights(sizes: list[int], seed: int) -> tuple[list, list]:
    """PyTorch's ``nn.Linear`` initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    rng = np.random.Generator(np.random.PCG64(seed))
    Ws, bs = [], []
    for a, b in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(a)
        Ws.append(rng.uniform(-bound, bound, (a, b)).astype(np.float32))
        bs.append(rng.uniform(-bound, bound, b).astype(np.float32))
    return Ws, bs


def typed(arrays):
    out = nb.typed.List()
    for a in arrays:
        out.append(np.array(a, dtype=np.float32, order="C", copy=True))
    return out


class NumbaMLPTrainer:
    """Holds weights and Adam state; ``epoch`` runs one pass in the given order."""

    def __init__(self, sizes: list[int], seed: int, lr: float, weight_decay: float, dropout: float):
        Ws, bs = init_weights(sizes, seed)
        self.Ws, self.bs = typed(Ws), typed(bs)
        self.mW, self.vW = typed([np.zeros_like(w) for w in Ws]), typed([np.zeros_like(w) for w in Ws])
        self.mb, self.vb = typed([np.zeros_like(b) for b in bs]), typed([np.zeros_like(b) for b in bs])
        self.t = 0
        self.lr, self.wd, self.keep = float(lr), float(weight_decay), 1.0 - float(dropout)

    def epoch(self, X: np.ndarray, y: np.ndarray, order: np.ndarray, batch: int, seed: int) -> float:
        loss, self.t = _epoch(
            np.ascontiguousarray(X, np.float32),
            np.ascontiguousarray(y, np.int64),
            np.ascontiguousarray(order, np.int64),
            int(batch),
            self.Ws,
            self.bs,
            self.mW,
            self.vW,
            self.mb,
            self.vb,
            self.t,
            self.lr,
            self.wd,
            self.keep,
            int(seed),
        )
        return float(loss)

    def logits(self, X: np.ndarray) -> np.ndarray:
        return _logits(np.ascontiguousarray(X, np.float32), self.Ws, self.bs)

    def weights(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(w.copy(), b.copy()) for w, b in zip(self.Ws, self.bs)]

    def set_weights(self, weights) -> None:
        for i, (w, b) in enumerate(weights):
            self.Ws[i][:] = w
            self.bs[i][:] = b


def one_step_reference(X, y, Ws, bs, lr, wd):
    """One Adam step without dropout from the given weights (for the parity test)."""
    Ws, bs = typed(Ws), typed(bs)
    zeros = lambda arrs: typed([np.zeros_like(a) for a in arrs])  # noqa: E731
    loss = _step(
        np.ascontiguousarray(X, np.float32),
        np.ascontiguousarray(y, np.int64),
        Ws,
        bs,
        zeros(Ws),
        zeros(Ws),
        zeros(bs),
        zeros(bs),
        1,
        lr,
        wd,
        0.9,
        0.999,
        1e-8,
        1.0,
        False,
    )
    return float(loss), [w.copy() for w in Ws], [b.copy() for b in bs]
